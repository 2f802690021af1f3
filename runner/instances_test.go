package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
	"github.com/taoflow/taoflow/state"
	"github.com/taoflow/taoflow/steps"
)

// cloud is a platform of instances that can be made unreachable, stopped
// or taken away behind the run's back; it records what is asked of it.
type cloud struct {
	mu       sync.Mutex
	where    map[string]error // Find's answer by ref; nil: there
	down     map[string]bool  // Exec fails as a refused connection
	calls    []string
	deleteOK bool
}

func (c *cloud) Kind() string { return "brev" }

func (c *cloud) log(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, s)
}

func (c *cloud) Exec(ctx context.Context, inst platform.Instance, script string, stdin io.Reader) (platform.Result, error) {
	c.log("exec " + inst.Ref)
	c.mu.Lock()
	down := c.down[inst.Ref]
	c.mu.Unlock()
	if down {
		return platform.Result{ExitCode: -1}, &platform.ExecError{Instance: inst.Name, Err: errors.New("Connection refused")}
	}
	return platform.Result{}, nil
}

func (c *cloud) Create(ctx context.Context, run string, spec platform.Spec) (platform.Instance, error) {
	c.log("create " + spec.Name)
	return platform.Instance{Name: spec.Name, Ref: "tf-" + spec.Name, Created: true}, nil
}

func (c *cloud) Delete(ctx context.Context, inst platform.Instance) error {
	c.log("delete " + inst.Ref)
	if !c.deleteOK {
		return errors.New("delete failed")
	}
	return nil
}

func (c *cloud) Find(ctx context.Context, inst platform.Instance) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.where[inst.Ref]
}

func (c *cloud) count(prefix string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.calls {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

// TestReleaseOutcomes: Release (without a delete step) deletes an
// instance the run created although its jobs cannot be stopped, counts one
// the platform no longer lists as deleted without reaching it, does not
// stop jobs where none was launched, and says what became of each.
func TestReleaseOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		create    bool
		keep      bool
		launched  bool
		where     error
		down      bool
		delFails  bool
		want      engine.ReleaseOutcome
		wantErr   bool
		execs     int
		deletes   int
		wantState string
	}{
		{name: "jobs cannot be stopped", create: true, launched: true, down: true,
			want: engine.ReleaseDeleted, execs: 1, deletes: 1, wantState: state.ResourceDeleted},
		{name: "gone behind the back", create: true, launched: true, down: true, where: fmt.Errorf("x: %w", platform.ErrNotFound),
			want: engine.ReleaseDeleted, execs: 0, deletes: 0, wantState: state.ResourceDeleted},
		{name: "stopped behind the back", create: true, launched: true, down: true, where: fmt.Errorf("x: %w", platform.ErrStopped),
			want: engine.ReleaseDeleted, execs: 0, deletes: 1, wantState: state.ResourceDeleted},
		{name: "delete fails", create: true, launched: true, down: true, delFails: true,
			want: engine.ReleaseUnknown, wantErr: true, execs: 1, deletes: 1, wantState: state.ResourceDeleteFailed},
		{name: "kept", create: true, keep: true, launched: true,
			want: engine.ReleaseKept, execs: 1, deletes: 0, wantState: state.ResourceKept},
		{name: "existing, no job launched, unreachable", down: true,
			want: engine.ReleaseLeftAlone, execs: 0},
		{name: "existing, jobs cannot be stopped", launched: true, down: true,
			want: engine.ReleaseLeftAlone, wantErr: true, execs: 1},
		{name: "existing, gone behind the back", launched: true, down: true, where: fmt.Errorf("x: %w", platform.ErrNotFound),
			want: engine.ReleaseLeftAlone, execs: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			store, err := state.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			const run = "rel-1203-000000-abcd"
			if err := store.CreateRun(ctx, state.Run{ID: run, Name: "rel", State: state.RunRunning, StartedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
			pi := &plan.Instance{Name: "gpu", Create: tc.create, Keep: tc.keep}
			if !tc.create {
				pi.Existing = "box"
			}
			p := &plan.Plan{Instances: []*plan.Instance{pi}}
			c := &cloud{where: map[string]error{"tf-gpu": tc.where}, down: map[string]bool{"tf-gpu": tc.down}, deleteOK: !tc.delFails}
			st := steps.New(steps.Config{Platform: c, RunID: run, Plan: p})
			in := newInstances(run, p, c, store, st)
			if err := in.Acquire(ctx, "gpu"); err != nil {
				t.Fatal(err)
			}
			if !tc.create {
				// Existing: Create (the readiness check) gives back the
				// instance not created.
				in.live["gpu"] = platform.Instance{Name: "gpu", Ref: "tf-gpu"}
			}
			if tc.launched {
				if _, err := store.RecordIntent(ctx, state.Resource{RunID: run, Kind: state.KindJob, Name: "tf-job", Instance: "gpu", Platform: "brev"}); err != nil {
					t.Fatal(err)
				}
			}
			var notes []string
			in.notify = func(_, msg string) { notes = append(notes, msg) }
			got, err := in.Release(ctx, "gpu", engine.ReleaseDelete)
			if got != tc.want || (err != nil) != tc.wantErr {
				t.Errorf("Release = %v, %v; want %v (error: %t)", got, err, tc.want, tc.wantErr)
			}
			if n := c.count("exec "); n != tc.execs {
				t.Errorf("%d execs; want %d", n, tc.execs)
			}
			if n := c.count("delete "); n != tc.deletes {
				t.Errorf("%d deletes; want %d", n, tc.deletes)
			}
			if tc.name == "jobs cannot be stopped" && !slices.ContainsFunc(notes, func(s string) bool { return strings.Contains(s, "deleting it stops them") }) {
				t.Errorf("the failed job stop was not reported: %q", notes)
			}
			res, err := store.Resources(ctx, run)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res {
				if r.Kind == state.KindInstance && r.State != tc.wantState {
					t.Errorf("instance recorded %s (%s); want %s", r.State, r.Message, tc.wantState)
				}
				if r.Kind == state.KindJob && tc.want == engine.ReleaseDeleted && r.State != state.ResourceDeleted {
					t.Errorf("the job on a deleted instance is recorded %s", r.State)
				}
			}
		})
	}
}

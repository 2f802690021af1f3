package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/taoflow/taoflow/engine"
)

// salvagePlan is one cell per instance a and b: run, wait, upload.
const salvagePlan = `
taoflow: 1
name: salvage
%s
instances:
  a: {}
  b: {}
steps:
  - id: train
    uses: run
    matrix:
      lr: [1, 2]
    with: {command: train}
  - id: wait
    uses: wait
    needs: [train]
    matrix: inherit
  - id: upload
    uses: upload-s3
    needs: [wait]
    matrix: inherit
    with: {from: ~/r, to: "file:///tmp/r"}
`

// salvageTasks records the salvage tasks an executor saw, by node.
type salvageTasks struct {
	mu      sync.Mutex
	partial map[string]string
	ctxErr  map[string]error
}

func (s *salvageTasks) saw(ctx context.Context, tk *engine.Task) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if tk.Salvage {
		s.partial[tk.Node.ID] = tk.Partial
		s.ctxErr[tk.Node.ID] = ctx.Err()
	}
}

func newSalvageTasks() *salvageTasks {
	return &salvageTasks{partial: map[string]string{}, ctxErr: map[string]error{}}
}

// TestSalvageAfterFailedTraining: a cell whose job failed (its wait
// failed) still has its upload run, as a salvage task marked partial,
// before its instance is deleted; the other cell is not touched; the
// instance is deleted, not stopped.
func TestSalvageAfterFailedTraining(t *testing.T) {
	g := mustPlan(t, fmt.Sprintf(salvagePlan, ""))
	seen := newSalvageTasks()
	f := newFake(func(ctx context.Context, tk *engine.Task) error {
		seen.saw(ctx, tk)
		if tk.Node.ID == "wait[lr=1]" {
			return errors.New("job failed: exit code 2")
		}
		return nil
	})
	s := run(t, g, f)
	checkStates(t, s, map[string]engine.NodeState{
		"wait[lr=1]": engine.Failed, "upload[lr=1]": engine.Succeeded, "upload[lr=2]": engine.Succeeded,
	})
	if diff := cmp.Diff(map[string]string{"upload[lr=1]": "upstream wait[lr=1] failed"}, seen.partial); diff != "" {
		t.Errorf("salvage tasks (-want +got):\n%s", diff)
	}
	if msg := s.Messages["upload[lr=1]"]; !strings.Contains(msg, "salvaged (partial results: upstream wait[lr=1] failed)") {
		t.Errorf("message = %q", msg)
	}
	on := s.Placement["upload[lr=1]"]
	end, rel := f.index("end upload[lr=1] on "+on), f.index("release "+on+" delete")
	if end < 0 || rel < 0 || end > rel {
		t.Errorf("the salvage upload did not end before the release of %s: %v", on, f.log)
	}
	if len(s.Stopped) != 0 || !s.Failed() {
		t.Errorf("Stopped = %v, Failed = %v", s.Stopped, s.Failed())
	}
	if !slices.ContainsFunc(f.events, func(e engine.Event) bool {
		return e.Type == engine.NodeSalvage && e.Node == "upload[lr=1]"
	}) {
		t.Error("no node-salvage event")
	}
}

// TestSalvageNothingToCopy: a salvage task that finds nothing ends as the
// node would have without salvage (skipped), and its instance is deleted.
func TestSalvageNothingToCopy(t *testing.T) {
	g := mustPlan(t, fmt.Sprintf(salvagePlan, ""))
	f := newFake(func(ctx context.Context, tk *engine.Task) error {
		switch {
		case tk.Node.ID == "wait[lr=1]":
			return errors.New("job failed: exit code 2")
		case tk.Salvage:
			return fmt.Errorf("%w: ~/r on a holds no file", engine.ErrNothingToSalvage)
		}
		return nil
	})
	s := run(t, g, f)
	checkStates(t, s, map[string]engine.NodeState{"upload[lr=1]": engine.Skipped})
	if msg, want := s.Messages["upload[lr=1]"], "upstream wait[lr=1] failed; nothing to salvage: ~/r on a holds no file"; msg != want {
		t.Errorf("message = %q, want %q", msg, want)
	}
	if len(s.Stopped) != 0 || len(f.has("release a stop"))+len(f.has("release b stop")) != 0 {
		t.Errorf("an instance was stopped: %v", f.log)
	}
}

// TestSalvageOff: salvage: false leaves the upload skipped, never run.
func TestSalvageOff(t *testing.T) {
	g := mustPlan(t, fmt.Sprintf(salvagePlan, "salvage: false"))
	f := newFake(func(ctx context.Context, tk *engine.Task) error {
		if tk.Node.ID == "wait[lr=1]" {
			return errors.New("job failed: exit code 2")
		}
		return nil
	})
	s := run(t, g, f)
	checkStates(t, s, map[string]engine.NodeState{"upload[lr=1]": engine.Skipped})
	if f.attempts["upload[lr=1]"] != 0 {
		t.Error("the upload ran with salvage: false")
	}
}

// TestSalvageOnCancel: a run cancelled while its jobs train (Ctrl-C, a
// budget stop) waits for the wait to end, then runs the upload on a
// context the cancellation did not end, marked partial with the cause.
func TestSalvageOnCancel(t *testing.T) {
	g := mustPlan(t, fmt.Sprintf(salvagePlan, ""))
	seen := newSalvageTasks()
	ctx, cancel := context.WithCancelCause(t.Context())
	var waiting sync.WaitGroup
	waiting.Add(2)
	f := newFake(func(ctx context.Context, tk *engine.Task) error {
		seen.saw(ctx, tk)
		if tk.Node.Step.ID == "wait" {
			waiting.Done()
			<-ctx.Done()
			return context.Cause(ctx)
		}
		return nil
	})
	go func() {
		waiting.Wait()
		cancel(errors.New("interrupted by SIGINT (Ctrl-C)"))
	}()
	s := runCtx(t, ctx, g, f, nil)
	checkStates(t, s, map[string]engine.NodeState{
		"wait[lr=1]": engine.Canceled, "wait[lr=2]": engine.Canceled,
		"upload[lr=1]": engine.Succeeded, "upload[lr=2]": engine.Succeeded,
	})
	for _, n := range []string{"upload[lr=1]", "upload[lr=2]"} {
		wait := strings.Replace(n, "upload", "wait", 1)
		if want := "upstream " + wait + " canceled; interrupted by SIGINT (Ctrl-C)"; seen.partial[n] != want {
			t.Errorf("%s: partial = %q, want %q", n, seen.partial[n], want)
		}
		if seen.ctxErr[n] != nil {
			t.Errorf("%s ran on a context already ended: %v", n, seen.ctxErr[n])
		}
		if f.index("end "+wait+" on "+s.Placement[n]) > f.index("start "+n+" on "+s.Placement[n]) {
			t.Errorf("%s started before %s ended", n, wait)
		}
	}
	if !s.Interrupted {
		t.Error("not interrupted")
	}
}

// TestSalvageSkipped: SkipSalvage (a second Ctrl-C) cancels a salvage
// upload under way, and the instance is deleted, not stopped to keep
// what it did not copy.
func TestSalvageSkipped(t *testing.T) {
	g := mustPlan(t, fmt.Sprintf(salvagePlan, ""))
	ctx, cancel := context.WithCancelCause(t.Context())
	skip := make(chan struct{})
	var waiting, salvaging sync.WaitGroup
	waiting.Add(2)
	salvaging.Add(2)
	f := newFake(func(ctx context.Context, tk *engine.Task) error {
		switch {
		case tk.Node.Step.ID == "wait":
			waiting.Done()
			<-ctx.Done()
			return context.Cause(ctx)
		case tk.Salvage:
			salvaging.Done()
			<-ctx.Done()
			return context.Cause(ctx)
		}
		return nil
	})
	go func() {
		waiting.Wait()
		cancel(errors.New("interrupted"))
		salvaging.Wait()
		close(skip)
	}()
	s := runCtx(t, ctx, g, f, skip)
	for _, n := range []string{"upload[lr=1]", "upload[lr=2]"} {
		if s.States[n] != engine.Canceled || s.Messages[n] != "salvage skipped by a second interrupt" {
			t.Errorf("%s = %s (%s)", n, s.States[n], s.Messages[n])
		}
	}
	if len(s.Stopped) != 0 || len(f.has("release a delete")) != 1 || len(f.has("release b delete")) != 1 {
		t.Errorf("Stopped = %v; %v", s.Stopped, f.has("release "))
	}
}

func runCtx(t *testing.T, ctx context.Context, g *engine.Graph, f *fake, skip chan struct{}) engine.Summary {
	t.Helper()
	cfg := engine.Config{RunID: "r1", Executor: f, Instances: f, Observer: f, SkipSalvage: skip}
	return engine.Run(ctx, g, cfg)
}

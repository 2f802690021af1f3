package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/plan"
)

// fake is an in-process platform: an Executor and Instances that record
// what happened and when.
type fake struct {
	mu       sync.Mutex
	do       func(ctx context.Context, t *engine.Task) error
	log      []string // "start X@inst", "end X@inst", "acquire i", "release i delete"
	attempts map[string]int
	running  map[string]int // instance → running cells
	maxRun   map[string]int
	events   []engine.Event
	acquire  func(name string) error
	release  func(name string, mode engine.ReleaseMode) error
}

func newFake(do func(ctx context.Context, t *engine.Task) error) *fake {
	return &fake{do: do, attempts: map[string]int{}, running: map[string]int{}, maxRun: map[string]int{}}
}

func (f *fake) record(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, s)
}

func (f *fake) Execute(ctx context.Context, t *engine.Task) error {
	f.mu.Lock()
	f.attempts[t.Node.ID]++
	if t.Node.Cell != nil {
		f.running[t.Instance]++
		f.maxRun[t.Instance] = max(f.maxRun[t.Instance], f.running[t.Instance])
	}
	f.log = append(f.log, "start "+t.Node.ID+" on "+t.Instance)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		if t.Node.Cell != nil {
			f.running[t.Instance]--
		}
		f.log = append(f.log, "end "+t.Node.ID+" on "+t.Instance)
		f.mu.Unlock()
	}()
	if f.do == nil {
		return nil
	}
	return f.do(ctx, t)
}

func (f *fake) Acquire(ctx context.Context, name string) error {
	f.record("acquire " + name)
	if f.acquire != nil {
		return f.acquire(name)
	}
	return nil
}

func (f *fake) Release(ctx context.Context, name string, mode engine.ReleaseMode) (engine.ReleaseOutcome, error) {
	f.record("release " + name + " " + mode.String())
	outcome := engine.ReleaseDeleted
	if mode == engine.ReleaseStop {
		outcome = engine.ReleaseStopped
	}
	if f.release != nil {
		return outcome, f.release(name, mode)
	}
	return outcome, nil
}

func (f *fake) Event(e engine.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, e)
}

func (f *fake) index(entry string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Index(f.log, entry)
}

func (f *fake) has(prefix string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, l := range f.log {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

func mustPlan(t *testing.T, src string) *engine.Graph {
	t.Helper()
	p, diags := plan.Parse("plan.yaml", []byte(src), plan.Options{})
	if diags.HasErrors() {
		t.Fatalf("plan has errors:\n%s", diags.Error())
	}
	g, err := engine.Expand(p, engine.Options{RunID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func run(t *testing.T, g *engine.Graph, f *fake, mod ...func(*engine.Config)) engine.Summary {
	t.Helper()
	cfg := engine.Config{RunID: "r1", Executor: f, Instances: f, Observer: f}
	for _, m := range mod {
		m(&cfg)
	}
	done := make(chan engine.Summary)
	go func() { done <- engine.Run(t.Context(), g, cfg) }()
	select {
	case s := <-done:
		return s
	case <-time.After(20 * time.Second):
		t.Fatal("the run did not end")
	}
	return engine.Summary{}
}

const sweep = `
taoflow: 1
name: sweep
instances:
  a: {slots: %d}
  b: {slots: %d}
steps:
  - id: pull
    uses: pull
    with: {image: busybox}
  - id: train
    uses: run
    needs: [pull]
    matrix:
      lr: [1, 2, 3, 4, 5]
      bs: [8, 16]
    with: {command: train}
  - id: wait
    uses: wait
    needs: [train]
    matrix: inherit
  - id: upload
    uses: upload-s3
    needs: [wait]
    matrix: inherit
    with: {from: "~/r/${{ cell.id }}", to: "file:///tmp/r/${{ cell.id }}"}
finally:
  - id: teardown
    uses: delete
`

func TestSlotsAndEachCellOnce(t *testing.T) {
	g := mustPlan(t, fmt.Sprintf(sweep, 2, 1))
	f := newFake(func(ctx context.Context, tk *engine.Task) error {
		time.Sleep(time.Millisecond)
		return nil
	})
	s := run(t, g, f)
	if s.Failed() {
		t.Fatalf("run failed: %v", s.Messages)
	}
	for id, n := range f.attempts {
		if n != 1 {
			t.Errorf("%s ran %d times", id, n)
		}
	}
	if len(f.attempts) != len(g.Nodes) {
		t.Errorf("%d of %d nodes ran", len(f.attempts), len(g.Nodes))
	}
	if f.maxRun["a"] > 2 || f.maxRun["b"] > 1 {
		t.Errorf("slots exceeded: %v", f.maxRun)
	}
	if f.maxRun["a"] < 1 || f.maxRun["b"] < 1 {
		t.Errorf("cells not spread over both instances: %v", f.maxRun)
	}
	// An inherited node runs on its cell's instance.
	for _, n := range g.Nodes {
		if n.Root != "" && s.Placement[n.ID] != s.Placement[n.Root] {
			t.Errorf("%s ran on %s, its cell on %s", n.ID, s.Placement[n.ID], s.Placement[n.Root])
		}
	}
}

// A cell holds its slot until its last inherited node ends: with one slot
// per instance, no two cells' nodes overlap on an instance.
func TestCellHoldsSlotThroughInheritedNodes(t *testing.T) {
	g := mustPlan(t, fmt.Sprintf(sweep, 1, 1))
	var mu sync.Mutex
	active := map[string]map[string]bool{} // instance → cell ids active
	var violations []string
	f := newFake(func(ctx context.Context, tk *engine.Task) error {
		if tk.Node.Cell == nil {
			return nil
		}
		mu.Lock()
		if active[tk.Instance] == nil {
			active[tk.Instance] = map[string]bool{}
		}
		for c := range active[tk.Instance] {
			if c != tk.Node.Cell.ID {
				violations = append(violations, fmt.Sprintf("%s started on %s while cell %s was active", tk.Node.ID, tk.Instance, c))
			}
		}
		active[tk.Instance][tk.Node.Cell.ID] = true
		mu.Unlock()
		time.Sleep(time.Millisecond)
		mu.Lock()
		if tk.Node.Step.ID == "upload" {
			delete(active[tk.Instance], tk.Node.Cell.ID)
		}
		mu.Unlock()
		return nil
	})
	if s := run(t, g, f); s.Failed() {
		t.Fatalf("run failed: %v", s.Messages)
	}
	if len(violations) > 0 {
		t.Fatalf("slot violations:\n%s", strings.Join(violations, "\n"))
	}
}

func TestPlacementNeedsInstanceUpstream(t *testing.T) {
	g := mustPlan(t, fmt.Sprintf(sweep, 1, 1))
	f := newFake(func(ctx context.Context, tk *engine.Task) error {
		if tk.Node.ID == "pull@a" {
			return errors.New("pull failed")
		}
		return nil
	})
	s := run(t, g, f)
	for _, n := range g.Nodes {
		if n.Cell != nil && s.Placement[n.ID] == "a" {
			t.Errorf("%s was placed on a, whose pull failed", n.ID)
		}
		if n.Cell != nil && s.States[n.ID] != engine.Succeeded {
			t.Errorf("%s = %s, want succeeded on b", n.ID, s.States[n.ID])
		}
	}
	if s.States["pull@a"] != engine.Failed || !s.Failed() {
		t.Errorf("pull@a = %s", s.States["pull@a"])
	}
}

func TestSkipOnFailure(t *testing.T) {
	g := mustPlan(t, fmt.Sprintf(sweep, 1, 1))
	bad := "train[lr=3,bs=16]"
	f := newFake(func(ctx context.Context, tk *engine.Task) error {
		if tk.Node.ID == bad {
			return errors.New("exit 3")
		}
		return nil
	})
	s := run(t, g, f)
	want := map[string]engine.NodeState{
		bad:                  engine.Failed,
		"wait[lr=3,bs=16]":   engine.Skipped,
		"upload[lr=3,bs=16]": engine.Skipped,
		"train[lr=3,bs=8]":   engine.Succeeded,
		"upload[lr=5,bs=16]": engine.Succeeded,
		"teardown@a":         engine.Succeeded,
		"teardown@b":         engine.Succeeded,
	}
	checkStates(t, s, want)
	if msg := s.Messages["wait[lr=3,bs=16]"]; msg != "upstream "+bad+" failed" {
		t.Errorf("skip message = %q", msg)
	}
	if _, ran := f.attempts["wait[lr=3,bs=16]"]; ran {
		t.Error("a skipped node ran")
	}
}

// TestSkipChainReachesCells: a per-instance failure skips the next
// per-instance node within one scheduling pass; the cells that need it are
// skipped too (not left waiting for an event that never comes), and the
// finalizer still runs. This is auth failing before pull and train.
func TestSkipChainReachesCells(t *testing.T) {
	g := mustPlan(t, `taoflow: 1
name: chain
instances: {gpu: {slots: 2}}
steps:
  - {id: auth, uses: preflight}
  - {id: pull, uses: pull, needs: [auth], with: {image: img}}
  - id: train
    uses: run
    needs: [pull]
    matrix: {lr: [1, 2]}
    with: {command: "true"}
  - {id: wait, uses: wait, needs: [train], matrix: inherit}
finally:
  - {id: teardown, uses: delete}
`)
	f := newFake(func(ctx context.Context, tk *engine.Task) error {
		if tk.Node.Step.ID == "auth" {
			return errors.New("401 Unauthorized")
		}
		return nil
	})
	s := run(t, g, f)
	want := map[string]engine.NodeState{
		"auth@gpu":     engine.Failed,
		"pull@gpu":     engine.Skipped,
		"train[lr=1]":  engine.Skipped,
		"train[lr=2]":  engine.Skipped,
		"wait[lr=1]":   engine.Skipped,
		"teardown@gpu": engine.Succeeded,
	}
	checkStates(t, s, want)
	if msg := s.Messages["train[lr=1]"]; !strings.Contains(msg, "upstream pull@gpu skipped") {
		t.Errorf("skip message of a cell = %q", msg)
	}
}

func TestRetries(t *testing.T) {
	src := `
taoflow: 1
name: retries
instances: {a: {}}
steps:
  - id: flaky
    uses: pull
    retries: {max: %d, backoff: 1ms}
    with: {image: x}
`
	for name, tc := range map[string]struct {
		retries  int
		failures int
		want     engine.NodeState
		attempts int
	}{
		"recovers":      {retries: 2, failures: 2, want: engine.Succeeded, attempts: 3},
		"gives up":      {retries: 1, failures: 5, want: engine.Failed, attempts: 2},
		"no retries":    {retries: 0, failures: 1, want: engine.Failed, attempts: 1},
		"first time ok": {retries: 3, failures: 0, want: engine.Succeeded, attempts: 1},
	} {
		t.Run(name, func(t *testing.T) {
			g := mustPlan(t, fmt.Sprintf(src, tc.retries))
			var calls atomic.Int32
			f := newFake(func(ctx context.Context, tk *engine.Task) error {
				if int(calls.Add(1)) <= tc.failures {
					return errors.New("transient")
				}
				return nil
			})
			s := run(t, g, f)
			if s.States["flaky@a"] != tc.want || f.attempts["flaky@a"] != tc.attempts {
				t.Errorf("state %s after %d attempts, want %s after %d", s.States["flaky@a"], f.attempts["flaky@a"], tc.want, tc.attempts)
			}
		})
	}
}

func TestTimeoutNamesItsCause(t *testing.T) {
	g := mustPlan(t, `
taoflow: 1
name: timeout
instances: {a: {}}
steps:
  - id: slow
    uses: pull
    timeout: 50ms
    with: {image: x}
finally:
  - id: teardown
    uses: delete
`)
	f := newFake(func(ctx context.Context, tk *engine.Task) error {
		if tk.Node.Step.ID == "slow" {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	s := run(t, g, f)
	if s.States["slow@a"] != engine.TimedOut || s.Messages["slow@a"] != "step slow timed out after 50ms" {
		t.Errorf("slow@a = %s (%q)", s.States["slow@a"], s.Messages["slow@a"])
	}
	if s.States["teardown@a"] != engine.Succeeded {
		t.Errorf("finalizer = %s", s.States["teardown@a"])
	}
}

func TestFailFastCancelsAndFinalizersRun(t *testing.T) {
	g := mustPlan(t, `
taoflow: 1
name: ff
fail_fast: true
instances: {a: {}, b: {}}
steps:
  - id: quick
    uses: pull
    on: a
    with: {image: x}
  - id: long
    uses: pull
    on: b
    with: {image: x}
  - id: after
    uses: pull
    needs: [long]
    on: b
    with: {image: x}
finally:
  - id: teardown
    uses: delete
`)
	f := newFake(func(ctx context.Context, tk *engine.Task) error {
		switch tk.Node.Step.ID {
		case "quick":
			return errors.New("boom")
		case "long":
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	s := run(t, g, f)
	want := map[string]engine.NodeState{
		"quick@a": engine.Failed, "long@b": engine.Canceled, "after@b": engine.Canceled,
		"teardown@a": engine.Succeeded, "teardown@b": engine.Succeeded,
	}
	if diff := cmp.Diff(want, s.States); diff != "" {
		t.Errorf("states (-want +got):\n%s", diff)
	}
	if !strings.Contains(s.Messages["long@b"], "fail_fast: quick@a failed") {
		t.Errorf("cancel cause not named: %q", s.Messages["long@b"])
	}
}

func TestFinalizersAfterEveryEnding(t *testing.T) {
	src := `
taoflow: 1
name: endings
instances: {a: {}}
steps:
  - id: work
    uses: pull
    with: {image: x}
finally:
  - id: teardown
    uses: delete
`
	tests := map[string]struct {
		do        func(ctx context.Context) error
		interrupt bool
		want      engine.NodeState
	}{
		"success":   {do: func(context.Context) error { return nil }, want: engine.Succeeded},
		"failure":   {do: func(context.Context) error { return errors.New("exit 1") }, want: engine.Failed},
		"panic":     {do: func(context.Context) error { panic("bug in a step") }, want: engine.Failed},
		"interrupt": {do: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }, interrupt: true, want: engine.Canceled},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := mustPlan(t, src)
			started := make(chan struct{}, 1)
			var finalCtxErr error
			f := newFake(func(ctx context.Context, tk *engine.Task) error {
				if tk.Node.Finally {
					finalCtxErr = ctx.Err()
					return nil
				}
				started <- struct{}{}
				return tc.do(ctx)
			})
			ctx, cancel := context.WithCancelCause(t.Context())
			defer cancel(nil)
			if tc.interrupt {
				go func() { <-started; cancel(errors.New("interrupted (Ctrl-C)")) }()
			}
			s := engine.Run(ctx, g, engine.Config{RunID: "r1", Executor: f, Instances: f, Observer: f})
			if s.States["work@a"] != tc.want {
				t.Errorf("work@a = %s (%s), want %s", s.States["work@a"], s.Messages["work@a"], tc.want)
			}
			if s.States["teardown@a"] != engine.Succeeded || finalCtxErr != nil {
				t.Errorf("finalizer = %s, its context: %v", s.States["teardown@a"], finalCtxErr)
			}
			if f.index("release a delete") < f.index("end teardown@a on a") {
				t.Errorf("instance not released after the finalizer: %v", f.log)
			}
			if tc.interrupt != s.Interrupted {
				t.Errorf("Interrupted = %v", s.Interrupted)
			}
			if name == "panic" && !strings.Contains(s.Messages["work@a"], "panic: bug in a step") {
				t.Errorf("panic message: %q", s.Messages["work@a"])
			}
			if name == "interrupt" && !strings.Contains(s.Messages["work@a"], "interrupted (Ctrl-C)") {
				t.Errorf("cancel cause not named: %q", s.Messages["work@a"])
			}
		})
	}
}

// Early teardown: an instance is released as soon as its own share is
// done (its cells and per-instance nodes, then its finalizers), while the
// other instance still works.
func TestEarlyTeardown(t *testing.T) {
	g := mustPlan(t, `
taoflow: 1
name: early
instances: {fast: {slots: 2}, slow: {slots: 1}}
steps:
  - id: train
    uses: run
    on: [fast]
    matrix: {i: [1, 2, 3]}
    with: {command: x}
  - id: wait
    uses: wait
    needs: [train]
    matrix: inherit
  - id: long
    uses: pull
    on: [slow]
    with: {image: x}
finally:
  - id: teardown
    uses: delete
`)
	fastGone := make(chan struct{})
	f := newFake(func(ctx context.Context, tk *engine.Task) error {
		if tk.Node.ID == "long@slow" {
			select {
			case <-fastGone:
			case <-time.After(10 * time.Second):
				return errors.New("fast was never released while slow worked")
			}
		}
		return nil
	})
	f.release = func(name string, mode engine.ReleaseMode) error {
		if name == "fast" {
			close(fastGone)
		}
		return nil
	}
	s := run(t, g, f)
	if s.Failed() {
		t.Fatalf("failed: %v", s.Messages)
	}
	if rf, end := f.index("release fast delete"), f.index("end long@slow on slow"); rf < 0 || rf > end {
		t.Errorf("fast was not released before slow's work ended: %v", f.log)
	}
	if tf, rf := f.index("end teardown@fast on fast"), f.index("release fast delete"); tf > rf {
		t.Errorf("fast was released before its finalizer ended: %v", f.log)
	}
}

func TestUploadFailureStopsInsteadOfDelete(t *testing.T) {
	g := mustPlan(t, fmt.Sprintf(sweep, 5, 5))
	bad := "upload[lr=1,bs=8]"
	f := newFake(func(ctx context.Context, tk *engine.Task) error {
		if tk.Node.ID == bad {
			return errors.New("verification mismatch")
		}
		return nil
	})
	s := run(t, g, f)
	on := s.Placement[bad]
	other := map[string]string{"a": "b", "b": "a"}[on]
	if got := f.has("release "); !slices.Contains(got, "release "+on+" stop") || !slices.Contains(got, "release "+other+" delete") {
		t.Errorf("the failed upload ran on %s; releases = %v", on, got)
	}
	if !slices.Equal(s.Stopped, []string{on}) {
		t.Errorf("Stopped = %v, want [%s]", s.Stopped, on)
	}
	// A skipped upload (its training failed) protects nothing.
	g = mustPlan(t, fmt.Sprintf(sweep, 5, 5))
	f = newFake(func(ctx context.Context, tk *engine.Task) error {
		if tk.Node.ID == "train[lr=1,bs=8]" {
			return errors.New("exit 1")
		}
		return nil
	})
	s = run(t, g, f)
	if s.States[bad] != engine.Skipped || len(s.Stopped) != 0 {
		t.Errorf("upload = %s, Stopped = %v", s.States[bad], s.Stopped)
	}
}

func TestReleaseFailureLeavesInstance(t *testing.T) {
	g := mustPlan(t, fmt.Sprintf(sweep, 1, 1))
	f := newFake(nil)
	f.release = func(name string, mode engine.ReleaseMode) error {
		if name == "b" {
			return errors.New("brev delete: 500")
		}
		return nil
	}
	s := run(t, g, f)
	if !slices.Equal(s.Left, []string{"b"}) {
		t.Errorf("Left = %v", s.Left)
	}
}

func TestAcquireFailure(t *testing.T) {
	g := mustPlan(t, fmt.Sprintf(sweep, 1, 1))
	f := newFake(nil)
	f.acquire = func(name string) error {
		if name == "a" {
			return errors.New("create failed: no capacity")
		}
		return nil
	}
	s := run(t, g, f)
	if s.States["pull@a"] != engine.Failed || !strings.Contains(s.Messages["pull@a"], "no capacity") {
		t.Errorf("pull@a = %s %q", s.States["pull@a"], s.Messages["pull@a"])
	}
	for _, n := range g.Nodes {
		if n.Cell != nil && (s.States[n.ID] != engine.Succeeded || s.Placement[n.ID] != "b") {
			t.Errorf("%s = %s on %q", n.ID, s.States[n.ID], s.Placement[n.ID])
		}
	}
	if s.States["teardown@a"] != engine.Skipped {
		t.Errorf("teardown@a = %s", s.States["teardown@a"])
	}
	if !slices.Contains(f.has("release "), "release a delete") {
		t.Errorf("an instance whose create failed must still be released (orphans): %v", f.log)
	}
}

func TestParallelLimit(t *testing.T) {
	g := mustPlan(t, fmt.Sprintf(sweep, 10, 10))
	var cur, peak atomic.Int32
	f := newFake(func(ctx context.Context, tk *engine.Task) error {
		n := cur.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(time.Millisecond)
		cur.Add(-1)
		return nil
	})
	run(t, g, f, func(c *engine.Config) { c.Parallel = 3 })
	if peak.Load() > 3 {
		t.Errorf("%d nodes ran at once, limit 3", peak.Load())
	}
}

func TestContinueOnError(t *testing.T) {
	g := mustPlan(t, `
taoflow: 1
name: coe
instances: {a: {}}
steps:
  - id: optional
    uses: pull
    continue_on_error: true
    with: {image: x}
  - id: next
    uses: pull
    needs: [optional]
    with: {image: y}
`)
	f := newFake(func(ctx context.Context, tk *engine.Task) error {
		if tk.Node.Step.ID == "optional" {
			return errors.New("nope")
		}
		return nil
	})
	s := run(t, g, f)
	if s.States["optional@a"] != engine.Failed || s.States["next@a"] != engine.Succeeded {
		t.Errorf("states = %v", s.States)
	}
}

func TestLogLinesBecomeEvents(t *testing.T) {
	g := mustPlan(t, "taoflow: 1\nname: logs\ninstances: {a: {}}\nsteps:\n  - {id: p, uses: pull, with: {image: x}}\n")
	f := newFake(func(ctx context.Context, tk *engine.Task) error {
		fmt.Fprint(tk.Log, "one\ntw")
		fmt.Fprint(tk.Log, "o\r\nthree")
		return nil
	})
	run(t, g, f)
	var lines []string
	for _, e := range f.events {
		if e.Type == engine.NodeLog {
			lines = append(lines, e.Message)
		}
	}
	if diff := cmp.Diff([]string{"one", "two", "three"}, lines); diff != "" {
		t.Errorf("log lines (-want +got):\n%s", diff)
	}
}

func mustPlanB(b *testing.B, src string) *engine.Graph {
	b.Helper()
	p, diags := plan.Parse("plan.yaml", []byte(src), plan.Options{})
	if diags.HasErrors() {
		b.Fatalf("plan has errors:\n%s", diags.Error())
	}
	g, err := engine.Expand(p, engine.Options{RunID: "r1"})
	if err != nil {
		b.Fatal(err)
	}
	return g
}

// TestResumeDone: nodes that succeeded before (resume) are not run again;
// a cell resumed part way runs its remaining nodes on the instance it was
// placed on and holds that slot until they end.
func TestResumeDone(t *testing.T) {
	g := mustPlan(t, `taoflow: 1
name: resume
instances: {a: {slots: 1}}
steps:
  - {id: pre, uses: preflight}
  - id: train
    uses: run
    needs: [pre]
    matrix: {n: [1, 2, 3]}
    with: {command: "true"}
  - {id: wait, uses: wait, needs: [train], matrix: inherit}
finally:
  - {id: teardown, uses: delete}
`)
	f := newFake(func(ctx context.Context, tk *engine.Task) error {
		if tk.Node.Step.ID == "wait" {
			time.Sleep(20 * time.Millisecond)
		}
		return nil
	})
	done := map[string]string{"pre@a": "a", "train[n=1]": "a", "wait[n=1]": "a", "train[n=2]": "a"}
	s := run(t, g, f, func(c *engine.Config) { c.Done = done })
	for id := range done {
		if f.attempts[id] != 0 {
			t.Errorf("%s ran again", id)
		}
		if s.States[id] != engine.Succeeded {
			t.Errorf("%s = %s, want succeeded", id, s.States[id])
		}
	}
	if i := f.index("start wait[n=2] on a"); i < 0 {
		t.Fatalf("wait[n=2] did not run on a, where its cell was placed: %v", f.log)
	}
	// train[n=3] may only go to a once wait[n=2] has freed the slot there.
	if i := f.index("start train[n=3] on a"); i < f.index("end wait[n=2] on a") {
		t.Errorf("train[n=3] started on a while the resumed cell held its slot: %v", f.log)
	}
	for _, id := range []string{"wait[n=2]", "train[n=3]", "wait[n=3]", "teardown@a"} {
		if s.States[id] != engine.Succeeded {
			t.Errorf("%s = %s (%s)", id, s.States[id], s.Messages[id])
		}
	}
}

// checkStates reports each node of want whose state in s differs.
func checkStates(t *testing.T, s engine.Summary, want map[string]engine.NodeState) {
	t.Helper()
	for id, st := range want {
		if s.States[id] != st {
			t.Errorf("%s = %s, want %s (%s)", id, s.States[id], st, s.Messages[id])
		}
	}
}

// A delete step that forces its release deletes an instance whose upload
// failed; without force the same instance is stopped. Either way the step
// gets the release's outcome, and asking again after the release returns
// at once with the same.
func TestForcedRelease(t *testing.T) {
	for _, force := range []bool{false, true} {
		t.Run(fmt.Sprint("force=", force), func(t *testing.T) {
			g := mustPlan(t, `
taoflow: 1
name: forced
instances: {a: {}}
steps:
  - id: upload
    uses: upload-s3
    with: {from: ~/r, to: "file:///tmp/r"}
finally:
  - id: teardown
    uses: delete
`)
			var first, second error
			f := newFake(func(ctx context.Context, tk *engine.Task) error {
				if tk.Node.Step.ID == "upload" {
					return errors.New("verification mismatch")
				}
				first = tk.Release(ctx, force)
				second = tk.Release(ctx, force)
				return nil
			})
			f.release = func(name string, mode engine.ReleaseMode) error {
				if mode == engine.ReleaseDelete {
					return errors.New("brev delete: 500")
				}
				return nil
			}
			s := run(t, g, f)
			want := "release a stop"
			if force {
				want = "release a delete"
			}
			if got := f.has("release "); !slices.Equal(got, []string{want}) {
				t.Errorf("releases = %v, want [%s]", got, want)
			}
			if force {
				if first == nil || first.Error() != "brev delete: 500" || second == nil || second.Error() != first.Error() {
					t.Errorf("the delete step got %v, then %v; want the release's error twice", first, second)
				}
				if !slices.Equal(s.Left, []string{"a"}) || len(s.Stopped) != 0 {
					t.Errorf("Left = %v, Stopped = %v", s.Left, s.Stopped)
				}
			} else {
				if first != nil || second != nil {
					t.Errorf("the delete step got %v, then %v; want nil (stopped to keep the results)", first, second)
				}
				if !slices.Equal(s.Stopped, []string{"a"}) || len(s.Left) != 0 {
					t.Errorf("Stopped = %v, Left = %v", s.Stopped, s.Left)
				}
			}
		})
	}
}

// A panic in Acquire, Release or a step fails what it was doing, with the
// worker's stack, and the run still ends with every instance released.
func TestPanicsAreCaught(t *testing.T) {
	g := mustPlan(t, fmt.Sprintf(sweep, 1, 1))
	f := newFake(func(ctx context.Context, tk *engine.Task) error {
		if tk.Node.ID == "train[lr=1,bs=8]" {
			panic("bug in a step")
		}
		return nil
	})
	f.acquire = func(name string) error {
		if name == "a" {
			panic("bug in acquire")
		}
		return nil
	}
	f.release = func(name string, mode engine.ReleaseMode) error {
		if name == "b" {
			panic("bug in release")
		}
		return nil
	}
	s := run(t, g, f)
	if msg := s.Messages["pull@a"]; s.States["pull@a"] != engine.Failed || !strings.Contains(msg, "panic while acquiring a: panic: bug in acquire") || !strings.Contains(msg, "stacktrace:") {
		t.Errorf("pull@a = %s %q", s.States["pull@a"], msg)
	}
	if msg := s.Messages["train[lr=1,bs=8]"]; !strings.Contains(msg, "panic: bug in a step") || !strings.Contains(msg, "run_test.go") {
		t.Errorf("the step's panic lost its stack: %q", msg)
	}
	if !slices.Equal(s.Left, []string{"b"}) {
		t.Errorf("Left = %v, want [b] (its release panicked)", s.Left)
	}
	if got := f.has("release "); len(got) != 2 {
		t.Errorf("releases = %v, want both instances", got)
	}
}

// Retries wait base, 2×base, 4×base… and a timeout fires at its
// duration, in the bubble's fake time: a step with a one-minute backoff
// and an hour's timeout tests in no time, to the nanosecond.
func TestRetryAndTimeoutClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustPlan(t, `
taoflow: 1
name: clock
instances: {a: {}}
steps:
  - id: flaky
    uses: pull
    retries: {max: 3, backoff: 1m}
    with: {image: x}
  - id: slow
    uses: pull
    needs: [flaky]
    timeout: 1h
    with: {image: x}
`)
		var starts []time.Duration
		t0 := time.Now()
		f := newFake(func(ctx context.Context, tk *engine.Task) error {
			starts = append(starts, time.Since(t0))
			if tk.Node.Step.ID == "flaky" && tk.Attempt <= 3 {
				return errors.New("transient")
			}
			if tk.Node.Step.ID == "slow" {
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		})
		// Not run(): its 20 s watchdog would fire first in the bubble's time.
		s := engine.Run(t.Context(), g, engine.Config{RunID: "r1", Executor: f, Instances: f, Observer: f})
		want := []time.Duration{0, time.Minute, 3 * time.Minute, 7 * time.Minute, 7 * time.Minute}
		if !slices.Equal(starts, want) {
			t.Errorf("attempts started at %v, want %v", starts, want)
		}
		if s.States["slow@a"] != engine.TimedOut || time.Since(t0) != 7*time.Minute+time.Hour {
			t.Errorf("slow@a = %s after %s", s.States["slow@a"], time.Since(t0))
		}
	})
}

// TestFinalizerDeadlinePerInstance: under early teardown each instance's
// finalizers start when its own share ends. Instances whose finalizers
// start further apart than FinallyTimeout each get the whole deadline,
// counted from their own first finalizer (issue 27 item 2: one deadline
// for the run cancelled the later instance's finalizers at once).
func TestFinalizerDeadlinePerInstance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustPlan(t, `
taoflow: 1
name: apart
instances: {short: {}, long: {}}
steps:
  - id: train
    uses: pull
    on: [short, long]
    with: {image: x}
finally:
  - id: save
    uses: pull
    with: {image: x}
  - id: teardown
    uses: delete
    needs: [save]
`)
		t0 := time.Now()
		f := newFake(func(ctx context.Context, tk *engine.Task) error {
			switch {
			case tk.Node.ID == "train@long":
				time.Sleep(3 * time.Hour)
			case tk.Node.Finally:
				// A finalizer that takes a while, well within its deadline.
				select {
				case <-time.After(10 * time.Minute):
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			}
			return nil
		})
		s := engine.Run(t.Context(), g, engine.Config{RunID: "r1", Executor: f, Instances: f, Observer: f, FinallyTimeout: time.Hour})
		if s.Failed() {
			t.Fatalf("failed after %s: %v %v", time.Since(t0), s.States, s.Messages)
		}
		if len(f.has("release ")) != 2 {
			t.Errorf("releases: %v", f.has("release "))
		}
	})
}

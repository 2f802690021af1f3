package runner

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
	"github.com/taoflow/taoflow/steps"
)

// captured records the tasks the engine gives its executor.
type captured struct {
	mu    sync.Mutex
	tasks map[string]*engine.Task
}

func (c *captured) Execute(_ context.Context, t *engine.Task) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tasks[t.Node.ID] = t
	return nil
}
func (c *captured) Acquire(context.Context, string) error { return nil }
func (c *captured) Release(context.Context, string, engine.ReleaseMode) (engine.ReleaseOutcome, error) {
	return engine.ReleaseDeleted, nil
}

// TestPreviewAndApplyBuildTheSameRequest: plan's preview and apply's
// executor translate a node into the same step request (issue 15): per-
// instance nodes exactly, cells but for the instance the run placed them on.
func TestPreviewAndApplyBuildTheSameRequest(t *testing.T) {
	src := `
taoflow: 1
name: same
instances:
  a: {}
  b: {}
steps:
  - id: train
    uses: run
    with: {command: train, results: "~/r/${{ instance.name }}"}
  - id: wait
    uses: wait
    needs: [train]
  - id: sweep
    uses: run
    matrix:
      lr: [1, 2]
    with: {command: "train --lr ${{ matrix.lr }}", image: busybox}
  - id: sweepwait
    uses: wait
    needs: [sweep]
    matrix: inherit
`
	p, diags := plan.Parse("plan.yaml", []byte(src), plan.Options{})
	if diags.HasErrors() {
		t.Fatalf("plan has errors:\n%s", diags.Error())
	}
	g, err := engine.Expand(p, engine.Options{RunID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	c := &captured{tasks: map[string]*engine.Task{}}
	done := make(chan engine.Summary)
	go func() {
		// The preview shows a cell in slot 0 with the GPUs it has at least
		// (one per slot where none are declared): the same count here.
		done <- engine.Run(t.Context(), g, engine.Config{RunID: "r1", Executor: c, Instances: c, Observer: engine.ObserverFunc(func(engine.Event) {}),
			GPUs: func(string) int { return 1 }})
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the run did not end")
	}
	waits := 0
	for _, n := range g.Nodes {
		task := c.tasks[n.ID]
		if task == nil {
			t.Fatalf("%s did not run", n.ID)
		}
		applied := StepRequest(g, "r1", n, platform.Instance{Name: task.Instance}, task.With, task.Upstream, task.Slot)
		previewed := PreviewRequest(g, "r1", n)
		if n.Cell != nil {
			previewed.Instance.Name = task.Instance
		}
		if applied.Step != previewed.Step || !cmp.Equal(withJSON(applied.With), withJSON(previewed.With)) {
			t.Errorf("%s: apply and preview differ in step or with:", n.ID)
		}
		if diff := cmp.Diff(applied, previewed, cmpopts.IgnoreFields(steps.Request{}, "Step", "With")); diff != "" {
			t.Errorf("%s: apply (-) and preview (+) differ:\n%s", n.ID, diff)
		}
		if n.Step.Uses == plan.KindWait {
			waits++
			if len(applied.Jobs) != 1 {
				t.Errorf("%s follows %d jobs, want 1: %+v", n.ID, len(applied.Jobs), applied.Jobs)
			}
		}
	}
	if waits != 4 {
		t.Errorf("%d wait nodes, want 4", waits)
	}
}

func withJSON(v *plan.Value) any {
	if v == nil {
		return nil
	}
	return v.JSON()
}

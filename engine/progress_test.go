package engine_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/internal/progress"
)

// TestProgressEvent: what a task reports as progress becomes one
// node-progress event with the line as its message and the figures as
// they were reported, not read from the line.
func TestProgressEvent(t *testing.T) {
	g := mustPlan(t, `taoflow: 1
name: p
instances: {a: {}}
steps:
  - {id: w, uses: preflight}
`)
	loss := 0.25
	report := progress.Report{Line: "val loss=x 0.25", Figures: progress.Figures{Metric: "val loss=x", Value: &loss, Loss: &loss}}
	f := newFake(func(ctx context.Context, task *engine.Task) error {
		task.Progress(report)
		return nil
	})
	run(t, g, f)
	var got []engine.Event
	for _, e := range f.events {
		if e.Type == engine.NodeProgress {
			got = append(got, e)
		}
	}
	if len(got) != 1 {
		t.Fatalf("%d node-progress events, want 1", len(got))
	}
	e := got[0]
	if e.Node != "w@a" || e.Step != "w" || e.Instance != "a" || e.Message != report.Line {
		t.Errorf("event %+v: want node w@a, step w, instance a, message %q", e, report.Line)
	}
	if diff := cmp.Diff(&report.Figures, e.Progress); diff != "" {
		t.Errorf("event figures (-want +got):\n%s", diff)
	}
}

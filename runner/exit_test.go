package runner

import (
	"context"
	"testing"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/state"
)

// TestExitCodeOfEveryVerdict: every run state Verdict can end a run in
// maps to the code docs/design.md §2.1 gives it, and the codes are the
// table's numbers.
func TestExitCodeOfEveryVerdict(t *testing.T) {
	for _, tc := range []struct {
		sum  engine.Summary
		want int
	}{
		{engine.Summary{States: map[string]engine.NodeState{"a": engine.Succeeded}}, 0},
		{engine.Summary{States: map[string]engine.NodeState{"a": engine.Failed}}, 1},
		{engine.Summary{States: map[string]engine.NodeState{"a": engine.Canceled}, Interrupted: true}, 130},
		{engine.Summary{States: map[string]engine.NodeState{"a": engine.Succeeded}, Left: []string{"gpu"}}, 3},
	} {
		st, _ := Verdict(tc.sum)
		if got := ExitCode(st); got != tc.want {
			t.Errorf("ExitCode(%q) = %d, want %d", st, got, tc.want)
		}
	}
	for code, want := range map[int]int{ExitOK: 0, ExitFailed: 1, ExitUsage: 2, ExitTeardown: 3, ExitInterrupted: 130} {
		if code != want {
			t.Errorf("exit code %d, want %d (docs/design.md §2.1)", code, want)
		}
	}
	if got := ExitCode(state.RunFailed); got != 1 {
		t.Errorf("ExitCode(failed) = %d, want 1", got)
	}
}

// TestStartTakesTheExpandedGraph: Start runs the graph Expand made of the
// plan it is given (the one the budget was checked on), and refuses to
// start without it rather than expand the plan a second time.
func TestStartTakesTheExpandedGraph(t *testing.T) {
	p := &plan.Plan{Name: "demo"}
	other := &plan.Plan{Name: "other"}
	g, err := Expand(other, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []ApplyConfig{{Plan: p}, {Plan: p, Graph: g}} {
		if a, err := Start(context.Background(), cfg); err == nil {
			a.Close()
			t.Errorf("Start(graph %v) started", cfg.Graph != nil)
		}
	}
	if g.RunID == "" || g.Plan != other {
		t.Errorf("Expand: run id %q, plan %p; want a run id and the plan", g.RunID, g.Plan)
	}
}

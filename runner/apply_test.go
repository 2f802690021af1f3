package runner

import (
	"testing"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/state"
)

// TestVerdict: what may still exist outranks an interrupt, which outranks
// a failure; the message counts the nodes.
func TestVerdict(t *testing.T) {
	ok := map[string]engine.NodeState{"a": engine.Succeeded, "b": engine.Succeeded}
	bad := map[string]engine.NodeState{"a": engine.Succeeded, "b": engine.Failed, "c": engine.Skipped}
	for _, tc := range []struct {
		name      string
		sum       engine.Summary
		wantState string
		wantMsg   string
	}{
		{"all succeeded", engine.Summary{States: ok}, state.RunSucceeded,
			"succeeded (2 succeeded, 0 failed, 0 skipped, 0 canceled, 0 timed out)"},
		{"a node failed", engine.Summary{States: bad}, state.RunFailed,
			"failed; teardown completed (1 succeeded, 1 failed, 1 skipped, 0 canceled, 0 timed out)"},
		{"interrupted", engine.Summary{States: bad, Interrupted: true}, state.RunInterrupted,
			"interrupted; teardown completed (1 succeeded, 1 failed, 1 skipped, 0 canceled, 0 timed out)"},
		{"stopped instead of deleted", engine.Summary{States: bad, Stopped: []string{"gpu"}}, state.RunTeardownIncomplete,
			"teardown incomplete (1 succeeded, 1 failed, 1 skipped, 0 canceled, 0 timed out)"},
		{"kept", engine.Summary{States: ok, Kept: []string{"gpu"}}, state.RunSucceeded,
			"succeeded (2 succeeded, 0 failed, 0 skipped, 0 canceled, 0 timed out)"},
		{"something left", engine.Summary{States: ok, Interrupted: true, Left: []string{"gpu"}}, state.RunTeardownIncomplete,
			"teardown incomplete (2 succeeded, 0 failed, 0 skipped, 0 canceled, 0 timed out)"},
	} {
		st, msg := Verdict(tc.sum)
		if st != tc.wantState || msg != tc.wantMsg {
			t.Errorf("%s: Verdict = %q, %q; want %q, %q", tc.name, st, msg, tc.wantState, tc.wantMsg)
		}
	}
}

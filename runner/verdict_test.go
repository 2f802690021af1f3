package runner

import (
	"testing"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/state"
)

// TestVerdictOnlyRealRiskIsTeardownIncomplete: the run state (and so
// apply's exit code, docs/design.md §2.1) is teardown-incomplete (3) only
// when something may still exist against the plan's wish: a release that
// failed (an instance, or jobs that could not be stopped) or an instance
// stopped to keep results. A held local sandbox, a kept instance, or a
// failed node alone make the run failed (1).
func TestVerdictOnlyRealRiskIsTeardownIncomplete(t *testing.T) {
	failed := map[string]engine.NodeState{"up@a": engine.Failed}
	for _, tc := range []struct {
		name string
		sum  engine.Summary
		want string
	}{
		{"release failed", engine.Summary{States: failed, Left: []string{"a"}}, state.RunTeardownIncomplete},
		{"stopped to keep results", engine.Summary{States: failed, Stopped: []string{"a"}}, state.RunTeardownIncomplete},
		{"held sandbox", engine.Summary{States: failed, Held: []string{"a"}}, state.RunFailed},
		{"kept", engine.Summary{States: map[string]engine.NodeState{"x": engine.Succeeded}, Kept: []string{"a"}}, state.RunSucceeded},
		{"failed node", engine.Summary{States: failed}, state.RunFailed},
	} {
		if got, _ := Verdict(tc.sum); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

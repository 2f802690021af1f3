package runner

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/state"
	"github.com/taoflow/taoflow/steps"
)

// TestResumeSlotsAndGPUs: a resumed run gives the engine the slot each
// node's cell held, and the steps the GPUs a succeeded preflight counted
// (a failed one's count is not trusted).
func TestResumeSlotsAndGPUs(t *testing.T) {
	r := &Resumed{nodes: []state.Node{
		{ID: "pre@box", Instance: "box", State: string(engine.Succeeded), Facts: map[string]string{steps.RecordGPUs: "4"}},
		{ID: "pre@old", Instance: "old", State: string(engine.Failed), Facts: map[string]string{steps.RecordGPUs: "8"}},
		{ID: "train[n=1]", Instance: "box", State: string(engine.Succeeded), Facts: map[string]string{factSlot: "1"}},
		{ID: "wait[n=1]", Instance: "box", State: string(engine.Running), Facts: map[string]string{factSlot: "1"}},
		{ID: "train[n=2]", Instance: "box", State: string(engine.Pending)},
	}}
	if diff := cmp.Diff(map[string]int{"train[n=1]": 1, "wait[n=1]": 1}, r.slots()); diff != "" {
		t.Errorf("slots (-want +got):\n%s", diff)
	}
	st := steps.New(steps.Config{Plan: &plan.Plan{}})
	r.restore(st, &instances{})
	if got := st.GPUs("box"); got != 4 {
		t.Errorf("GPUs(box) = %d, want the 4 its preflight counted", got)
	}
	if got := st.GPUs("old"); got != 0 {
		t.Errorf("GPUs(old) = %d, want 0: its preflight failed", got)
	}
}

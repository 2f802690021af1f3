package steps

import (
	"context"
	"testing"
	"time"

	"github.com/taoflow/taoflow/internal/testrig"
	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
)

// TestCleanupScopedToInstance: two plan instances that are one machine
// (two ssh aliases of one box: here, one sandbox under two names) each
// run a job of the run; stopping the jobs on one leaves the other's.
func TestCleanupScopedToInstance(t *testing.T) {
	e := newEnv(t)
	other := platform.Instance{Name: "b", Ref: e.inst.Ref}
	w := with("command", "while :; do sleep 0.05; done")
	e.runJob(t, e.steps, "tf-r1-train-a", w)
	if err := e.steps.Do(context.Background(), Request{
		NodeID: "train@b", Step: &plan.Step{ID: "train", Uses: plan.KindRun},
		Instance: other, With: w, JobID: "tf-r1-train-b", Log: &logBuf{},
	}); err != nil {
		t.Fatal(err)
	}
	pa, pb := e.jobPid(t, "tf-r1-train-a"), e.jobPid(t, "tf-r1-train-b")
	if err := e.steps.Cleanup(context.Background(), e.inst); err != nil {
		t.Fatal(err)
	}
	testrig.Eventually(t, 10*time.Second, "instance a's job to stop", func() bool { return !groupAlive(t, pa) })
	if !groupAlive(t, pb) {
		t.Fatal("stopping instance a's jobs stopped instance b's job on the same machine")
	}
	if err := e.steps.Cleanup(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	testrig.Eventually(t, 10*time.Second, "instance b's job to stop", func() bool { return !groupAlive(t, pb) })
}

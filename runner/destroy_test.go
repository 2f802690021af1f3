package runner

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
	"github.com/taoflow/taoflow/state"
)

// TestDestroyLocalSandbox: from the state alone, Destroy rebuilds the local
// platform, deletes the sandbox the run created and a job's record with
// it, and records the run, whose apply died, as canceled with the exit
// code it is given.
func TestDestroyLocalSandbox(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const run = "quick-1203-000000-abcd"
	pf, err := BuildPlatform(plan.PlatformLocal, nil, run, dir, PlatformOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inst, err := pf.(platform.Creator).Create(ctx, run, platform.Spec{Name: "gpu"})
	if err != nil {
		t.Fatal(err)
	}
	store, err := state.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.CreateRun(ctx, state.Run{ID: run, Name: "quick", State: state.RunRunning, PID: 4194305, StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	id, err := store.RecordIntent(ctx, state.Resource{RunID: run, Kind: state.KindInstance, Name: "gpu", Instance: "gpu", Platform: plan.PlatformLocal})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.MarkCreated(ctx, id, map[string]string{"ref": inst.Ref}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.RecordIntent(ctx, state.Resource{RunID: run, Kind: state.KindJob, Name: "tf-" + run + "-train-gpu", Instance: "gpu",
		Platform: plan.PlatformLocal, Data: map[string]string{"instance_ref": inst.Ref}}); err != nil {
		t.Fatal(err)
	}

	r, err := FindRun(ctx, store, "quick-")
	if err != nil {
		t.Fatal(err)
	}
	alive, err := store.Alive(ctx, run)
	if err != nil || len(alive) != 2 {
		t.Fatalf("alive = %v, %v; want the sandbox and the job", alive, err)
	}
	var log bytes.Buffer
	if left := (Destroyer{Store: store, StateDir: dir, Log: &log, CanceledExitCode: 130}).Destroy(ctx, r, alive); left != 0 {
		t.Fatalf("%d left:\n%s", left, &log)
	}
	if _, err := os.Stat(inst.Ref); !os.IsNotExist(err) {
		t.Errorf("the sandbox %s is still there (%v)", inst.Ref, err)
	}
	for _, want := range []string{run + ": instance gpu: removed", run + ": job tf-" + run + "-train-gpu: removed"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, &log)
		}
	}
	if alive, _ := store.Alive(ctx, run); len(alive) != 0 {
		t.Errorf("still alive in the state: %v", alive)
	}
	if got, _ := store.Run(ctx, run); got.State != state.RunCanceled || got.ExitCode != 130 {
		t.Errorf("run recorded as %s, exit %d; want canceled, 130", got.State, got.ExitCode)
	}
	if _, err := os.Stat(filepath.Join(dir, "sandboxes")); err != nil {
		t.Errorf("the sandbox root went too: %v", err)
	}
}

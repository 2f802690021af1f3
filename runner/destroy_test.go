package runner

import (
	"bytes"
	"errors"
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
	ctx := t.Context()
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
	if err := (Destroyer{Store: store, StateDir: dir, Log: &log, CanceledExitCode: 130}).Destroy(ctx, r, alive); err != nil {
		t.Fatalf("%v\n%s", err, &log)
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

// TestDestroyListsWhatIsLeft: what Destroy could not remove comes back as
// a list, one *NotRemovedError per resource, each naming the run, the
// resource and why; the run is not recorded as torn down.
func TestDestroyListsWhatIsLeft(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	const run = "lost-1203-000000-abcd"
	store, err := state.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.CreateRun(ctx, state.Run{ID: run, Name: "lost", State: state.RunRunning, PID: 4194305, StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		id, err := store.RecordIntent(ctx, state.Resource{RunID: run, Kind: state.KindInstance, Name: name, Instance: name, Platform: "gone-cloud"})
		if err != nil {
			t.Fatal(err)
		}
		if err := store.MarkCreated(ctx, id, map[string]string{"ref": "tf-" + name}); err != nil {
			t.Fatal(err)
		}
	}
	alive, err := store.Alive(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	r, err := store.Run(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	err = Destroyer{Store: store, StateDir: dir, Log: &log, CanceledExitCode: 130}.Destroy(ctx, r, alive)
	j, ok := err.(interface{ Unwrap() []error })
	if !ok || len(j.Unwrap()) != 2 {
		t.Fatalf("Destroy = %v; want a list of the two instances", err)
	}
	list := j.Unwrap()
	for i, name := range []string{"a", "b"} {
		var nr *NotRemovedError
		if !errors.As(list[i], &nr) || nr.Resource.Name != name {
			t.Errorf("entry %d = %v; want instance %s not removed", i, list[i], name)
			continue
		}
		want := "run " + run + ": instance " + name + " (tf-" + name + "): resources on the \"gone-cloud\" platform"
		if !strings.HasPrefix(nr.Error(), want) {
			t.Errorf("entry %d = %q; want it to start %q", i, nr.Error(), want)
		}
	}
	if got, _ := store.Run(ctx, run); got.State != state.RunRunning {
		t.Errorf("run recorded as %s with resources left; want it left running", got.State)
	}
}

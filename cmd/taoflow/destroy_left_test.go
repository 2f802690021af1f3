package main

import (
	"strings"
	"testing"
	"time"

	"github.com/taoflow/taoflow/state"
)

// TestDestroyNamesWhatIsLeft: when destroy cannot remove resources, it
// lists each (run, resource, why), names the command that removes what is
// left — with the flags that confirm the ssh config its platform settings
// name, so the advice, run as printed, is not refused — and exits 3.
func TestDestroyNamesWhatIsLeft(t *testing.T) {
	t.Chdir(t.TempDir())
	ctx := t.Context()
	store, err := state.Open(".taoflow")
	if err != nil {
		t.Fatal(err)
	}
	const run = "lost-1203-000000-abcd"
	if err := store.CreateRun(ctx, state.Run{ID: run, Name: "lost", State: state.RunRunning, PID: 4194305, StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		id, err := store.RecordIntent(ctx, state.Resource{RunID: run, Kind: state.KindInstance, Name: name, Instance: name, Platform: "gone-cloud",
			Data: map[string]string{"pf.ssh_config": "/srv/team ssh/config"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := store.MarkCreated(ctx, id, map[string]string{"ref": "tf-" + name}); err != nil {
			t.Fatal(err)
		}
	}
	store.Close()

	// Unconfirmed, the ssh config is refused with the flag to give,
	// quoted as a shell needs it.
	code, _, errOut := applyCLI(t, "destroy", run, "--yes")
	if code != exitUsage || !strings.Contains(errOut, "If it is yours, confirm it: --ssh-config '/srv/team ssh/config'") {
		t.Errorf("destroy of a state naming an ssh config, unconfirmed: exit %d, want 2 with the flag to give\n%s", code, errOut)
	}
	code, _, errOut = applyCLI(t, "destroy", run, "--yes", "--ssh-config", "/srv/team ssh/config")
	if code != exitTeardown {
		t.Errorf("destroy exit %d, want 3\n%s", code, errOut)
	}
	for _, want := range []string{
		"taoflow: 2 resources could not be removed; they may still exist (and bill):\n",
		"taoflow:   run " + run + ": instance a (tf-a): resources on the \"gone-cloud\" platform",
		"taoflow:   run " + run + ": instance b (tf-b): resources on the \"gone-cloud\" platform",
		"taoflow: remove what is left of run " + run + " with: taoflow destroy " + run + " --yes --ssh-config '/srv/team ssh/config'\n",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

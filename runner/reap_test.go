package runner

import (
	"strings"
	"testing"
	"time"

	"github.com/taoflow/taoflow/state"
)

// TestReapOnlyBrevWithoutBrev: asked to look only at brev instances where
// there is no brev CLI, Reap says so instead of finding nothing in silence,
// and does not look at containers.
func TestReapOnlyBrevWithoutBrev(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // neither brev nor docker
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	r, err := Reap(t.Context(), ReapConfig{StateDir: t.TempDir(), Only: ReapBrev})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if len(r.Found) != 0 || len(r.Problems) != 1 || !strings.Contains(r.Problems[0].Error(), "no brev CLI on PATH") {
		t.Errorf("found %v, problems %v; want nothing and one problem naming the missing brev CLI", r.Found, r.Problems)
	}
}

// TestKnownResourcesConfirmFlags: what another state records comes with
// the destroy flags its resources need (the brev program and ssh config
// they were made with), so reap's "destroy it there" advice runs as given.
func TestKnownResourcesConfirmFlags(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	store, err := state.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	const run = "sweep-0101-000000-aaaa"
	if err := store.CreateRun(ctx, state.Run{ID: run, Name: "sweep", State: state.RunRunning, StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.RecordIntent(ctx, state.Resource{RunID: run, Kind: state.KindInstance, Name: "gpu", Instance: "gpu",
		Platform: "brev", Data: map[string]string{"ref": "tf-sweep-gpu", dataBinary: "/opt/my brev"}}); err != nil {
		t.Fatal(err)
	}
	store.Close()
	known, _, flags, err := knownResources(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if known["brev:tf-sweep-gpu"] != run {
		t.Errorf("known = %v", known)
	}
	e := elsewhereRun{run: run, dir: dir, flags: flags[run]}
	if want := "taoflow destroy " + run + " --state " + dir + " --brev-binary '/opt/my brev'"; e.destroy() != want {
		t.Errorf("destroy advice = %q, want %q", e.destroy(), want)
	}
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taoflow/taoflow/platform/brev/brevtest"
)

// TestReapOtherState: reap, run from a directory whose state knows nothing,
// leaves a tf-* instance that a run in another state directory of this
// user's records (the index of states): it says which run, where, and the
// command that removes it there — and does not offer it for deletion, with
// --yes neither; --name of it is refused (exit 2). A recorded leftover that
// no state accounts for is still found.
func TestReapOtherState(t *testing.T) {
	f, dir := brevEnv(t, brevtest.Options{})
	other := filepath.Join(t.TempDir(), "proj")
	if err := os.MkdirAll(other, 0o700); err != nil {
		t.Fatal(err)
	}
	const kept, lost, run = "tf-sweep-0101-000000-aaaa-gpu", "tf-lost-0101-000000-bbbb-gpu", "sweep-0101-000000-aaaa"
	brevCreateRecorded(t, f, kept)
	brevCreateRecorded(t, f, lost)
	recordBrevInstance(t, other, run, "", "gpu", kept, true)
	// What apply writes when it uses a state: a line in the index of
	// states under the (fake) HOME.
	index := filepath.Join(f.Home, ".local", "state", "taoflow", "states")
	if err := os.MkdirAll(filepath.Dir(index), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(index, []byte(`{"dir":"`+filepath.Join(other, ".taoflow")+`"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".taoflow")); err == nil {
		t.Fatal("the working directory has a state; the test wants none")
	}
	where := filepath.Join(other, ".taoflow")
	why := "it belongs to run " + run + " in " + where + ": resume or destroy it there"
	for _, args := range [][]string{{"reap", "--only", "brev"}, {"reap", "--only", "brev", "--yes"}} {
		code, out, errOut := applyCLI(t, args...)
		if code != 0 {
			t.Errorf("%s: exit %d, want 0\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		found, notReaped, _ := strings.Cut(out, "not reaped (")
		if strings.Contains(found, kept) {
			t.Errorf("%s offers to delete the instance of a run in another state:\n%s", strings.Join(args, " "), out)
		}
		if !strings.Contains(found, lost) {
			t.Errorf("%s does not find the leftover no state accounts for:\n%s", strings.Join(args, " "), out)
		}
		if !strings.Contains(notReaped, "brev instance "+kept+" (RUNNING g5.xlarge): "+why+"\n    remove it with: taoflow destroy "+run+" --state "+where+"\n") {
			t.Errorf("%s does not say whose the instance is:\n%s", strings.Join(args, " "), out)
		}
	}
	if st := f.Status(kept); st != "RUNNING" {
		t.Errorf("reap --yes touched the instance of a run in another state: %s", st)
	}
	code, out, errOut := applyCLI(t, "reap", "--only", "brev", "--json")
	r := reapJSONOf(t, out)
	if code != 0 || len(r.NotReaped) != 1 || r.NotReaped[0].Reason != "other-state" || r.NotReaped[0].Why != why {
		t.Errorf("reap --json: exit %d, %+v\n%s", code, r.NotReaped, errOut)
	}
	code, out, errOut = applyCLI(t, "reap", "--name", kept, "--yes")
	if code != exitUsage || !strings.Contains(errOut, "--name "+kept+": it belongs to run "+run+" in "+where+": resume or destroy it there") {
		t.Errorf("reap --name of another state's instance: exit %d\n%s%s", code, out, errOut)
	}
	if st := f.Status(kept); st != "RUNNING" {
		t.Errorf("reap --name deleted the instance of a run in another state: %s", st)
	}
	// destroy there, as reap says, removes it.
	code, out, errOut = applyCLI(t, "destroy", run, "--state", where, "--yes")
	if code != 0 {
		t.Errorf("destroy %s --state %s: exit %d\n%s%s", run, where, code, out, errOut)
	}
	if st := f.Status(kept); st != "DELETING" && st != "" {
		t.Errorf("the instance is %s after the destroy reap named", st)
	}
}

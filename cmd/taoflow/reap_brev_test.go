package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/taoflow/taoflow/platform/brev/brevtest"
)

// reapOut is what reap --json prints, as a script reads it.
type reapOut struct {
	Found []struct {
		Name    string
		Removed *bool
	}
	NotReaped []struct {
		Name, Reason, Why, Command string
	} `json:"not_reaped"`
	Unaccounted int      `json:"unaccounted"`
	Problems    []string `json:"problems"`
	Login       string   `json:"brev_login"`
}

func reapJSONOf(t *testing.T, out string) reapOut {
	t.Helper()
	var r reapOut
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("reap --json: %v\n%s", err, out)
	}
	return r
}

// TestReapBlindSpot: an orphan of this user's made from another machine (a
// CI runner whose HOME, and so its record, is gone) is not "nothing to
// reap": reap lists it on stdout as not reaped, says that under a user
// login it is most likely the user's, gives the command that removes it,
// and exits 3 — with --yes too, and in --json. reap --name deletes it
// (delete, then the wait until brev lists it DELETING): exit 0. --name
// refuses (exit 2, nothing deleted) a name that is not a leftover.
func TestReapBlindSpot(t *testing.T) {
	f, dir := brevEnv(t, brevtest.Options{})
	const ci = "tf-ci-0101-000000-cccc-gpu"
	brevCreate(t, f, ci)
	brevCreateRecorded(t, f, "tf-dead-0101-000000-bbbb-gpu")
	recordBrevInstance(t, dir, "dead-0101-000000-bbbb", "", "gpu", "tf-dead-0101-000000-bbbb-gpu", true)
	f.AddExisting("my-box")

	for _, args := range [][]string{{"reap", "--only", "brev"}, {"reap", "--only", "brev", "--yes"}} {
		code, out, errOut := applyCLI(t, args...)
		if code != exitTeardown {
			t.Errorf("%s: exit %d, want 3\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		if strings.Contains(out, "nothing to reap\n") {
			t.Errorf("%s says nothing to reap while %s runs:\n%s", strings.Join(args, " "), ci, out)
		}
		if !strings.Contains(out, "not reaped (2):\n  brev instance "+ci+" (RUNNING g5.xlarge): ") ||
			!strings.Contains(out, "brev is logged in as a user, whose `brev ls` lists only your own instances and those shared with you, so it is most likely yours") ||
			!strings.Contains(out, "    remove it with: taoflow reap --name "+ci+" --yes\n") {
			t.Errorf("%s does not say on stdout what it left and why:\n%s", strings.Join(args, " "), out)
		}
		if !strings.Contains(errOut, "1 tf-* brev instance that no state, live run or record here accounts for still exists") {
			t.Errorf("%s does not say why it exits 3:\n%s", strings.Join(args, " "), errOut)
		}
	}
	code, out, _ := applyCLI(t, "reap", "--only", "brev", "--json")
	r := reapJSONOf(t, out)
	if code != exitTeardown || r.Unaccounted != 1 || len(r.Found) != 0 || r.Login != "user" || len(r.Problems) != 0 {
		t.Errorf("reap --json: exit %d, %+v", code, r)
	}
	for _, n := range r.NotReaped {
		if n.Name == ci && (n.Reason != "unrecorded" || n.Command != "taoflow reap --name "+ci+" --yes") {
			t.Errorf("reap --json, not reaped: %+v", n)
		}
	}
	if st := f.Status(ci); st != "RUNNING" {
		t.Fatalf("reap without --name changed %s: %s", ci, st)
	}

	// --name refuses what is not a leftover, before anything is deleted.
	for name, want := range map[string]string{
		"tf-dead-0101-000000-bbbb-gpu": "it belongs to run dead-0101-000000-bbbb in the state; remove it with: taoflow destroy dead-0101-000000-bbbb",
		"tf-nope-0101-000000-0000-gpu": "brev ls does not list it",
		"my-box":                       "reap deletes only the instances taoflow names, tf-…",
	} {
		code, out, errOut := applyCLI(t, "reap", "--name", name, "--name", ci, "--yes")
		if code != exitUsage || !strings.Contains(errOut, want) {
			t.Errorf("reap --name %s: exit %d, want 2 saying %q\n%s%s", name, code, want, out, errOut)
		}
	}
	if n := len(f.CallsOf("delete", "")); n != 0 {
		t.Fatalf("a refused reap --name ran brev delete %d times", n)
	}

	// Named, it is listed to delete (and accounted for: exit 0), then
	// deleted with the platform's wait.
	code, out, errOut := applyCLI(t, "reap", "--name", ci)
	if code != exitOK || !strings.Contains(out, "brev instance  "+ci) || !strings.Contains(out, "1 found; run it again with --yes to delete them") ||
		!strings.Contains(out, "tf-dead-0101-000000-bbbb-gpu (RUNNING g5.xlarge): it belongs to run dead-0101-000000-bbbb in the state") {
		t.Errorf("reap --name: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = applyCLI(t, "reap", "--name", ci, "--yes")
	if code != exitOK || !strings.Contains(out, "brev instance "+ci+": removed") {
		t.Fatalf("reap --name --yes: exit %d\n%s%s", code, out, errOut)
	}
	if st := f.Status(ci); st != "DELETING" && st != "" {
		t.Errorf("%s is %s after reap --name --yes", ci, st)
	}
	if len(f.CallsOf("delete", ci)) != 1 || len(f.CallsOf("delete", "tf-dead-0101-000000-bbbb-gpu")) != 0 {
		t.Errorf("reap --name deleted other than the named instance")
	}
	if st := f.Status("my-box"); st != "RUNNING" {
		t.Errorf("my-box is %s", st)
	}

	// Everything accounted for: exit 0.
	code, out, errOut = applyCLI(t, "reap", "--only", "brev")
	if code != exitOK || !strings.Contains(out, "nothing to reap\n") {
		t.Errorf("reap with nothing left: exit %d\n%s%s", code, out, errOut)
	}

	// brev logged out, or its listing failing: nothing was searched, and
	// reap says so, exit 1, never "nothing to reap".
	f.SetLoggedOut(true)
	code, out, errOut = applyCLI(t, "reap", "--only", "brev")
	if code != exitFailed || strings.Contains(out, "nothing to reap") ||
		!strings.Contains(out, "could not search (there may be leftovers reap did not see):\n  listing brev instances: ") || !strings.Contains(out, "brev is not logged in: run `brev login`") {
		t.Errorf("reap with brev logged out: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = applyCLI(t, "reap", "--only", "brev", "--json", "--yes")
	if r := reapJSONOf(t, out); code != exitFailed || len(r.Problems) != 1 || !strings.Contains(r.Problems[0], "not logged in") {
		t.Errorf("reap --json with brev logged out: exit %d\n%s", code, out)
	}
	f.SetLoggedOut(false)
	brevDelete(t, f, "tf-dead-0101-000000-bbbb-gpu")

	// A brev whose ls output cannot be read (a banner before the JSON).
	brevEnv(t, brevtest.Options{Banner: "A new version of brev has been released! v0.6.400"})
	code, out, errOut = applyCLI(t, "reap", "--only", "brev", "--yes")
	if code != exitFailed || strings.Contains(out, "nothing to reap") || !strings.Contains(out, "listing brev instances: ") ||
		!strings.Contains(out, "cannot read the output of `brev ls --json`") {
		t.Errorf("reap with brev ls unreadable: exit %d\n%s%s", code, out, errOut)
	}
}

// TestReapUnrecordedByLogin: under an API key, brev lists the whole org,
// so an unrecorded tf-* instance may be a teammate's: reap says so and
// refuses --unrecorded (exit 2, nothing deleted). Under a user login
// --unrecorded reaps it.
func TestReapUnrecordedByLogin(t *testing.T) {
	f, _ := brevEnv(t, brevtest.Options{APIKey: true})
	const other = "tf-other-0101-000000-dddd-gpu"
	f.AddOthers(other, "alice")
	code, out, errOut := applyCLI(t, "reap", "--only", "brev")
	if code != exitTeardown || !strings.Contains(out, "brev is logged in with an API key, whose `brev ls` lists the whole organisation's instances: a teammate's run, or yours from another machine") ||
		strings.Contains(out, "most likely yours") {
		t.Errorf("reap under an API key: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = applyCLI(t, "reap", "--only", "brev", "--unrecorded", "--yes")
	if code != exitUsage || !strings.Contains(errOut, "--unrecorded: brev is logged in with an API key") {
		t.Errorf("reap --unrecorded under an API key: exit %d\n%s%s", code, out, errOut)
	}
	if len(f.CallsOf("delete", "")) != 0 || f.Status(other) != "RUNNING" {
		t.Fatalf("reap --unrecorded under an API key deleted something")
	}

	g, _ := brevEnv(t, brevtest.Options{})
	const mine = "tf-mine-0101-000000-eeee-gpu"
	brevCreate(t, g, mine)
	code, out, errOut = applyCLI(t, "reap", "--only", "brev", "--unrecorded", "--yes")
	if code != exitOK || !strings.Contains(out, "brev instance "+mine+": removed") {
		t.Errorf("reap --unrecorded under a user login: exit %d\n%s%s", code, out, errOut)
	}
	if st := g.Status(mine); st != "DELETING" && st != "" {
		t.Errorf("%s is %s", mine, st)
	}
	brevDelete(t, f, other)
}

package brevtest_test

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/taoflow/taoflow/platform/brev/brevtest"
)

func TestVersion(t *testing.T) {
	for name, tc := range map[string]struct {
		opts brevtest.Options
		want string
	}{
		"default": {brevtest.Options{}, "Current Version: v0.6.327\n"},
		"old":     {brevtest.Options{Version: "v0.6.319"}, "Current Version: v0.6.319\n"},
	} {
		t.Run(name, func(t *testing.T) {
			f := brevtest.Start(t, tc.opts)
			r := mustBrev(t, f, "--version", "--no-check-latest")
			if r.stdout != tc.want {
				t.Errorf("stdout = %q, want %q", r.stdout, tc.want)
			}
			if c := lastCall(t, f); c.Command != "version" || c.ExitCode != 0 {
				t.Errorf("call = %+v, want command version, exit 0", c)
			}
		})
	}
}

func TestNoStateDir(t *testing.T) {
	f := brevtest.Start(t, brevtest.Options{})
	cmd := exec.Command(f.Binary, "ls")
	for _, kv := range f.Env() {
		if !strings.HasPrefix(kv, "TF_FAKEBREV=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(string(out), "TF_FAKEBREV is not set") {
		t.Errorf("without TF_FAKEBREV: exit %d (%v), output %q; want exit 1 naming the variable", code, err, out)
	}
}

func TestEnvFindsFakeOnPath(t *testing.T) {
	f := brevtest.Start(t, brevtest.Options{})
	cmd := exec.Command("sh", "-c", `command -v brev; echo "$HOME $TF_FAKEBREV $BREV_NO_ANALYTICS"`)
	cmd.Env = f.Env()
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	want := f.Binary + "\n" + f.Home + " " + f.Dir + " 1\n"
	if string(out) != want {
		t.Errorf("got %q, want %q", out, want)
	}
}

func TestLsJSONShapes(t *testing.T) {
	for name, tc := range map[string]struct {
		array      bool
		instance   bool
		wantPrefix string
	}{
		"object empty": {wantPrefix: "{\n  \"workspaces\": null\n}\n"},
		"array empty":  {array: true, wantPrefix: "null\n"},
		"object":       {instance: true, wantPrefix: "{\n  \"workspaces\": [\n    {\n      \"name\": \"box\",\n"},
		"array":        {array: true, instance: true, wantPrefix: "[\n  {\n    \"name\": \"box\",\n"},
	} {
		t.Run(name, func(t *testing.T) {
			f := brevtest.Start(t, brevtest.Options{ArrayJSON: tc.array})
			var want []map[string]any
			if tc.instance {
				i := f.AddExisting("box")
				want = []map[string]any{{
					"name": "box", "id": i.ID, "status": "RUNNING", "build_status": "COMPLETED",
					"shell_status": "READY", "health_status": "HEALTHY", "instance_type": "g5.xlarge",
					"instance_kind": "gpu", "gpu": "A10G",
				}}
			}
			r := mustBrev(t, f, "ls", "--json")
			if !strings.HasPrefix(r.stdout, tc.wantPrefix) {
				t.Fatalf("stdout = %q, want it to start %q", r.stdout, tc.wantPrefix)
			}
			var got []map[string]any
			if tc.array {
				if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
					t.Fatal(err)
				}
			} else {
				var obj map[string][]map[string]any
				if err := json.Unmarshal([]byte(r.stdout), &obj); err != nil {
					t.Fatal(err)
				}
				got = obj["workspaces"]
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("workspaces (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLsTable(t *testing.T) {
	f := brevtest.Start(t, brevtest.Options{})
	if r := mustBrev(t, f, "list"); !strings.HasPrefix(r.stdout, "No instances in org ") {
		t.Errorf("empty ls printed %q", r.stdout)
	}
	i := f.AddExisting("box")
	r := mustBrev(t, f, "ls")
	lines := strings.Split(r.stdout, "\n")
	if len(lines) < 4 || lines[0] != "You have 1 instances in Org fake-org" ||
		strings.Fields(lines[1])[0] != "NAME" ||
		!cmp.Equal(strings.Fields(lines[2]), []string{"box", "RUNNING", "COMPLETED", "READY", i.ID, "g5.xlarge", "A10G"}) {
		t.Errorf("ls printed %q", r.stdout)
	}
	if c := lastCall(t, f); c.Command != "ls" {
		t.Errorf("command = %q, want ls", c.Command)
	}
	if r := brev(t, f, nil, "ls", "instances", "orgs"); r.code != 1 || !strings.Contains(r.stderr, "too many args provided") {
		t.Errorf("ls with two args: %+v", r)
	}
}

func TestDeployTicks(t *testing.T) {
	f := brevtest.Start(t, brevtest.Options{DeployPolls: 2})
	r := mustBrev(t, f, "create", "box", "--type", "g5.xlarge,g5.2xlarge", "--detached")
	if r.stdout != "box\n" {
		t.Errorf("create stdout = %q, want the name alone", r.stdout)
	}
	if f.Status("box") != "DEPLOYING" {
		t.Fatalf("after create: %+v", f.Instances())
	}
	var seen []string
	for range 3 {
		seen = append(seen, lsJSON(t, f)["box"]["status"])
	}
	if want := []string{"DEPLOYING", "DEPLOYING", "RUNNING"}; !cmp.Equal(seen, want) {
		t.Errorf("statuses over ls ticks = %v, want %v", seen, want)
	}
	if got := f.Instances()[0].Type; got != "g5.xlarge" {
		t.Errorf("type = %q, want the chain's first", got)
	}
}

func TestCreateWaits(t *testing.T) {
	f := brevtest.Start(t, brevtest.Options{DeployPolls: 3})
	r := mustBrev(t, f, "create", "--name", "box", "-t", "g5.xlarge")
	if r.stdout != "box\n" {
		t.Errorf("stdout = %q", r.stdout)
	}
	if !strings.Contains(r.stderr, "  box: Ready\n") || !strings.Contains(r.stderr, "[Worker 1] g5.xlarge Success! Created instance 'box'") {
		t.Errorf("stderr lacks progress: %q", r.stderr)
	}
	// Spinner frames: carriage returns, no newline between frames.
	if !strings.Contains(r.stderr, "\r⣾ ") || strings.Contains(r.stderr, "⣾ Creating instance...\n") {
		t.Errorf("stderr lacks \\r spinner frames: %q", r.stderr)
	}
	if s := f.Status("box"); s != "RUNNING" {
		t.Errorf("status = %q, want RUNNING", s)
	}
	if c := lastCall(t, f); c.Command != "create" || !cmp.Equal(c.Names, []string{"box"}) {
		t.Errorf("call = %+v", c)
	}
}

func TestCreateValidation(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"no name":   {[]string{"create", "-t", "g5.xlarge"}, "name is required"},
		"too long":  {[]string{"create", strings.Repeat("a", 64), "-t", "g5.xlarge"}, "name must be 63 characters or fewer (got 64)"},
		"bad chars": {[]string{"create", "-t", "g5.xlarge", "--", "-box"}, "name must start with a letter or digit and contain only letters, digits, hyphens, underscores, and dots"},
		"space":     {[]string{"create", "my box", "-t", "g5.xlarge"}, "name must start with a letter or digit"},
		"gpu flag":  {[]string{"create", "box", "--gpu", "g5.xlarge"}, "unknown flag: --gpu"},
		"count":     {[]string{"create", "box", "-t", "g5.xlarge", "--count", "0"}, "--count must be at least 1"},
		"gpu name":  {[]string{"create", "box", "-g", "Z9000"}, "no GPU instances match the specified filters"},
	} {
		t.Run(name, func(t *testing.T) {
			f := brevtest.Start(t, brevtest.Options{})
			r := brev(t, f, nil, tc.args...)
			if r.code != 1 || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit 1 and %q", r.code, r.stderr, tc.want)
			}
			if got := f.Instances(); len(got) != 0 {
				t.Errorf("instances after a refused create: %+v", got)
			}
		})
	}
	t.Run("63 chars and -g filter", func(t *testing.T) {
		f := brevtest.Start(t, brevtest.Options{})
		name := strings.Repeat("a", 62) + "."
		mustBrev(t, f, "create", name, "-g", "A10G", "-d")
		if got := f.Instances(); len(got) != 1 || got[0].Name != name || got[0].Type != "g5.xlarge" {
			t.Errorf("instances = %+v, want one g5.xlarge (an A10G)", got)
		}
	})
}

func TestCreateDuplicateWhileDeleting(t *testing.T) {
	f := brevtest.Start(t, brevtest.Options{DeployPolls: 1, DeleteTicks: 2})
	mustBrev(t, f, "create", "box", "-t", "g5.xlarge")
	mustBrev(t, f, "delete", "box")
	for tick := 0; ; tick++ {
		r := brev(t, f, nil, "create", "box", "-t", "g5.xlarge", "-d")
		if r.code != 1 || !strings.Contains(r.stderr, "duplicate workspace") || !strings.Contains(r.stderr, "workspace 'box' already exists") {
			t.Fatalf("re-create while DELETING: exit %d, stderr %q; want the duplicate error", r.code, r.stderr)
		}
		if got := lsJSON(t, f); got["box"] == nil {
			break // gone
		}
		if tick > 5 {
			t.Fatal("box never left DELETING")
		}
	}
	mustBrev(t, f, "create", "box", "-t", "g5.xlarge", "-d")
	if s := f.Status("box"); s != "DEPLOYING" {
		t.Errorf("re-created box is %q", s)
	}
}

func TestDelete(t *testing.T) {
	f := brevtest.Start(t, brevtest.Options{DeleteTicks: 1})
	f.AddExisting("a")
	f.AddExisting("b")
	r := brev(t, f, nil, "delete", "nope", "a")
	if r.code != 1 || r.stdout != "" {
		t.Errorf("delete nope a: exit %d stdout %q; want 1 and nothing (not all succeeded)", r.code, r.stdout)
	}
	for _, want := range []string{"1 error occurred:\n\t* [error] \n", "delete.go:", "\n: instance with id/name nope not found"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr %q lacks %q", r.stderr, want)
		}
	}
	if s := f.Status("a"); s != "DELETING" {
		t.Errorf("a after delete = %q, want DELETING (the others still processed)", s)
	}
	// By id, and the piped stdout lists the names when all succeeded.
	id := f.Instances()[1].ID
	if r := mustBrev(t, f, "delete", id); r.stdout != id+"\n" {
		t.Errorf("delete by id printed %q", r.stdout)
	}
	if got := lsJSON(t, f); got["a"]["status"] != "DELETING" || got["b"]["status"] != "DELETING" {
		t.Errorf("first ls: %v", got)
	}
	if got := lsJSON(t, f); len(got) != 0 {
		t.Errorf("second ls: %v, want both gone", got)
	}
	r = brev(t, f, nil, "delete", "a")
	if r.code != 1 || !strings.Contains(r.stderr, "instance with id/name a not found") {
		t.Errorf("delete of a gone instance: exit %d stderr %q", r.code, r.stderr)
	}
	if r := brev(t, f, nil, "delete"); r.code != 1 || !strings.Contains(r.stderr, "instance name required") {
		t.Errorf("delete with no names: %+v", r)
	}
}

func TestDeleteNamesFromPipe(t *testing.T) {
	f := brevtest.Start(t, brevtest.Options{})
	f.AddExisting("a")
	f.AddExisting("b")
	mustBrev(t, f, "delete", "a") // stdin /dev/null: b untouched
	if f.Status("b") != "RUNNING" {
		t.Fatal("delete a touched b")
	}
	// A pipe is read to EOF as more names: an innocent-looking "delete a"
	// with stdin inherited from a pipe deletes b too.
	r := brev(t, f, strings.NewReader("b\n\n"), "delete", "a")
	if r.code != 0 || f.Status("b") != "DELETING" {
		t.Errorf("delete a with b piped: %+v, b %s", r, f.Status("b"))
	}
	c := lastCall(t, f)
	if !c.StdinPiped || !cmp.Equal(c.Names, []string{"a", "b"}) {
		t.Errorf("call = %+v, want stdin piped and names [a b]", c)
	}
}

func TestStopStart(t *testing.T) {
	f := brevtest.Start(t, brevtest.Options{})
	f.AddExisting("box")
	if r := mustBrev(t, f, "stop", "box"); r.stdout != "box\n" {
		t.Errorf("stop stdout = %q", r.stdout)
	}
	var seen []string
	for range 2 {
		seen = append(seen, lsJSON(t, f)["box"]["status"])
	}
	if want := []string{"STOPPING", "STOPPED"}; !cmp.Equal(seen, want) {
		t.Errorf("after stop: %v, want %v", seen, want)
	}
	if r := brev(t, f, nil, "stop", "nope"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("stop nope: %+v", r)
	}

	r := mustBrev(t, f, "start", "box", "--detached")
	if !strings.HasPrefix(r.stdout, "Instance box is starting. \n") {
		t.Errorf("start stdout = %q", r.stdout)
	}
	seen = nil
	for range 2 {
		seen = append(seen, lsJSON(t, f)["box"]["status"])
	}
	if want := []string{"STARTING", "RUNNING"}; !cmp.Equal(seen, want) {
		t.Errorf("after start: %v, want %v", seen, want)
	}
	if r := brev(t, f, nil, "start", "box"); r.code != 1 || !strings.Contains(r.stderr, "Instance is not stopped status=RUNNING") {
		t.Errorf("start of a running box: %+v", r)
	}
	// An unknown name is taken for a missing local path, and "succeeds".
	r = brev(t, f, nil, "start", "nope")
	if r.code != 0 || !strings.Contains(r.stdout, "tried to start with local path but path not found") {
		t.Errorf("start nope: %+v", r)
	}
	// Without --detached it waits for RUNNING itself.
	f.SetStatus("box", "STOPPED")
	r = mustBrev(t, f, "start", "box")
	if !strings.Contains(r.stdout, "Your instance is ready!") || f.Status("box") != "RUNNING" {
		t.Errorf("start without -d: %+v, status %s", r, f.Status("box"))
	}
}

func TestRigHelpers(t *testing.T) {
	f := brevtest.Start(t, brevtest.Options{})
	f.AddExisting("theirs")
	mustBrev(t, f, "create", "mine", "-t", "g5.xlarge", "-d")
	mustBrev(t, f, "create", "doomed", "-t", "g5.xlarge", "-d")
	mustBrev(t, f, "delete", "doomed")
	alive := f.Alive()
	if len(alive) != 1 || alive[0].Name != "mine" || alive[0].Status != "DEPLOYING" {
		t.Errorf("Alive = %+v, want just mine", alive)
	}
	rec := &recorder{TB: t}
	f.CheckNoneAlive(rec)
	if len(rec.errors) != 1 || !strings.Contains(rec.errors[0], "mine (DEPLOYING)") || strings.Contains(rec.errors[0], "theirs") {
		t.Errorf("CheckNoneAlive reported %q", rec.errors)
	}
	mustBrev(t, f, "delete", "mine")
	rec = &recorder{TB: t}
	f.CheckNoneAlive(rec)
	if len(rec.errors) != 0 {
		t.Errorf("CheckNoneAlive with none alive reported %q", rec.errors)
	}

	calls := f.Calls()
	var cmds []string
	for n, c := range calls {
		cmds = append(cmds, c.Command)
		if n > 0 && c.Start.Before(calls[n-1].Start) || c.End.Before(c.Start) {
			t.Errorf("call %d times out of order: %+v", n, c)
		}
	}
	if want := []string{"create", "create", "delete", "delete"}; !cmp.Equal(cmds, want) {
		t.Errorf("calls = %v, want %v", cmds, want)
	}
	if c := calls[0]; !cmp.Equal(c.Args, []string{"create", "mine", "-t", "g5.xlarge", "-d"}) || c.StdinPiped || c.ExitCode != 0 {
		t.Errorf("first call = %+v", c)
	}
}

// recorder is a testing.TB that keeps Errorf's messages instead of
// failing.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

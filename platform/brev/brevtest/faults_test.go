package brevtest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taoflow/taoflow/platform/brev/brevtest"
)

func TestFaultCreateEOFLeavesOrphan(t *testing.T) {
	f := brevtest.Start(t, brevtest.Options{})
	f.Inject(brevtest.Fault{Kind: "create-eof", Name: "box"})
	r := brev(t, f, nil, "create", "box", "-t", "g5.xlarge")
	if r.code != 1 || r.stdout != "" {
		t.Errorf("create: exit %d stdout %q; want 1 and no name", r.code, r.stdout)
	}
	for _, want := range []string{`RESTY Post "https://`, `/workspaces": unexpected EOF`, "Warning: Only created 0/1 instances", "could only create 0/1 instances"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr %q lacks %q", r.stderr, want)
		}
	}
	// The orphan exists, deploys, and its build status stays empty (#378).
	got := lsJSON(t, f)
	if got["box"] == nil {
		t.Fatalf("ls after a failed create: %v, want the orphan", got)
	}
	got = lsJSON(t, f)
	if got["box"]["status"] != "RUNNING" || got["box"]["build_status"] != "" || got["box"]["shell_status"] != "NOT READY" {
		t.Errorf("orphan = %v", got["box"])
	}
	if alive := f.Alive(); len(alive) != 1 {
		t.Errorf("Alive = %+v, want the orphan", alive)
	}
}

func TestFaultCreateEOFThenNextTypeIsDuplicate(t *testing.T) {
	f := brevtest.Start(t, brevtest.Options{})
	f.Inject(brevtest.Fault{Kind: "create-eof"})
	r := brev(t, f, nil, "create", "box", "-t", "g5.xlarge,g5.2xlarge")
	if r.code != 1 || !strings.Contains(r.stderr, "unexpected EOF") || !strings.Contains(r.stderr, "duplicate workspace") {
		t.Errorf("create with a fallback after an EOF: exit %d stderr %q; want the orphan to make the retry a duplicate", r.code, r.stderr)
	}
	if got := f.Instances(); len(got) != 1 || got[0].Type != "g5.xlarge" {
		t.Errorf("instances = %+v, want the one orphan", got)
	}
}

func TestFaultCreateFailure(t *testing.T) {
	f := brevtest.Start(t, brevtest.Options{})
	f.Inject(brevtest.Fault{Kind: "create-failure"})
	r := brev(t, f, nil, "create", "box", "-t", "g5.xlarge")
	if r.code != 0 || r.stdout != "box\n" {
		t.Errorf("create: %+v; want exit 0 and the name (failures are only logged)", r)
	}
	if !strings.Contains(r.stderr, "  box: instance box failed: ") {
		t.Errorf("stderr = %q", r.stderr)
	}
	if s := f.Status("box"); s != "FAILURE" {
		t.Errorf("status = %q, want FAILURE", s)
	}
	if got := lsJSON(t, f)["box"]; got["build_status"] != "CREATE_FAILED" {
		t.Errorf("ls = %v", got)
	}
	// Consumed: the next create is healthy.
	mustBrev(t, f, "create", "box2", "-t", "g5.xlarge")
	if s := f.Status("box2"); s != "RUNNING" {
		t.Errorf("box2 = %q, want RUNNING", s)
	}
}

func TestFaultStuckDeploying(t *testing.T) {
	f := brevtest.Start(t, brevtest.Options{})
	f.Inject(brevtest.Fault{Kind: "stuck-deploying", Times: 2})
	r := brev(t, f, nil, "create", "box", "-t", "g5.xlarge", "--timeout", "20")
	if r.code != 0 || r.stdout != "box\n" || !strings.Contains(r.stderr, "  box: Timeout waiting for ready state") {
		t.Errorf("create: %+v; want exit 0, the name and a logged timeout", r)
	}
	mustBrev(t, f, "create", "box2", "-t", "g5.xlarge", "-d")
	for range 5 {
		lsJSON(t, f)
	}
	for _, name := range []string{"box", "box2"} {
		if s := f.Status(name); s != "DEPLOYING" {
			t.Errorf("%s = %q, want DEPLOYING forever", name, s)
		}
	}
}

func TestFaultExecTransient(t *testing.T) {
	f := startWithSSH(t)
	f.AddExisting("box")
	mustBrev(t, f, "refresh")
	f.Inject(brevtest.Fault{Kind: "exec-transient", Name: "other"}, brevtest.Fault{Kind: "exec-transient", Name: "box"})
	r := brev(t, f, nil, "exec", "box", "touch ran")
	if r.code != 1 {
		t.Errorf("exit %d, want 1", r.code)
	}
	want := "Connection failed, checking instance status...\n" +
		"could not connect to instance \"box\": \nssh: connect to host 127.0.0.1 port 22: Connection refused\nPlease check with: brev ls\n"
	if r.stderr != want {
		t.Errorf("stderr = %q, want %q", r.stderr, want)
	}
	ran := filepath.Join(sandbox(t, f, "box"), "ran")
	if _, err := os.Stat(ran); err == nil {
		t.Error("the command ran despite the transient failure")
	}
	// Consumed; the fault named "other" does not fire for box.
	mustBrev(t, f, "exec", "box", "touch ran")
	if _, err := os.Stat(ran); err != nil {
		t.Errorf("the command did not run after the fault was used: %v", err)
	}
}

func TestFaultDeleteError(t *testing.T) {
	f := brevtest.Start(t, brevtest.Options{})
	f.AddExisting("box")
	f.Inject(brevtest.Fault{Kind: "delete-error", Times: 2})
	for try := range 2 {
		r := brev(t, f, nil, "delete", "box")
		if r.code != 1 || !strings.Contains(r.stderr, "502 Bad Gateway") || r.stdout != "" {
			t.Errorf("delete %d: %+v; want exit 1 with the API error", try, r)
		}
		if s := f.Status("box"); s != "RUNNING" {
			t.Errorf("after a failed delete box is %q", s)
		}
	}
	mustBrev(t, f, "delete", "box")
	if s := f.Status("box"); s != "DELETING" {
		t.Errorf("after the faults box is %q", s)
	}
}

func TestFaultLsError(t *testing.T) {
	f := brevtest.Start(t, brevtest.Options{})
	mustBrev(t, f, "create", "box", "-t", "g5.xlarge", "-d")
	f.Inject(brevtest.Fault{Kind: "ls-error", Name: "ignored"})
	r := brev(t, f, nil, "ls", "--json")
	if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "i/o timeout") {
		t.Errorf("ls: %+v; want exit 1 with a network error", r)
	}
	// The failed ls was no tick: box still has its one DEPLOYING poll.
	if got := lsJSON(t, f)["box"]["status"]; got != "DEPLOYING" {
		t.Errorf("box = %q, want DEPLOYING", got)
	}
	if got := lsJSON(t, f)["box"]["status"]; got != "RUNNING" {
		t.Errorf("box = %q, want RUNNING", got)
	}
}

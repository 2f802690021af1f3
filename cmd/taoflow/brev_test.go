package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taoflow/taoflow/internal/testrig"
	"github.com/taoflow/taoflow/platform/brev"
	"github.com/taoflow/taoflow/platform/brev/brevtest"
	"github.com/taoflow/taoflow/platform/ssh/sshtest"
	"github.com/taoflow/taoflow/pricing"
	"github.com/taoflow/taoflow/runner"
	"github.com/taoflow/taoflow/state"
	"github.com/taoflow/taoflow/steps"
)

// brevEnv starts a fake brev whose instances are reached through a real
// sshd, and points this process's environment at it (HOME, PATH, its state
// directory), as a user's shell would be. It returns the fake and a work
// directory that is the working directory for the test.
func brevEnv(t testing.TB, opts brevtest.Options) (*brevtest.Fake, string) {
	t.Helper()
	opts.SSH = sshtest.Start(t)
	f := brevtest.Start(t, opts)
	for _, kv := range f.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	// An instance cut off is tried four times all the same, without
	// waiting seconds in between.
	t.Setenv("TAOFLOW_RETRY_BACKOFF", "10ms")
	// The brev ledger and the index of states under the fake HOME.
	t.Setenv("XDG_STATE_HOME", "")
	dir := t.TempDir()
	t.Chdir(dir)
	t.Cleanup(func() {
		// No ssh master (or any ssh) of the run outlives it: their argv
		// names the config under the fake HOME.
		if left := processesWith(filepath.Join(f.Home, ".ssh")); len(left) > 0 {
			t.Errorf("ssh processes left: %s", strings.Join(left, "; "))
		}
	})
	return f, dir
}

// brevEnvirons looks at the environment of every running process of the
// fake brev binary and returns those holding text.
func brevEnvirons(binary, text string) []string {
	var leaked []string
	for _, p := range testrig.Processes(func(p testrig.Proc) bool { return bytes.HasPrefix(p.Argv, []byte(binary+"\x00")) }) {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.PID))
		if err != nil {
			continue
		}
		if bytes.Contains(env, []byte(text)) {
			leaked = append(leaked, fmt.Sprintf("environment of process %d (%s)", p.PID, p.Cmdline()))
		}
	}
	return leaked
}

// writePlan writes a plan file into the working directory.
func writePlan(t *testing.T, name, text string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// applyCLI runs `taoflow ARGS` in this process and returns its exit code,
// stdout and stderr.
func applyCLI(t testing.TB, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := exitCode(run(context.Background(), args, stdio{in: strings.NewReader(""), out: &out, err: &errOut}), &errOut)
	return code, out.String(), errOut.String()
}

const brevSweep = `taoflow: 1
name: brev-sweep
platform: {kind: brev}
vars: {dest: ""}
secrets: [MY_SECRET]
instances:
  a: {create: {type: g5.xlarge}}
  b: {create: {type: g5.xlarge}}
  c: {create: {type: "g5.2xlarge,g5.xlarge"}}
  box: {existing: my-box}
steps:
  - id: preflight
    uses: preflight
    with: {interval: 200ms, ready_timeout: 1m}
  - id: train
    uses: run
    needs: [preflight]
    on: [a, b, c]
    matrix: {s: [short, other, long]}
    with:
      env: [MY_SECRET]
      results: ~/results/${{ cell.id }}
      command: |
        mkdir -p ~/results/${{ cell.id }}
        # The long cell trains until the test lets it end.
        if [ ${{ matrix.s }} = long ]; then while [ ! -e ~/go ] && [ -d ~ ]; do sleep 0.05; done; fi
        echo "cell "${{ matrix.s }}", secret of ${#MY_SECRET} bytes" > ~/results/${{ cell.id }}/out.txt
  - id: wait
    uses: wait
    needs: [train]
    matrix: inherit
    with: {interval: 100ms}
  - id: upload
    uses: upload-s3
    needs: [wait]
    matrix: inherit
    with: {from: "~/results/${{ cell.id }}", to: "${{ vars.dest }}/${{ cell.id }}"}
  - id: hello
    uses: run
    on: [box]
    with: {command: "echo hello from the box > ~/hello.txt"}
  - id: hello-wait
    uses: wait
    needs: [hello]
    on: [box]
    with: {interval: 100ms}
finally:
  - id: teardown
    uses: delete
`

// TestBrevSweep: a sweep over three brev instances this run creates, plus
// an existing one it only uses. Each created instance is deleted as soon as
// its own share is done (while the long cell still runs elsewhere); the
// existing one is never created, stopped or deleted; brev is always driven
// with stdin /dev/null and "--" before names; refreshes never overlap; the
// secret is on no argv; nothing is left alive.
func TestBrevSweep(t *testing.T) {
	f, dir := brevEnv(t, brevtest.Options{DeployPolls: 2})
	f.AddExisting("my-box")
	writePlan(t, "sweep.yaml", brevSweep)
	const secretValue = "brev-s3cr3t-value-0123456789"
	t.Setenv("MY_SECRET", secretValue)

	// The long cell ends once the two other instances have been deleted
	// (or after five minutes, which then fails the early-teardown check:
	// a loaded CI machine took more than one to get there).
	release := make(chan struct{})
	go func() {
		defer close(release)
		testrig.Within(5*time.Minute, func() bool { return len(f.CallsOf("delete", "")) >= 2 })
		for _, in := range f.Instances() {
			if in.Sandbox != "" {
				_ = os.WriteFile(filepath.Join(in.Sandbox, "go"), nil, 0o600)
			}
		}
	}()
	defer func() { <-release }()
	stop := make(chan struct{})
	var leaks []string
	announced := map[string]bool{}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
				leaks = append(leaks, processesWith(secretValue)...)
				leaks = append(leaks, brevEnvirons(f.Binary, secretValue)...)
				for name := range runner.LiveNames() {
					announced[name] = true
				}
			}
		}
	}()
	code, out, errOut := applyCLI(t, "apply", "--yes", "--output", "plain", "sweep.yaml", "--var", "dest=file://"+dir+"/results")
	close(stop)
	wg.Wait()
	if code != exitOK {
		t.Fatalf("apply exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if len(leaks) > 0 {
		t.Errorf("the secret was on a command line or in brev's environment: %s", leaks[0])
	}
	// Every brev call's environment, as the fake recorded it (the
	// sampler above can miss calls this short on a loaded machine).
	if len(f.Calls()) == 0 {
		t.Error("no brev call was recorded: the environment check proves nothing")
	}
	for _, c := range f.Calls() {
		for _, kv := range c.Env {
			if strings.Contains(kv, secretValue) {
				t.Errorf("the secret was in the environment of brev %s", strings.Join(c.Args, " "))
			}
		}
	}
	// While it ran, the run announced its instances' names for reap; it
	// took the announcement back when it ended.
	if len(announced) != 3 {
		t.Errorf("announced while running: %v, want the three instances it creates", announced)
	}
	if now := runner.LiveNames(); len(now) != 0 {
		t.Errorf("still announced after the run: %v", now)
	}
	// The instances tick together (any ls is a tick of all), so which of
	// them is seen DEPLOYING depends on timing; the first poll sees one.
	for _, want := range []string{`instance a: creating tf-brev-sweep-`, `instance [abc]: DEPLOYING \(`, `instance c: ready \(`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("no progress line %q in the output:\n%s", want, out)
		}
	}
	if strings.Contains(out+errOut, secretValue) {
		t.Error("the secret is in apply's output")
	}
	for _, s := range []string{"short", "other", "long"} {
		b, err := os.ReadFile(filepath.Join(dir, "results", "s-"+s, "out.txt"))
		if err != nil || !strings.Contains(string(b), "secret of 28 bytes") {
			t.Errorf("results of cell s=%s: %q, %v", s, b, err)
		}
	}

	store, err := state.OpenReadOnly(filepath.Join(dir, ".taoflow"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	r, err := store.LatestRun(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := store.Nodes(context.Background(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	var longInst string
	var longEnd time.Time
	for _, n := range nodes {
		if n.ID == "train[s=long]" {
			longInst = n.Instance
		}
		if n.ID == "upload[s=long]" {
			longEnd = n.EndedAt
		}
	}
	if longInst == "" || longEnd.IsZero() {
		t.Fatalf("no placement or end of the long cell in the state: %+v", nodes)
	}

	calls := f.Calls()
	created := map[string]bool{}
	deleted := map[string]time.Time{}
	for _, c := range calls {
		if c.StdinPiped {
			t.Errorf("brev %s ran with a piped stdin", strings.Join(c.Args, " "))
		}
		if c.Concurrent {
			t.Errorf("a refresh overlapped another: brev %s", strings.Join(c.Args, " "))
		}
		for _, name := range c.Names {
			if name == "my-box" && c.Command != "exec" && c.Command != "ls" {
				t.Errorf("the existing instance was touched: brev %s", strings.Join(c.Args, " "))
			}
		}
		switch c.Command {
		case "create", "delete", "stop":
			i := slices.Index(c.Args, "--")
			if i < 0 || i == len(c.Args)-1 {
				t.Errorf("brev %s: no -- before the names", strings.Join(c.Args, " "))
			}
		}
		for _, name := range c.Names {
			switch c.Command {
			case "create":
				created[name] = true
			case "delete":
				if _, ok := deleted[name]; !ok {
					deleted[name] = c.Start
				}
			}
		}
	}
	if len(created) != 3 {
		t.Errorf("created %v, want the three instances of the plan", created)
	}
	for name := range created {
		if !strings.HasPrefix(name, "tf-"+r.ID+"-") {
			t.Errorf("created %s, not named tf-<run>-<instance>", name)
		}
		at, ok := deleted[name]
		if !ok {
			t.Errorf("%s was never deleted", name)
			continue
		}
		if strings.HasSuffix(name, "-"+longInst) {
			continue
		}
		if !at.Before(longEnd) {
			t.Errorf("%s was deleted at %s, after the long cell on %s ended (%s): no early teardown",
				name, at.Format(time.StampMilli), longInst, longEnd.Format(time.StampMilli))
		}
	}
	f.CheckNoneAlive(t)
	for _, in := range f.Instances() {
		if in.Name == "my-box" {
			if in.Status != "RUNNING" {
				t.Errorf("the existing instance is %s, want RUNNING", in.Status)
			}
			if b, err := os.ReadFile(filepath.Join(in.Sandbox, "hello.txt")); err != nil || !strings.Contains(string(b), "hello from the box") {
				t.Errorf("the step on the existing instance: %q, %v", b, err)
			}
		}
	}
}

const brevExecPlan = `taoflow: 1
name: brev-exec
platform: {kind: brev, transport: exec}
instances:
  gpu: {create: {type: g5.xlarge}}
steps:
  - id: preflight
    uses: preflight
    with: {interval: 200ms, ready_timeout: 1m}
  - id: train
    uses: run
    needs: [preflight]
    matrix: {code: [0, 7]}
    with:
      command: echo ran >> ~/count-${{ cell.id }}; echo "exiting "${{ matrix.code }}; exit ${{ matrix.code }}
  - id: wait
    uses: wait
    needs: [train]
    matrix: inherit
    with: {interval: 100ms}
finally:
  - id: teardown
    uses: delete
`

// TestBrevExecTransport runs a plan over `brev exec`, whose quirks would
// replay a failing command, flatten its exit code to 1, echo the instance
// name into the output and read stdin as names: a job exiting 7 is
// reported as 7 and ran once, the other ran once too although its launch
// hit two transient connection failures, and the echoed name reaches no
// node log; brev's own ssh master connections (ControlPersist 10m) do not
// outlive the run.
func TestBrevExecTransport(t *testing.T) {
	f, dir := brevEnv(t, brevtest.Options{ControlMaster: true})
	writePlan(t, "exec.yaml", brevExecPlan)
	f.Inject(brevtest.Fault{Kind: "exec-transient", Match: "count-code-0", Times: 2})
	code, out, errOut := applyCLI(t, "apply", "--yes", "--output", "plain", "exec.yaml")
	if code != exitFailed {
		t.Fatalf("apply exit %d, want 1 (one cell fails)\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "wait[code=7] failed: job failed: job tf-brev-exec-") || !strings.Contains(errOut, "exited with code 7") {
		t.Errorf("the failing cell is not reported with its exit code:\n%s", errOut)
	}
	if !strings.Contains(out, "wait[code=0] on gpu: succeeded") {
		t.Errorf("the other cell did not succeed:\n%s", out)
	}
	var sandbox, name string
	for _, in := range f.Instances() {
		if strings.HasSuffix(in.Name, "-gpu") {
			sandbox, name = in.Sandbox, in.Name
		}
	}
	if sandbox == "" {
		t.Fatalf("no instance in the fake: %+v", f.Instances())
	}
	for _, cell := range []string{"code-0", "code-7"} {
		b, err := os.ReadFile(filepath.Join(sandbox, "count-"+cell))
		if err != nil || string(b) != "ran\n" {
			t.Errorf("cell %s ran %q (%v); want exactly once", cell, b, err)
		}
	}
	transients := 0
	for _, c := range f.Calls() {
		if c.Command == "exec" && c.ExitCode == 1 && c.Runs == 0 {
			transients++
		}
		if c.Command == "exec" && c.Runs > 1 {
			t.Errorf("brev replayed a command: %s", strings.Join(c.Args, " "))
		}
	}
	if transients != 2 {
		t.Errorf("%d transient exec failures in the call log, want the 2 injected", transients)
	}
	if left := f.Masters(); len(left) > 0 {
		t.Errorf("brev's ssh masters outlived the run: %v", left)
	}
	logs, err := filepath.Glob(filepath.Join(dir, ".taoflow", "runs", "*", "logs", "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no node logs: %v", err)
	}
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		for _, line := range strings.Split(string(b), "\n") {
			if strings.TrimSpace(line) == name || strings.HasSuffix(line, "exiting 7"+name) {
				t.Errorf("the echoed instance name reached the node log %s: %q", filepath.Base(l), line)
			}
		}
	}
	f.CheckNoneAlive(t)
}

// brevCreate makes an instance with the (fake) brev CLI itself, as a run
// that died would have left it, and waits until it is RUNNING.
func brevCreate(t *testing.T, f *brevtest.Fake, name string) {
	t.Helper()
	cmd := exec.Command(f.Binary, "create", "--type", "g5.xlarge", "--detached", "--", name)
	cmd.Env = f.Env()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("brev create %s: %v\n%s", name, err, out)
	}
	for range 10 {
		cmd := exec.Command(f.Binary, "ls", "--json")
		cmd.Env = f.Env()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("brev ls: %v\n%s", err, out)
		}
	}
}

// brevCreateRecorded is brevCreate for an instance taoflow created on this
// machine: its name is in the user's ledger, as Create writes it before
// brev create runs.
func brevCreateRecorded(t *testing.T, f *brevtest.Fake, name string) {
	t.Helper()
	if err := brev.Record(brev.LedgerFile(os.Environ()), name); err != nil {
		t.Fatal(err)
	}
	brevCreate(t, f, name)
}

// brevDelete deletes an instance with the (fake) brev CLI.
func brevDelete(t *testing.T, f *brevtest.Fake, name string) {
	t.Helper()
	cmd := exec.Command(f.Binary, "delete", "--", name)
	cmd.Env = f.Env()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("brev delete %s: %v\n%s", name, err, out)
	}
}

// recordBrevInstance writes into the state in dir a dead run (of the plan
// of hash planHash) that created brev instance name for its instance
// inst, as apply records it.
func recordBrevInstance(t *testing.T, dir, run, planHash, inst, name string, created bool) {
	t.Helper()
	ctx := context.Background()
	store, err := state.Open(filepath.Join(dir, ".taoflow"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.CreateRun(ctx, state.Run{ID: run, Name: "ghost", PlanHash: planHash, Vars: map[string]string{},
		State: state.RunRunning, Host: "elsewhere", StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	id, err := store.RecordIntent(ctx, state.Resource{RunID: run, Kind: state.KindInstance, Name: inst, Instance: inst,
		Platform: "brev", Data: map[string]string{"ref": name}})
	if err != nil {
		t.Fatal(err)
	}
	if !created {
		return // the apply died during brev create
	}
	if err := store.MarkCreated(ctx, id, map[string]string{"ref": name}); err != nil {
		t.Fatal(err)
	}
}

// TestBrevReapAndDestroy: reap lists and deletes the tf- instances no state
// knows about and that this user's taoflow created here, never an instance
// it did not name, nor a teammate's tf- instance that an API key lists (it
// lists it as not reaped, saying why), nor one the state records (destroy
// removes that one, from the state alone).
func TestBrevReapAndDestroy(t *testing.T) {
	f, dir := brevEnv(t, brevtest.Options{})
	f.AddExisting("my-box")
	f.AddOthers("tf-theirs-0101-000000-ffff-gpu", "alice")
	brevCreateRecorded(t, f, "tf-lost-0101-000000-aaaa-gpu")
	brevCreateRecorded(t, f, "tf-dead-0101-000000-bbbb-gpu")
	recordBrevInstance(t, dir, "dead-0101-000000-bbbb", "", "gpu", "tf-dead-0101-000000-bbbb-gpu", true)
	// A run going on in another working directory of this machine (this
	// process stands for its apply), and one whose apply died.
	brevCreateRecorded(t, f, "tf-busy-0101-000000-dddd-gpu")
	defer runner.Announce("busy-0101-000000-dddd", []string{"tf-busy-0101-000000-dddd-gpu"})()
	brevCreateRecorded(t, f, "tf-gone-0101-000000-eeee-gpu")
	ld, err := runner.LiveDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ld, "gone-0101-000000-eeee.json"),
		[]byte(`{"run":"gone-0101-000000-eeee","pid":4194305,"names":["tf-gone-0101-000000-eeee-gpu"]}`), 0o600); err != nil {
		t.Fatal(err)
	}

	// Brev only: this machine's containers are the Docker tests' business
	// (a leftover of an earlier, killed test run must not fail this one).
	// The teammate's instance is accounted for by nothing here and still
	// runs: exit 3, not 0.
	code, out, errOut := applyCLI(t, "reap", "--only", "brev")
	if code != exitTeardown {
		t.Fatalf("reap exit %d, want 3\n%s%s", code, out, errOut)
	}
	found, notReaped, _ := strings.Cut(out, "not reaped (")
	if !strings.Contains(found, "brev instance  tf-lost-0101-000000-aaaa-gpu") || !strings.Contains(found, "brev instance  tf-gone-0101-000000-eeee-gpu") ||
		!strings.Contains(found, "2 found") {
		t.Errorf("reap did not list the lost instances:\n%s", out)
	}
	if strings.Contains(found, "my-box") || strings.Contains(found, "tf-dead") || strings.Contains(found, "tf-busy") || strings.Contains(found, "tf-theirs") {
		t.Errorf("reap listed (to delete) an instance it must leave:\n%s", out)
	}
	if strings.Contains(out, "my-box") {
		t.Errorf("reap lists an instance taoflow did not name:\n%s", out)
	}
	if !strings.HasPrefix(notReaped, "3):") ||
		!strings.Contains(notReaped, "brev instance tf-theirs-0101-000000-ffff-gpu (RUNNING g5.xlarge): "+filepath.Join(f.Home, ".local", "state", "taoflow", "brev-created")+" does not say this user's taoflow created it") ||
		!strings.Contains(notReaped, "remove it with: taoflow reap --name tf-theirs-0101-000000-ffff-gpu --yes") {
		t.Errorf("reap did not say (on stdout) why it leaves the teammate's instance:\n%s", out)
	}
	if !strings.Contains(notReaped, "tf-busy-0101-000000-dddd-gpu (RUNNING g5.xlarge): it belongs to run busy-0101-000000-dddd, whose apply is running on this machine") {
		t.Errorf("reap did not say why it left the live run's instance:\n%s", out)
	}
	if !strings.Contains(notReaped, "tf-dead-0101-000000-bbbb-gpu (RUNNING g5.xlarge): it belongs to run dead-0101-000000-bbbb in the state\n    remove it with: taoflow destroy dead-0101-000000-bbbb\n") {
		t.Errorf("reap did not say why it left the recorded instance:\n%s", out)
	}
	if !strings.Contains(errOut, "taoflow: 1 tf-* brev instance that no state, live run or record here accounts for still exists") {
		t.Errorf("reap does not say why it exits 3:\n%s", errOut)
	}
	if st := f.Status("tf-lost-0101-000000-aaaa-gpu"); st != "RUNNING" {
		t.Errorf("reap without --yes changed the instance: %s", st)
	}

	if !strings.Contains(errOut, "brev instances are reaped when named tf-*, accounted for by no state or live run, and recorded in "+filepath.Join(f.Home, ".local", "state", "taoflow", "brev-created")) {
		t.Errorf("reap does not say how it decides:\n%s", errOut)
	}
	code, out, errOut = applyCLI(t, "reap", "--only", "brev", "--yes")
	if code != exitTeardown || !strings.Contains(out, "brev instance tf-lost-0101-000000-aaaa-gpu: removed") {
		t.Fatalf("reap --yes exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "taoflow: deleting brev instance tf-lost-0101-000000-aaaa-gpu (RUNNING g5.xlarge)") {
		t.Errorf("reap --yes does not list what it deletes before it does:\n%s", errOut)
	}
	if st := f.Status("tf-lost-0101-000000-aaaa-gpu"); st != "DELETING" && st != "" {
		t.Errorf("the lost instance is %s after reap --yes", st)
	}
	if st := f.Status("tf-dead-0101-000000-bbbb-gpu"); st != "RUNNING" {
		t.Errorf("reap --yes touched the recorded instance: %s", st)
	}

	if st := f.Status("tf-busy-0101-000000-dddd-gpu"); st != "RUNNING" {
		t.Errorf("reap --yes touched the live run's instance: %s", st)
	}
	if st := f.Status("tf-theirs-0101-000000-ffff-gpu"); st != "RUNNING" {
		t.Errorf("reap --yes touched a teammate's instance: %s", st)
	}
	for _, c := range f.CallsOf("delete", "tf-theirs-0101-000000-ffff-gpu") {
		t.Errorf("reap ran brev %s", strings.Join(c.Args, " "))
	}
	code, out, errOut = applyCLI(t, "destroy", "dead-0101-000000-bbbb", "--yes")
	if code != exitOK || !strings.Contains(out, "instance gpu: removed") {
		t.Fatalf("destroy exit %d\n%s%s", code, out, errOut)
	}
	brevDelete(t, f, "tf-busy-0101-000000-dddd-gpu")
	brevDelete(t, f, "tf-theirs-0101-000000-ffff-gpu")
	f.CheckNoneAlive(t)

	// A dead run whose instance, with a job on it, was deleted meanwhile:
	// destroy counts both gone without trying to reach them.
	recordBrevInstance(t, dir, "vanished-0101-000000-9999", "", "gpu", "tf-vanished-0101-000000-9999-gpu", true)
	func() {
		store, err := state.Open(filepath.Join(dir, ".taoflow"))
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		if _, err := store.RecordIntent(context.Background(), state.Resource{RunID: "vanished-0101-000000-9999", Kind: state.KindJob,
			Name: "tf-vanished-0101-000000-9999-train", Instance: "gpu", Platform: "brev",
			Data: map[string]string{"instance_ref": "tf-vanished-0101-000000-9999-gpu"}}); err != nil {
			t.Fatal(err)
		}
	}()
	deletes := len(f.CallsOf("delete", ""))
	code, out, errOut = applyCLI(t, "destroy", "vanished-0101-000000-9999", "--yes")
	if code != exitOK || !strings.Contains(out, "instance gpu: removed (already gone") || !strings.Contains(out, "job tf-vanished-0101-000000-9999-train: removed (already gone") ||
		strings.Contains(out+errOut, "stopping jobs on") {
		t.Errorf("destroy of a run whose instance is gone: exit %d\n%s%s", code, out, errOut)
	}
	if n := len(f.CallsOf("delete", "")); n != deletes {
		t.Errorf("destroy ran brev delete for an instance brev does not list")
	}
	if st := f.Status("my-box"); st != "RUNNING" {
		t.Errorf("the existing instance is %s", st)
	}
	for _, c := range f.Calls() {
		if c.StdinPiped {
			t.Errorf("brev %s ran with a piped stdin", strings.Join(c.Args, " "))
		}
	}
}

const brevUploadFails = `taoflow: 1
name: brev-upfail
platform: brev
instances:
  gpu: {create: {type: g5.xlarge}}
steps:
  - id: train
    uses: run
    with: {command: "mkdir -p ~/results && echo weights > ~/results/model.pth"}
  - id: wait
    uses: wait
    needs: [train]
    with: {interval: 100ms}
  - id: upload
    uses: upload-s3
    needs: [wait]
    with: {from: "~/results", to: "file:///proc/taoflow-cannot-write-here"}
finally:
  - id: teardown
    uses: delete
`

// TestBrevUploadFailureStops: when the results upload fails, the instance
// that holds them is stopped (disk kept, GPU billing stops), not deleted;
// it still exists and bills for its disk, so the run ends with exit 3 and
// says so with the command that removes it; the state records it as
// stopped (not as a failed delete), and destroy removes it later.
func TestBrevUploadFailureStops(t *testing.T) {
	f, dir := brevEnv(t, brevtest.Options{})
	writePlan(t, "upfail.yaml", brevUploadFails)
	code, out, errOut := applyCLI(t, "apply", "--yes", "--output", "plain", "upfail.yaml")
	if code != exitTeardown {
		t.Fatalf("apply exit %d, want 3\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !regexp.MustCompile(`instance gpu was stopped, not deleted: a results upload or fetch on it failed .*; it bills for its disk until removed with: taoflow destroy brev-upfail-\S+ --yes`).MatchString(errOut) {
		t.Errorf("the run does not say the instance was stopped, and how to remove it:\n%s", errOut)
	}
	if !strings.Contains(out, "instance gpu: stopped instead of deleted") || strings.Contains(out, "instance gpu: deleted") {
		t.Errorf("the view does not say what became of the instance:\n%s", out)
	}
	func() {
		store, err := state.OpenReadOnly(filepath.Join(dir, ".taoflow"))
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		r, err := store.LatestRun(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		res, err := store.Resources(context.Background(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range res {
			if x.Kind == state.KindInstance && x.State != state.ResourceStopped {
				t.Errorf("the instance is recorded %s (%s); want %s", x.State, x.Message, state.ResourceStopped)
			}
		}
	}()
	var name string
	for _, in := range f.Instances() {
		if strings.HasSuffix(in.Name, "-gpu") {
			name = in.Name
			if in.Status != "STOPPING" && in.Status != "STOPPED" {
				t.Errorf("the instance holding the results is %s, want stopped", in.Status)
			}
			if b, err := os.ReadFile(filepath.Join(in.Sandbox, "results", "model.pth")); err != nil || string(b) != "weights\n" {
				t.Errorf("the results on the stopped instance: %q, %v", b, err)
			}
		}
	}
	for _, c := range f.Calls() {
		if c.Command == "delete" {
			t.Errorf("the instance was deleted although its upload failed: brev %s", strings.Join(c.Args, " "))
		}
	}
	code, out, errOut = applyCLI(t, "status", "latest")
	if code != exitOK || !strings.Contains(out, name) && !strings.Contains(out, "instance gpu") {
		t.Errorf("status does not show the stopped instance (exit %d):\n%s%s", code, out, errOut)
	}
	code, out, errOut = applyCLI(t, "destroy", "latest", "--yes")
	if code != exitOK || !strings.Contains(out, "instance gpu: removed") {
		t.Fatalf("destroy exit %d\n%s%s", code, out, errOut)
	}
	f.CheckNoneAlive(t)
}

const brevResumePlan = `taoflow: 1
name: brev-resume
platform: brev
instances:
  gpu: {create: {type: g5.xlarge}}
steps:
  - id: train
    uses: run
    with: {command: "echo ran >> ~/launches"}
  - id: wait
    uses: wait
    needs: [train]
    with: {interval: 100ms}
finally:
  - id: teardown
    uses: delete
`

// TestBrevResumeUsesInstance: resuming a run whose apply died after it
// created its brev instance uses that instance again (no second create),
// runs what is left on it, and deletes it at the end.
func TestBrevResumeUsesInstance(t *testing.T) {
	for _, created := range []bool{true, false} {
		t.Run(fmt.Sprintf("created=%t", created), func(t *testing.T) {
			f, dir := brevEnv(t, brevtest.Options{})
			writePlan(t, "resume.yaml", brevResumePlan)
			// What a dead apply left: the run, and its instance, created
			// (or made by brev while the apply died during brev create).
			const run = "brev-resume-0101-000000-cccc"
			name := "tf-" + run + "-gpu"
			brevCreate(t, f, name)
			sum := sha256.Sum256([]byte(brevResumePlan))
			recordBrevInstance(t, dir, run, hex.EncodeToString(sum[:]), "gpu", name, created)

			code, out, errOut := applyCLI(t, "apply", "--yes", "--output", "plain", "resume.yaml", "--resume", run)
			if code != exitOK {
				t.Fatalf("apply --resume exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			creates := 0
			for _, c := range f.Calls() {
				if c.Command == "create" {
					creates++
				}
			}
			if creates != 1 {
				t.Errorf("%d brev creates, want only the first attempt's", creates)
			}
			for _, in := range f.Instances() {
				if in.Name == name {
					if b, err := os.ReadFile(filepath.Join(in.Sandbox, "launches")); err != nil || string(b) != "ran\n" {
						t.Errorf("the job on the resumed instance: %q, %v", b, err)
					}
				}
			}
			f.CheckNoneAlive(t)
		})
	}
}

// TestBrevCLIChecked: without a brev CLI, or with one too old, apply stops
// before it starts anything (exit 2) and says what to do.
func TestBrevCLIChecked(t *testing.T) {
	f, _ := brevEnv(t, brevtest.Options{Version: "v0.6.319"})
	writePlan(t, "p.yaml", brevResumePlan)
	code, out, errOut := applyCLI(t, "apply", "--yes", "--output", "plain", "p.yaml")
	if code != exitUsage || !strings.Contains(errOut, "v0.6.319") || !strings.Contains(errOut, "v0.6.320") {
		t.Errorf("an old brev: exit %d\n%s%s", code, out, errOut)
	}
	t.Setenv("PATH", "/nonexistent")
	code, out, errOut = applyCLI(t, "apply", "--yes", "--output", "plain", "p.yaml")
	if code != exitUsage || !strings.Contains(errOut, "brev") {
		t.Errorf("no brev on PATH: exit %d\n%s%s", code, out, errOut)
	}
	for _, c := range f.Calls() {
		if c.Command != "version" {
			t.Errorf("brev %s ran although the CLI check failed", strings.Join(c.Args, " "))
		}
	}
	if _, err := os.Stat(".taoflow"); err == nil {
		t.Error("a run was recorded although nothing could start")
	}
}

// TestBrevCreateFails: an instance that ends in FAILURE is deleted by the
// platform and its nodes fail, but nothing is left, so the run ends with
// exit 1 (not 3), and its name was recorded before brev create ran.
func TestBrevCreateFails(t *testing.T) {
	f, dir := brevEnv(t, brevtest.Options{})
	writePlan(t, "p.yaml", brevResumePlan)
	f.Inject(brevtest.Fault{Kind: "create-failure"})
	code, out, errOut := applyCLI(t, "apply", "--yes", "--output", "plain", "p.yaml")
	if code != exitFailed {
		t.Fatalf("apply exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(out+errOut, "FAILURE") {
		t.Errorf("the failure is not reported:\n%s%s", out, errOut)
	}
	f.CheckNoneAlive(t)
	store, err := state.OpenReadOnly(filepath.Join(dir, ".taoflow"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	r, err := store.LatestRun(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	res, err := store.Resources(context.Background(), r.ID)
	if err != nil || len(res) != 1 || res[0].Data["ref"] != "tf-"+r.ID+"-gpu" {
		t.Errorf("recorded resources %+v, %v; want the instance with its name", res, err)
	}
	if n := len(f.CallsOf("delete", "")); n != 1 {
		t.Errorf("%d brev deletes; want one (an instance DELETING is being deleted)", n)
	}
}

// TestBrevOrphanKeepsCause: brev create fails with "unexpected EOF" after
// the API made the instance (an orphan): the run says why the create
// failed, deletes the orphan once, and nothing is left (exit 1).
func TestBrevOrphanKeepsCause(t *testing.T) {
	f, _ := brevEnv(t, brevtest.Options{})
	// A fallback chain: brev goes on to the next type, which the orphan's
	// name makes a duplicate, and prints more after the cause.
	writePlan(t, "p.yaml", strings.Replace(brevResumePlan, "type: g5.xlarge", `type: "g5.xlarge,g5.2xlarge"`, 1))
	f.Inject(brevtest.Fault{Kind: "create-eof"})
	code, out, errOut := applyCLI(t, "apply", "--yes", "--output", "plain", "p.yaml")
	if code != exitFailed {
		t.Fatalf("apply exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "unexpected EOF") || !strings.Contains(out, "brev made it anyway (an orphan") {
		t.Errorf("the orphaned create's cause is not reported:\n%s", out)
	}
	if n := len(f.CallsOf("delete", "")); n != 1 {
		t.Errorf("%d brev deletes; want one (an instance DELETING is being deleted)", n)
	}
	f.CheckNoneAlive(t)
}

// TestBrevSweepExample applies examples/plans/sweep-brev.yaml as it is, with
// --var pointing it at what runs here: three instances created through the
// fake brev (reached over a real sshd), NGC login to a real registry that
// takes $oauthtoken, the fake TAO trainer pulled from it and run in
// containers, results uploaded to a real S3 gateway. Every cell's results
// and manifest reach S3; every instance is created and deleted; no
// container of the run is left.
func TestBrevSweepExample(t *testing.T) {
	example, err := filepath.Abs("../../examples/plans/sweep-brev.yaml") // before brevEnv changes directory
	if err != nil {
		t.Fatal(err)
	}
	reg := testrig.StartRegistryUser(t, "$oauthtoken")
	image := reg.Push(t, testrig.BuildTrainerImage(t, ""))
	s3 := testrig.StartS3(t)
	bucket := testrig.UniqueName(t)
	s3.CreateBucket(t, bucket)
	f, dir := brevEnv(t, brevtest.Options{})
	t.Setenv("NGC_KEY", reg.Password)
	t.Setenv("AWS_ACCESS_KEY_ID", s3.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3.SecretKey)
	// A copy in the work directory: the plan's fetch writes next to it.
	body, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	example = filepath.Join(dir, "sweep-brev.yaml")
	writePlan(t, example, string(body))
	code, out, errOut := applyCLI(t, "apply", "--yes", "--output", "plain", example,
		"--var", "image="+image, "--var", "registry="+reg.Addr, "--var", "bucket=s3://"+bucket+"/sweep",
		"--var", "s3_endpoint="+s3.Endpoint, "--var", "min_gpus=0", "--var", "gpus=0", "--var", "poll=200ms")
	if code != exitOK {
		t.Fatalf("apply exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	objects := s3.List(t, bucket, "sweep/")
	manifests := 0
	for k := range objects {
		if strings.HasSuffix(k, "/taoflow-run.json") {
			manifests++
		}
	}
	if manifests != 6 {
		t.Errorf("%d manifests in S3, want one per cell (6): %v", manifests, objects)
	}
	if fetched, _ := filepath.Glob(filepath.Join(dir, "results", "*", "*", "taoflow-run.json")); len(fetched) != 6 {
		t.Errorf("%d cells fetched back next to the plan, want 6: %v", len(fetched), fetched)
	}
	creates, deletes := 0, 0
	for _, c := range f.Calls() {
		switch c.Command {
		case "create":
			creates++
		case "delete":
			deletes++
		}
		if c.Concurrent || c.StdinPiped {
			t.Errorf("brev %s: concurrent refresh %t, piped stdin %t", strings.Join(c.Args, " "), c.Concurrent, c.StdinPiped)
		}
	}
	if creates != 3 || deletes != 3 {
		t.Errorf("%d creates, %d deletes; want 3 and 3", creates, deletes)
	}
	f.CheckNoneAlive(t)
	left, err := testrig.Docker(t, "ps", "-a", "--filter", "label=taoflow.run", "--filter", "name=tf-changenet-sweep-", "--format", "{{.Names}}")
	if err != nil || left != "" {
		t.Errorf("containers left: %q, %v", left, err)
	}
}

const brevBehindBack = `taoflow: 1
name: brev-behind
platform: brev
instances:
  gone: {create: {type: g5.xlarge}}
  stopped: {create: {type: g5.xlarge}}
  cut: {create: {type: g5.xlarge}}
steps:
  - id: train
    uses: run
    on: [gone, stopped, cut]
    with: {command: "touch ~/started; while [ ! -e ~/go ] && [ -d ~ ]; do sleep 0.05; done"}
  - id: wait
    uses: wait
    needs: [train]
    with: {interval: 100ms}
finally:
  - id: teardown
    uses: delete
`

// TestBrevTeardownBehindBack: while the jobs run, one instance is deleted
// behind taoflow's back, one stopped (a colleague's brev stop), and one
// cut off (ls says RUNNING, ssh is refused: a hung VM, a partition); then
// the run is interrupted. Teardown deletes the stopped and the cut-off
// instance although their jobs cannot be stopped (deleting stops them),
// counts the deleted one as gone, does not try to stop jobs on the gone
// and stopped ones, and the run ends with exit 130, not 3: nothing is
// left.
func TestBrevTeardownBehindBack(t *testing.T) {
	f, _ := brevEnv(t, brevtest.Options{})
	writePlan(t, "behind.yaml", brevBehindBack)
	type result struct {
		code        int
		out, errOut string
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan result, 1)
	go func() {
		var out, errOut bytes.Buffer
		code := exitCode(run(ctx, []string{"apply", "--yes", "--output", "plain", "behind.yaml"}, stdio{in: strings.NewReader(""), out: &out, err: &errOut}), &errOut)
		done <- result{code, out.String(), errOut.String()}
	}()
	// Once every job runs, take the instances away, then interrupt.
	names := map[string]string{}
	var sandboxes []string
	if !testrig.Within(2*time.Minute, func() bool {
		names, sandboxes = map[string]string{}, nil
		for _, in := range f.Instances() {
			if _, err := os.Stat(filepath.Join(in.Sandbox, "started")); err == nil {
				names[in.Name[strings.LastIndex(in.Name, "-")+1:]] = in.Name
				sandboxes = append(sandboxes, in.Sandbox)
			}
		}
		return len(sandboxes) >= 3
	}) {
		t.Fatalf("the three jobs did not start: %+v", f.Instances())
	}
	f.DeleteBehindBack(names["gone"])
	f.StopBehindBack(names["stopped"])
	f.CutOff(names["cut"])
	cancel()
	r := <-done
	// The job on the cut-off instance ran on; end it.
	for _, sb := range sandboxes {
		_ = os.WriteFile(filepath.Join(sb, "go"), nil, 0o600)
	}
	if r.code != exitInterrupted {
		t.Fatalf("apply exit %d, want 130 (interrupted; nothing is left)\nstdout:\n%s\nstderr:\n%s", r.code, r.out, r.errOut)
	}
	if strings.Contains(r.errOut, "may still exist") {
		t.Errorf("the run says something may still exist:\n%s", r.errOut)
	}
	for _, want := range []string{
		"teardown@gone | no job of this run can be running on gone: none to stop",
		"teardown@stopped | no job of this run can be running on stopped: none to stop",
		"instance gone: no longer exists",
		"instance stopped: deleted",
		"teardown@cut | could not stop the jobs on cut",
		"instance cut: deleted",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("no %q in the output:\n%s", want, r.out)
		}
	}
	for _, inst := range []string{"stopped", "cut"} {
		if st := f.Status(names[inst]); st != "DELETING" && st != "" {
			t.Errorf("instance %s (%s) is %s after the run", inst, names[inst], st)
		}
	}
	f.CheckNoneAlive(t)
}

// TestBrevNotLoggedIn: with brev logged out (its prompt on stdout, exit
// 1), or printing a banner before ls's JSON, apply stops before anything
// starts: exit 2, saying what to do, no create, no run recorded; destroy
// of a recorded run says so at once too.
func TestBrevNotLoggedIn(t *testing.T) {
	f, dir := brevEnv(t, brevtest.Options{LoggedOut: true})
	writePlan(t, "p.yaml", brevResumePlan)
	code, out, errOut := applyCLI(t, "apply", "--yes", "--output", "plain", "p.yaml")
	if code != exitUsage || !strings.Contains(errOut, "brev is not logged in: run `brev login`") {
		t.Errorf("a logged-out brev: exit %d\n%s%s", code, out, errOut)
	}
	if strings.Contains(errOut, "may still exist") {
		t.Errorf("a logged-out brev: the run says something may still exist:\n%s", errOut)
	}
	if _, err := os.Stat(".taoflow"); err == nil {
		t.Error("a run was recorded although nothing could start")
	}

	f.SetLoggedOut(false)
	brevCreateRecorded(t, f, "tf-dead-0101-000000-bbbb-gpu")
	recordBrevInstance(t, dir, "dead-0101-000000-bbbb", "", "gpu", "tf-dead-0101-000000-bbbb-gpu", true)
	f.SetLoggedOut(true)
	code, out, errOut = applyCLI(t, "destroy", "dead-0101-000000-bbbb", "--yes")
	if code == exitOK || !strings.Contains(out+errOut, "brev is not logged in: run `brev login`") {
		t.Errorf("destroy with a logged-out brev: exit %d\n%s%s", code, out, errOut)
	}
	f.SetLoggedOut(false)
	brevDelete(t, f, "tf-dead-0101-000000-bbbb-gpu")

	g := brevtest.Start(t, brevtest.Options{Banner: "A new version of brev has been released! v0.6.400"})
	for _, kv := range g.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	t.Chdir(t.TempDir())
	writePlan(t, "p.yaml", brevResumePlan)
	code, out, errOut = applyCLI(t, "apply", "--yes", "--output", "plain", "p.yaml")
	if code != exitUsage || !strings.Contains(errOut, "cannot read the output of `brev ls --json`") || !strings.Contains(errOut, "A new version") {
		t.Errorf("a banner before ls's JSON: exit %d\n%s%s", code, out, errOut)
	}
	for _, fk := range []*brevtest.Fake{f, g} {
		for _, c := range fk.CallsOf("create", "") {
			if !slices.Contains(c.Names, "tf-dead-0101-000000-bbbb-gpu") { // the test's own
				t.Errorf("brev %s ran although brev could not be used", strings.Join(c.Args, " "))
			}
		}
	}
}

const brevExecUpload = `taoflow: 1
name: brev-exec-up
platform: {kind: brev, transport: exec, instance_env: [AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY]}
secrets: [AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY]
vars: {files: "", bucket: "", endpoint: "", region: "", creds: ""}
instances:
  gpu: {create: {type: g5.xlarge}}
steps:
  - id: train
    uses: run
    with:
      command: |
        mkdir -p ~/results ~/.aws
        echo weights > ~/results/model.pth
        cp ${{ vars.creds }} ~/.aws/credentials
  - id: wait
    uses: wait
    needs: [train]
    with: {interval: 100ms}
  - id: to-files
    uses: upload-s3
    needs: [wait]
    with: {from: "~/results", to: "${{ vars.files }}"}
  - id: to-s3
    uses: upload-s3
    needs: [wait]
    with: {from: "~/results", to: "${{ vars.bucket }}", endpoint_url: "${{ vars.endpoint }}", region: "${{ vars.region }}"}
finally:
  - id: teardown
    uses: delete
`

// TestBrevExecUpload: upload-s3 over transport: exec, to file:// and to a
// real S3 server. brev exec cannot carry stdin, and nothing that is not a
// secret travels there (the manifest goes inside the script): both
// uploads succeed with their manifest, and the instance is deleted. The
// credentials are in the instance's environment (its ~/.aws, standing for
// Brev secrets), as instance_env says.
func TestBrevExecUpload(t *testing.T) {
	s3 := testrig.StartS3(t)
	bucket := testrig.UniqueName(t)
	s3.CreateBucket(t, bucket)
	f, dir := brevEnv(t, brevtest.Options{})
	t.Setenv("AWS_ACCESS_KEY_ID", s3.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3.SecretKey)
	writePlan(t, "up.yaml", brevExecUpload)
	// The keys reach the instance as a file its job copies into ~/.aws, not
	// as --var values: a value that looks like a secret is refused there
	// (docs/security.md promise 1), and the random test key sometimes does.
	creds := filepath.Join(dir, "aws-credentials")
	if err := os.WriteFile(creds, []byte("[default]\naws_access_key_id = "+s3.AccessKey+"\naws_secret_access_key = "+s3.SecretKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := applyCLI(t, "apply", "--yes", "--output", "plain", "up.yaml",
		"--var", "files=file://"+dir+"/results", "--var", "bucket=s3://"+bucket+"/run",
		"--var", "endpoint="+s3.Endpoint, "--var", "region="+s3.Region, "--var", "creds="+creds)
	if code != exitOK {
		t.Fatalf("apply exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "results", "model.pth")); err != nil || string(b) != "weights\n" {
		t.Errorf("file:// results: %q, %v", b, err)
	}
	var m struct {
		Run string `json:"run_id"`
	}
	if b, err := os.ReadFile(filepath.Join(dir, "results", "taoflow-run.json")); err != nil || json.Unmarshal(b, &m) != nil || !strings.HasPrefix(m.Run, "brev-exec-up-") {
		t.Errorf("file:// manifest: %q, %v", b, err)
	}
	objects := s3.List(t, bucket, "run/")
	if _, ok := objects["run/model.pth"]; !ok {
		t.Errorf("s3:// results: %v", objects)
	}
	if _, ok := objects["run/taoflow-run.json"]; !ok {
		t.Errorf("s3:// manifest: %v", objects)
	}
	for _, c := range f.CallsOf("exec", "") {
		if c.StdinPiped {
			t.Errorf("brev exec ran with a piped stdin: %s", strings.Join(c.Args, " "))
		}
	}
	f.CheckNoneAlive(t)
}

const brevKeepExisting = `taoflow: 1
name: brev-keep
platform: brev
instances:
  kept: {create: {type: g5.xlarge}, keep: true}
  box: {existing: my-box}
steps:
  - id: train
    uses: run
    with: {command: "echo ran > ~/ran"}
  - id: wait
    uses: wait
    needs: [train]
    with: {interval: 100ms}
finally:
  - id: teardown
    uses: delete
`

// TestBrevReleaseSaysWhatHappened: an instance kept by keep: true and an
// existing one the run only used are not "deleted": the view says kept and
// left as it is, the state records the kept one as kept (not as a failed
// delete), and nothing of it is exit 3. destroy then removes the kept one.
func TestBrevReleaseSaysWhatHappened(t *testing.T) {
	f, dir := brevEnv(t, brevtest.Options{})
	f.AddExisting("my-box")
	writePlan(t, "keep.yaml", brevKeepExisting)
	code, out, errOut := applyCLI(t, "apply", "--yes", "--output", "plain", "keep.yaml")
	if code != exitOK {
		t.Fatalf("apply exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"instance kept: kept (keep: true)", "instance box: left as it is (not created by this run)"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the output:\n%s", want, out)
		}
	}
	for _, bad := range []string{"instance kept: deleted", "instance box: deleted"} {
		if strings.Contains(out, bad) {
			t.Errorf("%q in the output:\n%s", bad, out)
		}
	}
	if !strings.Contains(errOut, "taoflow: instance kept (tf-brev-keep-") || strings.Contains(errOut, "may still exist") {
		t.Errorf("the end of the run does not say what was kept (or says something may still exist):\n%s", errOut)
	}
	func() {
		store, err := state.OpenReadOnly(filepath.Join(dir, ".taoflow"))
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		r, err := store.LatestRun(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		res, err := store.Resources(context.Background(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		kinds := 0
		for _, x := range res {
			if x.Kind == state.KindInstance {
				kinds++
				if x.Instance != "kept" || x.State != state.ResourceKept {
					t.Errorf("instance %s recorded %s (%s); want only kept, as %s", x.Instance, x.State, x.Message, state.ResourceKept)
				}
			}
		}
		if kinds != 1 {
			t.Errorf("%d instances recorded; want the kept one", kinds)
		}
	}()
	if st := f.Status("my-box"); st != "RUNNING" {
		t.Errorf("the existing instance is %s", st)
	}
	code, out, errOut = applyCLI(t, "destroy", "latest", "--yes")
	if code != exitOK || !strings.Contains(out, "instance kept: removed") {
		t.Fatalf("destroy exit %d\n%s%s", code, out, errOut)
	}
	f.CheckNoneAlive(t)
}

const sshNeverReached = `taoflow: 1
name: ssh-dead
platform: {kind: ssh, ssh_config: ssh_config, connect_timeout: 2s}
instances:
  a: {host: dead}
steps:
  - id: preflight
    uses: preflight
    with: {interval: 100ms, ready_timeout: 1s}
  - id: train
    uses: run
    needs: [preflight]
    with: {command: "true"}
finally:
  - id: teardown
    uses: delete
`

// TestNeverReachedHostNotExit3: an ssh host that never answered (nothing
// listens on its port) fails the run, but taoflow created nothing there
// and launched no job: no exit 3, no "may still exist (and bill)", and
// teardown does not try to reach it to stop jobs that never started.
func TestNeverReachedHostNotExit3(t *testing.T) {
	t.Chdir(t.TempDir())
	port := testrig.FreePort(t)
	writePlan(t, "ssh_config", fmt.Sprintf("Host dead\n\tHostName 127.0.0.1\n\tPort %d\n\tUser nobody\n", port))
	writePlan(t, "dead.yaml", sshNeverReached)
	code, out, errOut := applyCLI(t, "apply", "--yes", "--output", "plain", "dead.yaml")
	if code != exitFailed {
		t.Fatalf("apply exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if strings.Contains(errOut, "may still exist") || strings.Contains(errOut, "taoflow destroy") {
		t.Errorf("the run says something may still exist:\n%s", errOut)
	}
	if !strings.Contains(out, "teardown@a | no job of this run can be running on a: none to stop") || strings.Contains(out, "stopping this run's jobs") {
		t.Errorf("teardown tried to stop jobs that never started:\n%s", out)
	}
	if !strings.Contains(out, "instance a: left as it is") || strings.Contains(out, "instance a: deleted") {
		t.Errorf("the view does not say the host was left as it is:\n%s", out)
	}
}

const brevHung = `taoflow: 1
name: brev-hung
platform: brev
vars: {timeout: 1h}
instances:
  gpu: {create: {type: g5.xlarge}, keep: true}
  box: {create: {type: g5.xlarge}}
steps:
  - id: train
    uses: run
    on: [gpu, box]
    with: {command: "touch ~/started; while [ ! -e ~/go ] && [ -d ~ ]; do sleep 0.1; done"}
  - id: wait
    uses: wait
    needs: [train]
    with: {interval: 100ms, timeout: "${{ vars.timeout }}"}
finally:
  - id: teardown
    uses: delete
`

// TestBrevHungInstance: an instance that brev ls shows RUNNING and that
// accepts ssh, but whose sessions never answer (issue 27 item 1). The
// wait times out at its timeout; Ctrl-C's teardown stops the jobs within
// TAOFLOW_STOP_TIMEOUT and deletes the instance (far below
// --finally-timeout); destroy deletes a hung instance that a run kept.
func TestBrevHungInstance(t *testing.T) {
	f, _ := brevEnv(t, brevtest.Options{})
	t.Setenv("TAOFLOW_STOP_TIMEOUT", "1s")
	writePlan(t, "hung.yaml", brevHung)
	apply := func(ctx context.Context, hang string, onHung func(), extra ...string) (int, string, string, map[string]string) {
		type result struct {
			code        int
			out, errOut string
		}
		// Instances there before this apply (an earlier run's kept gpu,
		// with its started file) are not this run's.
		earlier := map[string]bool{}
		for _, in := range f.Instances() {
			earlier[in.Name] = true
		}
		done := make(chan result, 1)
		go func() {
			var out, errOut bytes.Buffer
			args := append([]string{"apply", "--yes", "--output", "plain", "--finally-timeout", "10m", "hung.yaml"}, extra...)
			code := exitCode(run(ctx, args, stdio{in: strings.NewReader(""), out: &out, err: &errOut}), &errOut)
			done <- result{code, out.String(), errOut.String()}
		}()
		names := map[string]string{}
		hung := false
		if !testrig.Within(2*time.Minute, func() bool {
			for _, in := range f.Instances() {
				if _, err := os.Stat(filepath.Join(in.Sandbox, "started")); err == nil && in.Status == "RUNNING" && !earlier[in.Name] {
					names[in.Name[strings.LastIndex(in.Name, "-")+1:]] = in.Name
				}
			}
			// Hang the instance as soon as its job runs: its wait's
			// timeout is already ticking, and under load the other
			// instance may start seconds later (CI once found box
			// already deleted by then).
			if n, ok := names[hang]; ok && !hung {
				f.Hang(n)
				hung = true
			}
			return len(names) == 2
		}) {
			t.Fatalf("the jobs did not start: %+v", f.Instances())
		}
		if hang == "box" {
			// Let a poll of box hang, then interrupt.
			time.Sleep(500 * time.Millisecond)
			for _, in := range f.Instances() {
				if in.Name == names["gpu"] {
					_ = os.WriteFile(filepath.Join(in.Sandbox, "go"), nil, 0o600)
				}
			}
		}
		if onHung != nil {
			onHung()
		}
		r := <-done
		return r.code, r.out, r.errOut, names
	}

	// 1. The wait's timeout fires although a poll of box never answers;
	// box is deleted all the same, and the kept gpu is left.
	code, out, errOut, names := apply(t.Context(), "box", nil, "--var", "timeout=3s")
	if code != exitFailed {
		t.Fatalf("apply exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"wait@box on box: failed: timed out: job tf-brev-hung-",
		"teardown@box | could not stop the jobs on box (timed out after 1s); deleting it",
		"instance box: deleted",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the output:\n%s", want, out)
		}
	}
	if st := f.Status(names["box"]); st != "DELETING" && st != "" {
		t.Errorf("the hung instance is %s after the run", st)
	}

	// 2. Ctrl-C (the apply's context cancelled, as its SIGINT handler
	// does) while a poll of box hangs and the wait's timeout is an hour
	// away: the teardown's job stop is bounded by TAOFLOW_STOP_TIMEOUT and
	// box is deleted, far below --finally-timeout (10m); the kept gpu is
	// left.
	keptFirst := names["gpu"]
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	began := time.Now()
	code, out, errOut, names2 := apply(ctx, "box", func() {
		time.Sleep(time.Second) // a poll of box is hanging by now
		cancel(errors.New("interrupted by SIGINT (Ctrl-C)"))
	}, "--var", "timeout=1h")
	took := time.Since(began)
	if code == exitOK {
		t.Fatalf("interrupted apply exit 0\nstdout:\n%s\nstderr:\n%s", out, errOut)
	}
	if !strings.Contains(out, "instance box: deleted") {
		t.Errorf("Ctrl-C did not delete the hung box (after %s):\nstdout:\n%s\nstderr:\n%s", took, out, errOut)
	}
	if st := f.Status(names2["box"]); st != "DELETING" && st != "" {
		t.Errorf("the hung instance is %s after Ctrl-C", st)
	}
	if took > 5*time.Minute {
		t.Errorf("Ctrl-C's teardown took %s, not bounded by TAOFLOW_STOP_TIMEOUT", took)
	}
	code, out, errOut = applyCLI(t, "destroy", names2["gpu"][len("tf-"):strings.LastIndex(names2["gpu"], "-")], "--yes")
	if code != exitOK {
		t.Errorf("destroy of the second run's kept gpu: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	names["gpu"] = keptFirst

	// 3. Destroy removes the first run's kept instance, hung now too.
	f.Hang(names["gpu"])
	code, out, errOut = applyCLI(t, "destroy", names["gpu"][len("tf-"):strings.LastIndex(names["gpu"], "-")], "--yes")
	if code != exitOK || !strings.Contains(out, "could not stop the jobs (timed out after 1s); deleting it") || !strings.Contains(out, "instance gpu: removed") {
		t.Errorf("destroy exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if st := f.Status(names["gpu"]); st != "DELETING" && st != "" {
		t.Errorf("the kept hung instance is %s after destroy", st)
	}
	f.CheckNoneAlive(t)
}

const brevVanish = `taoflow: 1
name: brev-vanish
platform: brev
instances:
  gone: {create: {type: g5.xlarge}}
  stopped: {create: {type: g5.xlarge}}
steps:
  - id: train
    uses: run
    on: [gone, stopped]
    with: {command: "touch ~/started; while [ ! -e ~/go ] && [ -d ~ ]; do sleep 0.05; done"}
  - id: wait
    uses: wait
    needs: [train]
    with: {interval: 100ms, timeout: 1h}
finally:
  - id: teardown
    uses: delete
`

// TestBrevVanishedWaitFailsAtOnce: an instance deleted or stopped behind
// taoflow's back fails its wait at the first failed poll, with the cause
// brev ls gives, instead of after ten failed polls (issue 27 item 3).
func TestBrevVanishedWaitFailsAtOnce(t *testing.T) {
	f, _ := brevEnv(t, brevtest.Options{})
	writePlan(t, "vanish.yaml", brevVanish)
	done := make(chan [3]string, 1)
	go func() {
		var out, errOut bytes.Buffer
		code := exitCode(run(t.Context(), []string{"apply", "--yes", "--output", "plain", "vanish.yaml"}, stdio{in: strings.NewReader(""), out: &out, err: &errOut}), &errOut)
		done <- [3]string{fmt.Sprint(code), out.String(), errOut.String()}
	}()
	names := map[string]string{}
	if !testrig.Within(2*time.Minute, func() bool {
		for _, in := range f.Instances() {
			if _, err := os.Stat(filepath.Join(in.Sandbox, "started")); err == nil {
				names[in.Name[strings.LastIndex(in.Name, "-")+1:]] = in.Name
			}
		}
		return len(names) == 2
	}) {
		t.Fatalf("the jobs did not start: %+v", f.Instances())
	}
	f.DeleteBehindBack(names["gone"])
	f.StopBehindBack(names["stopped"])
	r := <-done
	code, out, errOut := r[0], r[1], r[2]
	if code != fmt.Sprint(exitFailed) {
		t.Fatalf("apply exit %s, want 1\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"wait@gone on gone: failed: not reachable: lost contact with the jobs: brev instance gone (" + names["gone"] + ") is not in `brev ls`",
		"wait@stopped on stopped: failed: not reachable: lost contact with the jobs: brev instance stopped (" + names["stopped"] + ") is STOPPED",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the output:\n%s", want, out)
		}
	}
	if strings.Contains(out, "poll failed (3 of") {
		t.Errorf("a wait polled a vanished instance more than twice:\n%s", out)
	}
	f.CheckNoneAlive(t)

	// The billing figure of each ends when its wait first saw it gone
	// or stopped, not when teardown recorded it deleted later.
	store, err := state.OpenReadOnly(".taoflow")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	latest, err := store.LatestRun(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := store.Nodes(t.Context(), latest.ID)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, n := range nodes {
		var gone map[string]string
		if json.Unmarshal([]byte(n.Facts[steps.RecordGoneAt]), &gone) == nil {
			maps.Copy(seen, gone)
		}
	}
	cost, err := pricing.Costs(t.Context(), store, latest.ID, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, ic := range cost.Instances {
		at, err := time.Parse(time.RFC3339Nano, seen[ic.Instance])
		if err != nil {
			t.Errorf("no wait recorded when instance %s was seen gone: %v (facts %v)", ic.Instance, err, seen)
			continue
		}
		if ic.BilledUntil == nil || !ic.BilledUntil.Equal(at) {
			t.Errorf("instance %s billed until %v, want %v (when its wait saw it gone)", ic.Instance, ic.BilledUntil, at)
		}
	}
	if len(cost.Instances) != 2 {
		t.Errorf("cost lists %d instances, want 2", len(cost.Instances))
	}
}

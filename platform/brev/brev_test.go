package brev

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taoflow/taoflow/internal/testrig"
	"github.com/taoflow/taoflow/platform"
	"github.com/taoflow/taoflow/platform/brev/brevtest"
	"github.com/taoflow/taoflow/platform/platformtest"
	"github.com/taoflow/taoflow/platform/ssh/sshtest"
)

// runSeq makes run ids unique within the test process.
var runSeq atomic.Int64

// newBrev returns a Brev driving fake f, with short waits, closed when the
// test ends; the test then fails if an ssh master of its run survived
// Close, or if any brev call was made with a piped stdin or a name not
// behind "--".
func newBrev(t *testing.T, f *brevtest.Fake, cfg Config) (*Brev, string) {
	t.Helper()
	run := fmt.Sprintf("t%d-%d", os.Getpid(), runSeq.Add(1))
	cfg.Binary = f.Binary
	cfg.Env = f.Env()
	cfg.Home = f.Home
	cfg.Run = run
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 20 * time.Millisecond
	}
	if cfg.CreateTimeout == 0 {
		cfg.CreateTimeout = 60 * time.Second
	}
	if cfg.DeleteTimeout == 0 {
		cfg.DeleteTimeout = 20 * time.Second
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = 30 * time.Second
	}
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if left := sshMasters(run); len(left) > 0 {
			t.Errorf("ssh processes %v of run %s survived Close", left, run)
		}
		checkCalls(t, f)
	})
	return b, run
}

// sshMasters returns the ssh processes whose command line names the
// default control directory of run (/tmp/tf-<hash of run>-…).
func sshMasters(run string) []int {
	sum := sha256.Sum256([]byte(run))
	return sshtest.SSHProcesses("/tmp/tf-" + hex.EncodeToString(sum[:3]) + "-")
}

// createGPU creates instance "gpu" of run, and deletes it when the test
// ends, checking then that nothing is left alive.
func createGPU(t *testing.T, b *Brev, f *brevtest.Fake, run string) platform.Instance {
	t.Helper()
	ctx := context.Background()
	inst, err := b.Create(ctx, run, platform.Spec{Name: "gpu", Type: "g5.xlarge"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Delete(ctx, inst); err != nil {
			t.Error(err)
		}
		f.CheckNoneAlive(t)
	})
	return inst
}

// checkCalls fails t for any brev call made with a piped stdin, or with an
// instance name that is not behind "--".
func checkCalls(t *testing.T, f *brevtest.Fake) {
	t.Helper()
	for _, c := range f.Calls() {
		if c.StdinPiped {
			t.Errorf("brev %q ran with a piped stdin", c.Args)
		}
		if len(c.Names) == 0 {
			continue
		}
		dash := slices.Index(c.Args, "--")
		name := slices.Index(c.Args, c.Names[0])
		if dash < 0 || name < dash {
			t.Errorf("brev %q: name %q is not behind --", c.Args, c.Names[0])
		}
	}
}

func sandbox(t *testing.T, f *brevtest.Fake, name string) string {
	t.Helper()
	for _, i := range f.Instances() {
		if i.Name == name {
			return i.Sandbox
		}
	}
	t.Fatalf("no instance %s in the fake", name)
	return ""
}

// TestCreateExecSSH creates an instance, runs commands on it over ssh and
// deletes it.
func TestCreateExecSSH(t *testing.T) {
	srv := sshtest.Start(t)
	f := brevtest.Start(t, brevtest.Options{SSH: srv, DeployPolls: 3})
	var mu sync.Mutex
	var progress []string
	b, run := newBrev(t, f, Config{Progress: func(inst, msg string) {
		mu.Lock()
		defer mu.Unlock()
		progress = append(progress, inst+": "+msg)
	}})
	ctx := context.Background()
	inst, err := b.Create(ctx, run, platform.Spec{Name: "gpu", Type: "g5.xlarge"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.CheckNoneAlive(t)
	name := InstanceName(run, "gpu")
	if inst.Name != "gpu" || inst.Ref != name || !inst.Created || inst.Attrs["type"] != "g5.xlarge" || inst.Attrs["id"] == "" {
		t.Errorf("Create = %+v; want gpu, %s, created, with type and id", inst, name)
	}
	if got := f.Status(name); got != "RUNNING" {
		t.Errorf("after Create the instance is %q", got)
	}
	cr := f.CallsOf("create", name)
	if len(cr) != 1 || !slices.Equal(cr[0].Args, []string{"create", "--type", "g5.xlarge", "--detached", "--", name}) {
		t.Errorf("create calls: %+v", cr)
	}
	if len(f.CallsOf("refresh", "")) == 0 {
		t.Error("no brev refresh")
	}
	if len(f.CallsOf("version", "")) != 1 {
		t.Errorf("brev --version ran %d times, want once", len(f.CallsOf("version", "")))
	}
	mu.Lock()
	sawDeploying := slices.ContainsFunc(progress, func(s string) bool { return strings.HasPrefix(s, "gpu: DEPLOYING (") })
	mu.Unlock()
	if !sawDeploying {
		t.Errorf("progress %q has no DEPLOYING line", progress)
	}

	res, err := b.Exec(ctx, inst, `cat; echo "err" >&2; echo ran >> "$HOME/ran"; exit 7`, strings.NewReader("from stdin\n"))
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 7 || string(res.Stdout) != "from stdin\n" || string(res.Stderr) != "err\n" {
		t.Errorf("Exec = %d, %q, %q; want 7, the stdin, err", res.ExitCode, res.Stdout, res.Stderr)
	}
	if b, err := os.ReadFile(filepath.Join(sandbox(t, f, name), "ran")); err != nil || string(b) != "ran\n" {
		t.Errorf("the instance's sandbox has ran = %q, %v; want one line", b, err)
	}
	if len(f.CallsOf("exec", "")) != 0 {
		t.Error("the ssh transport ran brev exec")
	}

	list, err := b.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(list, func(in platform.Instance) bool { return in.Ref == name })
	if i < 0 || list[i].Attrs["status"] != "RUNNING" || list[i].Attrs["id"] != inst.Attrs["id"] || list[i].Attrs["type"] != "g5.xlarge" {
		t.Errorf("List = %+v; want %s RUNNING with its id and type", list, name)
	}

	if len(sshMasters(run)) == 0 {
		t.Fatal("no ssh master connection after Exec; the checks of masters below prove nothing")
	}
	if err := b.Delete(ctx, inst); err != nil {
		t.Fatal(err)
	}
	// Delete asked the instance's master to exit while its alias still
	// resolved.
	if !testrig.Within(5*time.Second, func() bool { return len(sshMasters(run)) == 0 }) {
		t.Fatalf("ssh masters %v survived Delete", sshMasters(run))
	}
	if got := f.Status(name); got != "" && got != "DELETING" {
		t.Errorf("after Delete the instance is %s", got)
	}
	// Deleting it again: brev says "not found", which is deleted.
	if err := b.Delete(ctx, inst); err != nil {
		t.Errorf("second Delete: %v", err)
	}
}

// TestExecContract: over its ssh transport, a created instance keeps the
// Exec contract every platform keeps.
func TestExecContract(t *testing.T) {
	srv := sshtest.Start(t)
	f := brevtest.Start(t, brevtest.Options{SSH: srv})
	b, run := newBrev(t, f, Config{})
	ctx := context.Background()
	inst, err := b.Create(ctx, run, platform.Spec{Name: "gpu", Type: "g5.xlarge"})
	if err != nil {
		t.Fatal(err)
	}
	platformtest.Exec(t, func(t *testing.T) (platform.Platform, platform.Instance) { return b, inst })
	if err := b.Delete(ctx, inst); err != nil {
		t.Fatal(err)
	}
	f.CheckNoneAlive(t)
}

// TestExecTransport runs commands through brev exec: real exit codes, the
// command run once, stdout without the echoed name.
func TestExecTransport(t *testing.T) {
	srv := sshtest.Start(t)
	f := brevtest.Start(t, brevtest.Options{SSH: srv})
	b, run := newBrev(t, f, Config{Transport: TransportExec})
	ctx := context.Background()
	inst := createGPU(t, b, f, run)
	box := sandbox(t, f, inst.Ref)

	tests := map[string]struct {
		script, stdout string
		rc             int
	}{
		"exit 7":           {script: `echo ran >> "$HOME/count"; echo out; exit 7`, stdout: "out\n", rc: 7},
		"no final newline": {script: `printf 'no newline'`, stdout: "no newline", rc: 0},
		"quotes":           {script: `echo "it's" '$HOME' "a  b"`, stdout: "it's $HOME a  b\n", rc: 0},
		"empty output":     {script: `exit 0`, stdout: "", rc: 0},
		"fake marker":      {script: `printf '\n__TAOFLOW_RC_0000000000000000=9\n'; exit 4`, stdout: "\n__TAOFLOW_RC_0000000000000000=9\n", rc: 4},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res, err := b.Exec(ctx, inst, tc.script, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != tc.rc || string(res.Stdout) != tc.stdout {
				t.Errorf("Exec = %d, %q; want %d, %q", res.ExitCode, res.Stdout, tc.rc, tc.stdout)
			}
			if strings.Contains(string(res.Stdout), inst.Ref) {
				t.Errorf("stdout %q holds the instance name", res.Stdout)
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(box, "count")); err != nil || string(b) != "ran\n" {
		t.Errorf("the exit-7 command ran %q times (%v); want once", b, err)
	}
	for _, c := range f.CallsOf("exec", inst.Ref) {
		if c.Runs != 1 || c.ExitCode != 0 {
			t.Errorf("brev exec %q ran the command %d times and exited %d; want once, 0", c.Args, c.Runs, c.ExitCode)
		}
	}

	// A stdin brev exec cannot carry is refused, and nothing runs; an
	// empty one is fine.
	res, err := b.Exec(ctx, inst, `echo ran >> "$HOME/stdin"`, strings.NewReader("secret-value\n"))
	var ee *platform.ExecError
	if !errors.As(err, &ee) || !strings.Contains(err.Error(), "stdin") || res.ExitCode != -1 {
		t.Errorf("Exec with stdin = %+v, %v; want an ExecError about stdin", res, err)
	} else if strings.Contains(err.Error(), "secret-value") {
		t.Errorf("the error %q shows the stdin", err)
	}
	if _, err := os.Stat(filepath.Join(box, "stdin")); err == nil {
		t.Error("a command with a refused stdin ran")
	}
	if res, err := b.Exec(ctx, inst, "echo ok", strings.NewReader("")); err != nil || string(res.Stdout) != "ok\n" {
		t.Errorf("Exec with an empty stdin = %q, %v", res.Stdout, err)
	}

	// A transient failure: the command did not run, and it says so.
	f.Inject(brevtest.Fault{Kind: "exec-transient", Name: inst.Ref})
	res, err = b.Exec(ctx, inst, `echo ran >> "$HOME/transient"`, nil)
	if !errors.As(err, &ee) || !ee.Transient || res.ExitCode != -1 {
		t.Errorf("Exec through a failing connection = %+v, %v; want a transient ExecError", res, err)
	}
	if _, err := os.Stat(filepath.Join(box, "transient")); err == nil {
		t.Error("the command ran although the connection failed")
	}
	// An unknown instance is an error, not a result.
	res, err = b.Exec(ctx, platform.Instance{Name: "nope", Ref: "tf-nope"}, "true", nil)
	if !errors.As(err, &ee) || res.ExitCode != -1 {
		t.Errorf("Exec on an unknown instance = %+v, %v; want an ExecError", res, err)
	}
}

// TestExecTransportCancel shows that cancelling a brev exec returns
// promptly and kills brev's process group.
func TestExecTransportCancel(t *testing.T) {
	srv := sshtest.Start(t)
	f := brevtest.Start(t, brevtest.Options{SSH: srv})
	b, run := newBrev(t, f, Config{Transport: TransportExec})
	ctx := context.Background()
	inst := createGPU(t, b, f, run)
	cctx, cancel := context.WithTimeoutCause(ctx, 500*time.Millisecond, errors.New("test deadline"))
	defer cancel()
	_, err := b.Exec(cctx, inst, "sleep 30; touch ~/finished", nil)
	if err == nil || !strings.Contains(err.Error(), "test deadline") {
		t.Errorf("cancelled Exec: %v; want the cause", err)
	}
	// It returned without waiting for the command to end.
	if _, err := os.Stat(filepath.Join(sandbox(t, f, inst.Ref), "finished")); err == nil {
		t.Error("the cancelled Exec returned only after its command had finished")
	}
}

// TestCreateFaults makes creates fail in each way brev can and checks that
// nothing is left alive and the error says what happened.
func TestCreateFaults(t *testing.T) {
	tests := map[string]struct {
		fault   string
		timeout time.Duration
		want    []string
	}{
		"create-eof":      {fault: "create-eof", want: []string{"brev create failed", "unexpected EOF", "orphan", "deleted"}},
		"create-failure":  {fault: "create-failure", want: []string{"FAILURE", "deleted"}},
		"stuck-deploying": {fault: "stuck-deploying", timeout: 400 * time.Millisecond, want: []string{"stuck in DEPLOYING for", "deleted"}},
	}
	for tname, tc := range tests {
		t.Run(tname, func(t *testing.T) {
			f := brevtest.Start(t, brevtest.Options{})
			b, run := newBrev(t, f, Config{CreateTimeout: tc.timeout})
			name := InstanceName(run, "gpu")
			f.Inject(brevtest.Fault{Kind: tc.fault, Name: name})
			_, err := b.Create(context.Background(), run, platform.Spec{Name: "gpu", Type: "g5.xlarge"})
			if err == nil {
				t.Fatal("Create succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if len(f.CallsOf("delete", name)) == 0 {
				t.Error("no brev delete of the failed instance")
			}
			f.CheckNoneAlive(t)
		})
	}
}

// TestCreateCancel cancels a Create while the instance deploys: the
// instance is deleted all the same.
func TestCreateCancel(t *testing.T) {
	f := brevtest.Start(t, brevtest.Options{DeployPolls: 1000})
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	ctrlC := errors.New("user pressed Ctrl-C")
	b, run := newBrev(t, f, Config{Progress: func(_, msg string) {
		if strings.HasPrefix(msg, "DEPLOYING") {
			cancel(ctrlC)
		}
	}})
	_, err := b.Create(ctx, run, platform.Spec{Name: "gpu", Type: "g5.xlarge"})
	if !errors.Is(err, ctrlC) || !strings.Contains(err.Error(), "deleted") {
		t.Errorf("cancelled Create: %v; want the cause and that it was deleted", err)
	}
	f.CheckNoneAlive(t)
}

// TestLsErrorsTolerated: a few failing brev ls do not fail a Create.
func TestLsErrorsTolerated(t *testing.T) {
	f := brevtest.Start(t, brevtest.Options{DeployPolls: 2})
	b, run := newBrev(t, f, Config{Transport: TransportExec, CreateTimeout: 2 * time.Second})
	f.Inject(brevtest.Fault{Kind: "ls-error", Times: 3})
	inst, err := b.Create(context.Background(), run, platform.Spec{Name: "gpu", Type: " g5.xlarge , g5.2xlarge"})
	// Without SSH the fake's aliases reach nothing, so the probe fails;
	// what matters is that the ls errors were waited out.
	if err == nil {
		t.Fatalf("Create = %+v; the probe should fail without an sshd", inst)
	}
	if strings.Contains(err.Error(), "brev ls --json failed") {
		t.Errorf("Create failed on ls errors: %v", err)
	}
	if !strings.Contains(err.Error(), "did not answer `echo ok`") {
		t.Errorf("Create: %v; want the probe to be what failed", err)
	}
	cr := f.CallsOf("create", "")
	if len(cr) != 1 || !slices.Contains(cr[0].Args, "g5.xlarge,g5.2xlarge") {
		t.Errorf("create calls %+v; want one with the type chain g5.xlarge,g5.2xlarge", cr)
	}
	// A type that could be read as a flag is refused before brev runs.
	if _, err := b.Create(context.Background(), run, platform.Spec{Name: "x", Type: "--dry-run"}); err == nil {
		t.Error("Create with type --dry-run succeeded")
	}
	if n := len(f.CallsOf("create", "")); n != 1 {
		t.Errorf("%d creates; the bad type ran brev create", n)
	}
	f.CheckNoneAlive(t)
}

// TestDelete covers Delete's retries, and its refusals.
func TestDelete(t *testing.T) {
	srv := sshtest.Start(t)
	f := brevtest.Start(t, brevtest.Options{SSH: srv, DeleteTicks: 3})
	b, run := newBrev(t, f, Config{})
	ctx := context.Background()
	inst, err := b.Create(ctx, run, platform.Spec{Name: "gpu", Type: "g5.xlarge"})
	if err != nil {
		t.Fatal(err)
	}
	f.Inject(brevtest.Fault{Kind: "delete-error", Name: inst.Ref, Times: 2})
	if err := b.Delete(ctx, inst); err != nil {
		t.Fatalf("Delete after two API errors: %v", err)
	}
	if n := len(f.CallsOf("delete", inst.Ref)); n != 3 {
		t.Errorf("brev delete ran %d times; want 3", n)
	}
	f.CheckNoneAlive(t)

	// A name brev never had is deleted already.
	gone := platform.Instance{Name: "x", Ref: InstanceName(run, "never"), Created: true}
	if err := b.Delete(ctx, gone); err != nil {
		t.Errorf("Delete of an unknown name: %v", err)
	}

	// Errors that last: Delete gives up after three tries and says so.
	inst2, err := b.Create(ctx, run, platform.Spec{Name: "gpu2", Type: "g5.xlarge"})
	if err != nil {
		t.Fatal(err)
	}
	f.Inject(brevtest.Fault{Kind: "delete-error", Name: inst2.Ref, Times: 3})
	if err := b.Delete(ctx, inst2); err == nil || !strings.Contains(err.Error(), "brev delete "+inst2.Ref) {
		t.Errorf("Delete through three errors: %v; want it to say how to delete by hand", err)
	}
	if err := b.Delete(ctx, inst2); err != nil {
		t.Fatal(err)
	}
	f.CheckNoneAlive(t)

	// Refusals make no brev call at all.
	before := len(f.Calls())
	for _, in := range []platform.Instance{
		{Name: "adopted", Ref: "tf-someone-else", Created: false},
		{Name: "foreign", Ref: "my-box", Created: true},
	} {
		if err := b.Delete(ctx, in); err == nil {
			t.Errorf("Delete(%+v) succeeded", in)
		}
		if err := b.Stop(ctx, in); err == nil {
			t.Errorf("Stop(%+v) succeeded", in)
		}
	}
	if err := b.Delete(ctx, platform.Instance{Name: "a", Ref: "tf-a"}); err == nil || !strings.Contains(err.Error(), "never") {
		t.Errorf("Delete of an instance not created: %v; want it to say taoflow never deletes those", err)
	}
	if after := len(f.Calls()); after != before {
		t.Errorf("refused calls ran brev %d times", after-before)
	}
}

// TestStop stops an instance, and reports one brev does not know.
func TestStop(t *testing.T) {
	srv := sshtest.Start(t)
	f := brevtest.Start(t, brevtest.Options{SSH: srv})
	b, run := newBrev(t, f, Config{})
	ctx := context.Background()
	inst, err := b.Create(ctx, run, platform.Spec{Name: "gpu", Type: "g5.xlarge"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Stop(ctx, inst); err != nil {
		t.Fatal(err)
	}
	if s := f.Status(inst.Ref); s != "STOPPING" && s != "STOPPED" {
		t.Errorf("after Stop the instance is %s", s)
	}
	if err := b.Delete(ctx, inst); err != nil {
		t.Fatal(err)
	}
	f.CheckNoneAlive(t)
	gone := platform.Instance{Name: "x", Ref: InstanceName(run, "never"), Created: true}
	if err := b.Stop(ctx, gone); !errors.Is(err, platform.ErrNotFound) {
		t.Errorf("Stop of an unknown instance: %v; want ErrNotFound", err)
	}
}

// TestExisting uses an instance made outside taoflow: never created,
// started, stopped or deleted.
func TestExisting(t *testing.T) {
	srv := sshtest.Start(t)
	f := brevtest.Start(t, brevtest.Options{SSH: srv})
	b, run := newBrev(t, f, Config{})
	ctx := context.Background()
	ex := f.AddExisting("shared-box")
	inst, err := b.Create(ctx, run, platform.Spec{Name: "work", Existing: "shared-box"})
	if err != nil {
		t.Fatal(err)
	}
	if inst.Created || inst.Ref != "shared-box" || inst.Name != "work" || inst.Attrs["id"] != ex.ID {
		t.Errorf("Create(existing) = %+v", inst)
	}
	res, err := b.Exec(ctx, inst, `echo hi > "$HOME/mark"; pwd`, nil)
	if err != nil || res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != ex.Sandbox {
		t.Errorf("Exec on the existing instance = %q, %d, %v; want its sandbox", res.Stdout, res.ExitCode, err)
	}
	// By id, too.
	byID, err := b.Create(ctx, run, platform.Spec{Name: "work2", Existing: ex.ID})
	if err != nil || byID.Ref != "shared-box" || byID.Created {
		t.Errorf("Create(existing by id) = %+v, %v", byID, err)
	}
	if err := b.Delete(ctx, inst); err == nil {
		t.Error("Delete of an existing instance succeeded")
	}
	if err := b.Stop(ctx, inst); err == nil {
		t.Error("Stop of an existing instance succeeded")
	}
	if s := f.Status("shared-box"); s != "RUNNING" {
		t.Errorf("the existing instance is %s", s)
	}

	// Missing, or stopped: refused, and nothing is started.
	if _, err := b.Create(ctx, run, platform.Spec{Name: "w", Existing: "no-such-box"}); err == nil || !strings.Contains(err.Error(), "not in `brev ls`") {
		t.Errorf("Create(missing existing): %v", err)
	}
	f.AddExisting("parked")
	f.SetStatus("parked", "STOPPED")
	if _, err := b.Create(ctx, run, platform.Spec{Name: "w", Existing: "parked"}); err == nil || !strings.Contains(err.Error(), "will not start an instance it does not own") {
		t.Errorf("Create(stopped existing): %v", err)
	}
	if s := f.Status("parked"); s != "STOPPED" {
		t.Errorf("the stopped existing instance is now %s", s)
	}
	// A deploying one is waited for.
	f.AddExisting("booting")
	f.SetStatus("booting", "DEPLOYING")
	if in, err := b.Create(ctx, run, platform.Spec{Name: "w", Existing: "booting"}); err != nil || in.Created {
		t.Errorf("Create(deploying existing) = %+v, %v", in, err)
	}

	for _, c := range f.Calls() {
		switch c.Command {
		case "create", "delete", "stop", "start", "exec":
			t.Errorf("brev %q ran for existing instances", c.Args)
		}
	}
	f.CheckNoneAlive(t)
}

// TestConcurrentCreates creates three instances at once: their refreshes
// never overlap.
func TestConcurrentCreates(t *testing.T) {
	srv := sshtest.Start(t)
	f := brevtest.Start(t, brevtest.Options{SSH: srv, DeployPolls: 2})
	b, run := newBrev(t, f, Config{})
	ctx := context.Background()
	insts := make([]platform.Instance, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range insts {
		wg.Go(func() {
			insts[i], errs[i] = b.Create(ctx, run, platform.Spec{Name: fmt.Sprintf("gpu-%d", i), Type: "g5.xlarge"})
		})
	}
	wg.Wait()
	defer f.CheckNoneAlive(t)
	for i, err := range errs {
		if err != nil {
			t.Errorf("Create %d: %v", i, err)
			continue
		}
		res, err := b.Exec(ctx, insts[i], "echo $HOME", nil)
		if err != nil || strings.TrimSpace(string(res.Stdout)) != sandbox(t, f, insts[i].Ref) {
			t.Errorf("Exec on %s = %q, %v; want its own sandbox", insts[i].Ref, res.Stdout, err)
		}
	}
	refreshes := f.CallsOf("refresh", "")
	if len(refreshes) < 3 {
		t.Errorf("%d refreshes for 3 creates", len(refreshes))
	}
	for _, c := range refreshes {
		if c.Concurrent {
			t.Errorf("a refresh (%v–%v) overlapped another", c.Start, c.End)
		}
	}
	for i, in := range insts {
		if errs[i] == nil {
			if err := b.Delete(ctx, in); err != nil {
				t.Error(err)
			}
		}
	}
}

// TestOldVersion: a brev older than MinVersion is refused before any
// lifecycle call.
func TestOldVersion(t *testing.T) {
	f := brevtest.Start(t, brevtest.Options{Version: "v0.6.319"})
	b, run := newBrev(t, f, Config{})
	_, err := b.Create(context.Background(), run, platform.Spec{Name: "gpu", Type: "g5.xlarge"})
	if err == nil || !strings.Contains(err.Error(), "v0.6.319") || !strings.Contains(err.Error(), MinVersion) {
		t.Errorf("Create with brev v0.6.319: %v; want an error naming both versions", err)
	}
	if _, err := b.List(context.Background()); err == nil {
		t.Error("List with an old brev succeeded")
	}
	for _, c := range f.Calls() {
		if c.Command != "version" {
			t.Errorf("brev %q ran with a brev too old", c.Args)
		}
	}
}

// TestArrayJSON drives a brev whose ls --json prints a bare array.
func TestArrayJSON(t *testing.T) {
	srv := sshtest.Start(t)
	f := brevtest.Start(t, brevtest.Options{SSH: srv, ArrayJSON: true, Version: "v0.6.321"})
	b, run := newBrev(t, f, Config{})
	ctx := context.Background()
	if list, err := b.List(ctx); err != nil || len(list) != 0 {
		t.Fatalf("List of none (null) = %+v, %v", list, err)
	}
	inst, err := b.Create(ctx, run, platform.Spec{Name: "gpu", Type: "g5.xlarge"})
	if err != nil {
		t.Fatal(err)
	}
	if list, err := b.List(ctx); err != nil || len(list) != 1 || list[0].Ref != inst.Ref {
		t.Errorf("List = %+v, %v", list, err)
	}
	if res, err := b.Exec(ctx, inst, "exit 3", nil); err != nil || res.ExitCode != 3 {
		t.Errorf("Exec = %+v, %v", res, err)
	}
	if err := b.Delete(ctx, inst); err != nil {
		t.Fatal(err)
	}
	f.CheckNoneAlive(t)
}

// TestExecTransportRestart: brev exec starts a STOPPED instance itself
// before it runs the command (the real CLI does, and the fake copies it).
// On one the run created, Exec says so (progress) and the command's stdout
// is its own, without brev's "is starting" line; one the run did not
// create (existing:) is looked at first and never started (issue 27 item
// 4).
func TestExecTransportRestart(t *testing.T) {
	srv := sshtest.Start(t)
	f := brevtest.Start(t, brevtest.Options{SSH: srv})
	var mu sync.Mutex
	var heard []string
	b, run := newBrev(t, f, Config{Transport: TransportExec, Progress: func(instance, msg string) {
		mu.Lock()
		defer mu.Unlock()
		heard = append(heard, instance+": "+msg)
	}})
	ctx := context.Background()
	inst := createGPU(t, b, f, run)

	f.StopBehindBack(inst.Ref)
	res, err := b.Exec(ctx, inst, "echo hi", nil)
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "hi\n" {
		t.Fatalf("Exec on a stopped instance = %d, %q, %v; want 0, %q", res.ExitCode, res.Stdout, err, "hi\n")
	}
	if st := f.Status(inst.Ref); st != "RUNNING" {
		t.Errorf("the fake left %s %s after brev exec started it", inst.Ref, st)
	}
	mu.Lock()
	said := strings.Join(heard, "\n")
	mu.Unlock()
	if !strings.Contains(said, "gpu: brev exec found "+inst.Ref+" STOPPED and started it again") {
		t.Errorf("Exec did not say brev started the instance; it said:\n%s", said)
	}

	f.AddExisting("my-box")
	box := platform.Instance{Name: "box", Ref: "my-box"}
	if res, err := b.Exec(ctx, box, "echo hi", nil); err != nil || string(res.Stdout) != "hi\n" {
		t.Fatalf("Exec on a running existing instance = %q, %v", res.Stdout, err)
	}
	f.StopBehindBack("my-box")
	execs := len(f.CallsOf("exec", "my-box"))
	res, err = b.Exec(ctx, box, "echo hi", nil)
	var ee *platform.ExecError
	if !errors.As(err, &ee) || !errors.Is(err, platform.ErrStopped) || res.ExitCode != -1 {
		t.Errorf("Exec on a stopped existing instance = %+v, %v; want an ExecError wrapping ErrStopped", res, err)
	}
	if st := f.Status("my-box"); st != "STOPPED" {
		t.Errorf("the existing instance is %s; taoflow must never start it", st)
	}
	if n := len(f.CallsOf("exec", "my-box")); n != execs {
		t.Errorf("brev exec ran on the stopped existing instance (%d calls, %d before)", n, execs)
	}
}

// TestExecTransportLong: a script's size is no limit over either
// transport (platformtest.ExecLong). Over brev exec, a long script goes in
// pieces, each brev exec's command well under the kernel's 128 KiB cap on
// one argument (which the fake brev enforces as brev meets it: the
// command is quoted into the argument of `bash -c`).
func TestExecTransportLong(t *testing.T) {
	srv := sshtest.Start(t)
	f := brevtest.Start(t, brevtest.Options{SSH: srv})
	for _, tr := range []string{TransportExec, TransportSSH} {
		t.Run(tr, func(t *testing.T) {
			b, run := newBrev(t, f, Config{Transport: tr})
			inst := createGPU(t, b, f, run)
			platformtest.ExecLong(t, func(t *testing.T) (platform.Platform, platform.Instance) { return b, inst },
				platformtest.LongOptions{NoStdin: tr == TransportExec})
			for _, c := range f.CallsOf("exec", inst.Ref) {
				if n := len(c.Args[len(c.Args)-1]); n > maxExecArg {
					t.Errorf("a brev exec's command is %d bytes, over %d", n, maxExecArg)
				}
			}
		})
	}
}

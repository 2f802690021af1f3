package brevtest_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/taoflow/taoflow/internal/testrig"
	"github.com/taoflow/taoflow/platform/brev/brevtest"
	"github.com/taoflow/taoflow/platform/ssh/sshtest"
)

// startWithSSH starts a fake whose aliases reach a fresh sshd, with
// refreshes that take no time.
func startWithSSH(t *testing.T) *brevtest.Fake {
	t.Helper()
	return brevtest.Start(t, brevtest.Options{SSH: sshtest.Start(t), RefreshDelay: -1})
}

// sshTo runs command on alias with the ssh config brev refresh maintains.
func sshTo(t *testing.T, f *brevtest.Fake, alias, command string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ssh", "-F", filepath.Join(f.Home, ".ssh", "config"),
		"-o", "BatchMode=yes", "-T", alias, command)
	cmd.Env = f.Env()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// sandbox returns the named instance's sandbox directory.
func sandbox(t *testing.T, f *brevtest.Fake, name string) string {
	t.Helper()
	for _, i := range f.Instances() {
		if i.Name == name {
			return i.Sandbox
		}
	}
	t.Fatalf("no instance %q", name)
	return ""
}

func TestRefresh(t *testing.T) {
	f := startWithSSH(t)
	f.AddExisting("run")
	mustBrev(t, f, "create", "dep", "-t", "g5.xlarge", "-d")
	f.AddExisting("off")
	f.SetStatus("off", "STOPPED")
	if err := os.MkdirAll(filepath.Join(f.Home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	userConfig := filepath.Join(f.Home, ".ssh", "config")
	if err := os.WriteFile(userConfig, []byte("Host mine\n\tHostName example.invalid\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	r := mustBrev(t, f, "refresh")
	if r.stdout != "refreshing brev...\nbrev has been refreshed\n" {
		t.Errorf("stdout = %q", r.stdout)
	}
	b, err := os.ReadFile(filepath.Join(f.Home, ".brev", "ssh_config"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(b)
	if first := strings.SplitN(cfg, "\n", 2)[0]; first != "# included in "+userConfig {
		t.Errorf("first line = %q", first)
	}
	var hosts []string
	for _, line := range strings.Split(cfg, "\n") {
		if h, ok := strings.CutPrefix(line, "Host "); ok {
			hosts = append(hosts, h)
		}
	}
	if want := []string{"run", "run-host"}; !cmp.Equal(hosts, want) {
		t.Errorf("Host entries = %v, want %v (RUNNING instances only)", hosts, want)
	}

	include := `Include "` + filepath.Join(f.Home, ".brev", "ssh_config") + `"`
	mustBrev(t, f, "refresh") // a second refresh adds no second Include
	b, err = os.ReadFile(userConfig)
	if err != nil {
		t.Fatal(err)
	}
	if want := include + "\nHost mine\n\tHostName example.invalid\n"; string(b) != want {
		t.Errorf("~/.ssh/config = %q, want %q", b, want)
	}

	// Both aliases land in the instance's own sandbox.
	for _, alias := range []string{"run", "run-host"} {
		out, err := sshTo(t, f, alias, `echo $HOME; pwd`)
		home := sandbox(t, f, "run")
		if err != nil || out != home+"\n"+home+"\n" {
			t.Errorf("ssh %s: %q, %v; want HOME and cwd %s", alias, out, err, home)
		}
	}
	// The DEPLOYING instance has no alias until a refresh sees it RUNNING.
	if out, err := sshTo(t, f, "dep", "true"); err == nil {
		t.Errorf("ssh dep before it ran and was refreshed: %q, want a failure", out)
	}
	lsJSON(t, f)
	lsJSON(t, f)
	mustBrev(t, f, "refresh")
	if out, err := sshTo(t, f, "dep", `echo $HOME`); err != nil || out != sandbox(t, f, "dep")+"\n" {
		t.Errorf("ssh dep after refresh: %q, %v", out, err)
	}
}

func TestRefreshWithoutSSHWritesNoEntries(t *testing.T) {
	f := brevtest.Start(t, brevtest.Options{RefreshDelay: -1})
	f.AddExisting("run")
	mustBrev(t, f, "refresh")
	b, err := os.ReadFile(filepath.Join(f.Home, ".brev", "ssh_config"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "Host ") {
		t.Errorf("ssh_config without an sshd: %q", b)
	}
	if c := lastCall(t, f); !c.Refreshed || c.Concurrent {
		t.Errorf("call = %+v, want refreshed and not concurrent", c)
	}
}

func TestConcurrentRefresh(t *testing.T) {
	f := brevtest.Start(t, brevtest.Options{RefreshDelay: time.Second})
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	first := exec.CommandContext(ctx, f.Binary, "refresh")
	first.Env = f.Env()
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until the first is in progress (its marker is there), then start
	// the second inside its delay.
	testrig.Eventually(t, hangGuard, "the first refresh to mark itself in progress", func() bool {
		m, _ := filepath.Glob(filepath.Join(f.Dir, "refreshing", "*"))
		return len(m) > 0
	})
	mustBrev(t, f, "refresh")
	if err := first.Wait(); err != nil {
		t.Fatalf("first refresh: %v", err)
	}
	mustBrev(t, f, "refresh") // after both: not concurrent

	calls := f.Calls()
	var concurrent []bool
	for _, c := range calls {
		concurrent = append(concurrent, c.Concurrent)
	}
	if want := []bool{false, true, false}; !cmp.Equal(concurrent, want) {
		t.Errorf("Concurrent by start order = %v, want %v", concurrent, want)
	}
}

func TestExecBeforeRefreshTakesTheSlowPath(t *testing.T) {
	f := startWithSSH(t)
	f.AddExisting("box")
	r := mustBrev(t, f, "exec", "box", `echo "hi from $HOME"`)
	if want := "hi from " + sandbox(t, f, "box") + "\nbox\n"; r.stdout != want {
		t.Errorf("stdout = %q, want %q", r.stdout, want)
	}
	if !strings.Contains(r.stderr, "Connection failed, checking instance status...") {
		t.Errorf("stderr = %q, want the recovery notice", r.stderr)
	}
	if c := lastCall(t, f); !c.Refreshed || c.Runs != 2 {
		t.Errorf("call = %+v, want a refresh and two ssh runs (the first found no alias)", c)
	}
	// Now the alias exists: the fast path, one run, no refresh.
	r = mustBrev(t, f, "exec", "box", "echo again")
	if r.stdout != "again\nbox\n" || strings.Contains(r.stderr, "Connection failed") {
		t.Errorf("second exec: %+v", r)
	}
	if c := lastCall(t, f); c.Refreshed || c.Runs != 1 {
		t.Errorf("call = %+v, want one run and no refresh", c)
	}
}

func TestExecReplaysFailedCommand(t *testing.T) {
	f := startWithSSH(t)
	f.AddExisting("box")
	mustBrev(t, f, "refresh")
	r := brev(t, f, nil, "exec", "box", `echo ran >> count; echo out; echo err >&2; exit 7`)
	if r.code != 1 {
		t.Errorf("exit %d, want 1 (brev never passes the remote code on)", r.code)
	}
	if !strings.HasSuffix(r.stderr, "\nexit status 7\n") {
		t.Errorf("stderr = %q, want it to end with exit status 7", r.stderr)
	}
	if r.stdout != "out\nout\n" {
		t.Errorf("stdout = %q, want both runs' output and no name", r.stdout)
	}
	b, err := os.ReadFile(filepath.Join(sandbox(t, f, "box"), "count"))
	if err != nil || string(b) != "ran\nran\n" {
		t.Errorf("count = %q, %v; want the command run twice", b, err)
	}
	if c := lastCall(t, f); c.Runs != 2 || !c.Refreshed {
		t.Errorf("call = %+v, want 2 runs and a refresh", c)
	}
}

func TestExecOutput(t *testing.T) {
	f := startWithSSH(t)
	box := f.AddExisting("box")
	mustBrev(t, f, "refresh")
	// The name is fmt.Println'd after the output: glued to an unterminated
	// last line.
	if r := mustBrev(t, f, "exec", "box", "printf abc"); r.stdout != "abcbox\n" {
		t.Errorf("stdout = %q, want %q", r.stdout, "abcbox\n")
	}
	// --host after the command is still a flag.
	if r := mustBrev(t, f, "exec", "box", "echo $HOME", "--host"); r.stdout != box.Sandbox+"\nbox\n" {
		t.Errorf("exec --host stdout = %q", r.stdout)
	}
	// By id: no alias of that name, so always the slow path (brev-cli #436).
	r := mustBrev(t, f, "exec", box.ID, "echo by-id")
	if r.stdout != "by-id\n"+box.ID+"\n" || !strings.Contains(r.stderr, "Connection failed") {
		t.Errorf("exec by id: %+v", r)
	}
	if c := lastCall(t, f); c.Runs != 2 || !c.Refreshed {
		t.Errorf("call = %+v, want the slow path", c)
	}
}

func TestExecNamesFromStdin(t *testing.T) {
	f := startWithSSH(t)
	f.AddExisting("a")
	f.AddExisting("b")
	mustBrev(t, f, "refresh")
	// The pipe is read to EOF before anything runs: write the name only
	// after the process started, then close.
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, f.Binary, "exec", "a", `echo $HOME`)
	cmd.Env = f.Env()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(stdin, "\n b \n"); err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exec: %v\n%s", err, errb.String())
	}
	want := sandbox(t, f, "a") + "\na\n" + sandbox(t, f, "b") + "\nb\n"
	if out.String() != want {
		t.Errorf("stdout = %q, want %q", out.String(), want)
	}
	if !strings.Contains(errb.String(), "\n=== a ===\n") || !strings.Contains(errb.String(), "\n=== b ===\n") {
		t.Errorf("stderr = %q, want a header per instance", errb.String())
	}
	if c := lastCall(t, f); !c.StdinPiped || !cmp.Equal(c.Names, []string{"a", "b"}) {
		t.Errorf("call = %+v, want stdin piped and names [a b]", c)
	}
}

func TestExecErrors(t *testing.T) {
	f := startWithSSH(t)
	f.AddExisting("box")
	mustBrev(t, f, "create", "dep", "-t", "g5.xlarge", "-d")
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"flag in command": {[]string{"exec", "box", "ls", "-la"}, "unknown shorthand flag: 'l' in -la"},
		"one arg":         {[]string{"exec", "box"}, "instance name required: provide as argument or pipe from another command"},
		"no args":         {[]string{"exec"}, "requires at least 1 arg(s), only received 0"},
		"empty command":   {[]string{"exec", "box", ""}, "command is required"},
		"missing @file":   {[]string{"exec", "box", "@nothere.sh"}, "open nothere.sh: no such file or directory"},
		"unknown":         {[]string{"exec", "nope", "true"}, `ssh connection failed and could not look up instance "nope": `},
		"deploying":       {[]string{"exec", "dep", "true"}, `instance "dep" is in state "DEPLOYING" — please check with: brev ls`},
		"dash dash":       {[]string{"exec", "box", "--", "echo", "hi"}, `could not look up instance "echo"`},
	} {
		t.Run(name, func(t *testing.T) {
			r := brev(t, f, nil, tc.args...)
			if r.code != 1 || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit 1 and %q", r.code, r.stderr, tc.want)
			}
		})
	}
	if s := f.Status("dep"); s != "DEPLOYING" {
		t.Errorf("exec changed dep to %q", s)
	}
}

func TestExecStartsStoppedInstance(t *testing.T) {
	f := startWithSSH(t)
	f.AddExisting("box")
	f.SetStatus("box", "STOPPED")
	r := mustBrev(t, f, "exec", "box", "echo up")
	if r.stdout != "Instance box is starting. \n\nup\nbox\n" {
		t.Errorf("stdout = %q", r.stdout)
	}
	if s := f.Status("box"); s != "RUNNING" {
		t.Errorf("status = %q, want RUNNING", s)
	}
}

func TestExecAtFile(t *testing.T) {
	f := startWithSSH(t)
	f.AddExisting("box")
	script := filepath.Join(t.TempDir(), "setup.sh")
	if err := os.WriteFile(script, []byte("echo from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := mustBrev(t, f, "exec", "box", "@"+script); r.stdout != "from-file\nbox\n" {
		t.Errorf("stdout = %q", r.stdout)
	}
}

// TestExecArgLimit: brev runs ssh through `bash -c LINE` with the command
// quoted into LINE, each single quote taking four bytes, and the kernel
// caps one argument at 128 KiB: a 100 KiB command runs, one of 40 KiB
// that is all single quotes (160 KiB quoted) does not.
func TestExecArgLimit(t *testing.T) {
	f := startWithSSH(t)
	f.AddExisting("box")
	mustBrev(t, f, "refresh")
	long := strings.Repeat("x", 100<<10)
	if r := mustBrev(t, f, "exec", "box", "printf %s "+long); r.stdout != long+"box\n" {
		t.Errorf("a 100 KiB command printed %d bytes, want %d", len(r.stdout), len(long)+4)
	}
	r := brev(t, f, nil, "exec", "box", `printf %s "`+strings.Repeat("'", 40<<10)+`"`)
	if r.code != 1 || !strings.Contains(r.stderr, "argument list too long") {
		t.Errorf("a command of 160 KiB quoted: exit %d, stderr %.300q; want exit 1, argument list too long", r.code, r.stderr)
	}
}

// TestShutdownFromInside: an instance powered off from inside (its own
// `sudo shutdown -h now`, as autostop's watchdog runs it) is STOPPING,
// then STOPPED in brev ls; ssh to it is refused, what ran on it is gone,
// and it is deleted as any other.
func TestShutdownFromInside(t *testing.T) {
	f := startWithSSH(t)
	mustBrev(t, f, "create", "--name", "box", "-t", "g5.xlarge")
	mustBrev(t, f, "refresh")
	if out, err := sshTo(t, f, "box", "command -v shutdown sudo"); err != nil || !strings.Contains(out, ".bin/shutdown") {
		t.Fatalf("no shutdown on the instance's PATH: %q, %v", out, err)
	}
	// Something that runs on it until the machine goes off.
	if out, err := sshTo(t, f, "box", "setsid sleep 4713 < /dev/null > /dev/null 2>&1 & echo started"); err != nil {
		t.Fatalf("start a process: %q, %v", out, err)
	}
	testrig.Eventually(t, 10*time.Second, "the process to run", func() bool { return len(testrig.ProcessesWith("sleep 4713")) > 0 })
	out, err := sshTo(t, f, "box", "sudo -n shutdown -h now; echo after")
	if strings.Contains(out, "after") {
		t.Errorf("the session went on after shutdown: %q, %v", out, err)
	}
	var seen []string
	for range 2 {
		seen = append(seen, lsJSON(t, f)["box"]["status"])
	}
	if want := []string{"STOPPING", "STOPPED"}; !cmp.Equal(seen, want) {
		t.Errorf("after shutdown: %v, want %v", seen, want)
	}
	testrig.Eventually(t, 10*time.Second, "what ran on it to die", func() bool { return len(testrig.ProcessesWith("sleep 4713")) == 0 })
	if _, err := sshTo(t, f, "box", "true"); err == nil {
		t.Errorf("ssh to a powered-off instance succeeded")
	}
	for _, c := range f.Calls() {
		if strings.Contains(strings.Join(c.Args, " "), "poweroff") {
			t.Errorf("the machine's own shutdown is logged as a brev call: %+v", c)
		}
	}
	mustBrev(t, f, "delete", "box")
	if s := f.Status("box"); s != "DELETING" && s != "" {
		t.Errorf("after delete: %s", s)
	}
}

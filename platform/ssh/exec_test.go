package ssh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/taoflow/taoflow/internal/testrig"
	"github.com/taoflow/taoflow/platform"
	"github.com/taoflow/taoflow/platform/platformtest"
	"github.com/taoflow/taoflow/platform/ssh/sshtest"
)

// newSSH returns an SSH that reaches srv through its config file, closed
// when the test ends, and the instance srv is.
func newSSH(t testing.TB, srv *sshtest.Server, cfg Config) (*SSH, platform.Instance) {
	t.Helper()
	cfg.ConfigFile = srv.ConfigFile
	if cfg.Run == "" {
		cfg.Run = "test-run"
	}
	s := New(cfg)
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, instance(srv)
}

// instance is the test server as an instance.
func instance(srv *sshtest.Server) platform.Instance {
	return platform.Instance{Name: "box", Ref: srv.Alias}
}

// TestExec runs the Exec contract over ssh, then what only ssh could get
// wrong: a line like the wrapper's own markers, and a background process
// that keeps the session's output open.
func TestExec(t *testing.T) {
	srv := sshtest.Start(t)
	platformtest.Exec(t, func(t *testing.T) (platform.Platform, platform.Instance) {
		return newSSH(t, srv, Config{})
	})
	s, inst := newSSH(t, srv, Config{})
	for name, tt := range map[string]struct{ script, stdout, stderr string }{
		"marker-like line":        {script: `echo "__taoflow_x:pid=1" >&2`, stderr: "__taoflow_x:pid=1\n"},
		"background holds output": {script: "sleep 8803 & echo started", stdout: "started\n"},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := s.Exec(context.Background(), inst, tt.script, nil)
			if err != nil || string(res.Stdout) != tt.stdout || string(res.Stderr) != tt.stderr || res.ExitCode != 0 {
				t.Errorf("Exec = %q, %q, exit %d, %v; want %q, %q, exit 0", res.Stdout, res.Stderr, res.ExitCode, err, tt.stdout, tt.stderr)
			}
		})
	}
	for _, pid := range procs("sleep 8803") { // left running on purpose
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// TestExecDestinations reaches the same server by every form of Ref.
func TestExecDestinations(t *testing.T) {
	srv := sshtest.Start(t)
	for name, ref := range map[string]string{
		"alias":              srv.Alias,
		"user@host:port":     srv.Dest(),
		"user@[host]:port":   fmt.Sprintf("%s@[127.0.0.1]:%d", srv.User, srv.Port),
		"host:port, no user": fmt.Sprintf("127.0.0.1:%d", srv.Port),
	} {
		t.Run(name, func(t *testing.T) {
			for _, mux := range []bool{true, false} {
				s, _ := newSSH(t, srv, Config{NoMultiplex: !mux})
				res, err := s.Exec(context.Background(), platform.Instance{Name: "box", Ref: ref}, "echo ok; exit 4", nil)
				if err != nil || string(res.Stdout) != "ok\n" || res.ExitCode != 4 {
					t.Errorf("multiplex %v: Exec = %q, exit %d, %v; want ok, exit 4", mux, res.Stdout, res.ExitCode, err)
				}
			}
		})
	}
}

func TestExecOutputCap(t *testing.T) {
	srv := sshtest.Start(t)
	s, inst := newSSH(t, srv, Config{})
	const max = 1 << 20
	s.maxOutput = max
	const total = 3 << 20
	script := fmt.Sprintf("head -c %d /dev/zero | tr '\\0' a; printf END; head -c %d /dev/zero >&2; exit 5", total, total)
	res, err := s.Exec(context.Background(), inst, script, nil)
	if err != nil || res.ExitCode != 5 {
		t.Fatalf("%v, exit %d", err, res.ExitCode)
	}
	platformtest.Truncated(t, "stdout", res.Stdout, max)
	platformtest.Truncated(t, "stderr", res.Stderr, max)
	if !bytes.HasSuffix(res.Stdout, []byte("aaaEND")) {
		t.Errorf("stdout did not keep its tail: ends %q", res.Stdout[len(res.Stdout)-10:])
	}
}

// TestMultiplexHandshakes counts real logins on the server: one for twenty
// commands over a master connection, twenty without.
func TestMultiplexHandshakes(t *testing.T) {
	tests := map[string]struct {
		noMux bool
		want  int
	}{
		"multiplexed": {false, 1},
		"fresh":       {true, 20},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			srv := sshtest.Start(t)
			s, inst := newSSH(t, srv, Config{NoMultiplex: tt.noMux})
			for i := range 20 {
				res, err := s.Exec(context.Background(), inst, fmt.Sprintf("echo %d", i), nil)
				if err != nil || string(res.Stdout) != fmt.Sprintf("%d\n", i) {
					t.Fatalf("Exec %d = %q, %v", i, res.Stdout, err)
				}
			}
			if got := srv.Handshakes(); got != tt.want {
				t.Errorf("20 commands made %d handshakes, want %d", got, tt.want)
			}
		})
	}
}

// TestMaxSessions runs 30 commands at once on one instance, each holding its
// session for a second. With the default cap they all succeed over one
// connection. With a cap above sshd's MaxSessions 10 (the control case),
// sshd refuses sessions: ssh then falls back to new connections, which cost
// handshakes, print to stderr, and may be dropped by sshd's MaxStartups.
func TestMaxSessions(t *testing.T) {
	tests := map[string]struct {
		maxSessions int
		wantClean   bool
	}{
		"default cap 8":       {0, true},
		"cap 30 above sshd's": {30, false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			srv := sshtest.Start(t)
			s, inst := newSSH(t, srv, Config{MaxSessions: tt.maxSessions})
			const n = 30
			var wg sync.WaitGroup
			results := make([]platform.Result, n)
			errs := make([]error, n)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					results[i], errs[i] = s.Exec(context.Background(), inst, fmt.Sprintf("sleep 1; echo %d", i), nil)
				}()
			}
			wg.Wait()
			var bad []string
			for i := range n {
				if errs[i] != nil || string(results[i].Stdout) != fmt.Sprintf("%d\n", i) || refused(results[i].Stderr) {
					bad = append(bad, fmt.Sprintf("command %d: %q, stderr %q, exit %d, %v", i, results[i].Stdout, results[i].Stderr, results[i].ExitCode, errs[i]))
				}
			}
			handshakes := srv.Handshakes()
			if !tt.wantClean {
				if len(bad) == 0 && handshakes == 1 {
					t.Errorf("30 sessions on one connection all went through; the control case proves nothing")
				}
				t.Logf("without the cap: %d of %d commands refused or noisy, %d handshakes", len(bad), n, handshakes)
				return
			}
			for _, b := range bad {
				t.Error(b)
			}
			if handshakes != 1 {
				t.Errorf("%d handshakes, want 1", handshakes)
			}
		})
	}
}

// refused reports whether stderr says ssh could not open the session:
// sshd's MaxSessions refusal as the mux client reports it. Other stderr
// (a login shell's start-up files, such as a pyenv rehash racing its
// twin) is the remote user's business, not a refusal.
func refused(stderr []byte) bool {
	for _, s := range []string{"open failed", "administratively prohibited", "session request failed", "refused", "mux_client"} {
		if bytes.Contains(stderr, []byte(s)) {
			return true
		}
	}
	return false
}

type stopCause struct{}

func (stopCause) Error() string { return "test stopped the step" }

// TestExecCancelKillsRemote cancels a command whose script runs a sleep in
// the foreground and one in the background, and checks that both remote
// processes are gone (the "remote" is this machine).
func TestExecCancelKillsRemote(t *testing.T) {
	srv := sshtest.Start(t)
	for name, noMux := range map[string]bool{"multiplexed": false, "fresh": true} {
		t.Run(name, func(t *testing.T) {
			s, inst := newSSH(t, srv, Config{NoMultiplex: noMux})
			n := 3600 + time.Now().Nanosecond()%100000
			fg, bg := fmt.Sprintf("sleep %d", n), fmt.Sprintf("sleep %d", n+1)
			before, _ := filepath.Glob("/tmp/.taoflow-*")
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			type outcome struct {
				res platform.Result
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				res, err := s.Exec(ctx, inst, fmt.Sprintf("echo started; %s & %s", bg, fg), nil)
				done <- outcome{res, err}
			}()
			testrig.Eventually(t, 30*time.Second, "the remote sleeps to start", func() bool {
				return len(procs(fg)) > 0 && len(procs(bg)) > 0
			})

			cancel(stopCause{})
			cancelled := time.Now()
			var got outcome
			select {
			case got = <-done:
			case <-time.After(60 * time.Second): // a hang guard, not a timing assertion
				t.Fatal("Exec did not return after its context was cancelled")
			}
			t.Logf("Exec returned %v after the cancel", time.Since(cancelled).Round(time.Millisecond))
			if !errors.Is(got.err, stopCause{}) {
				t.Errorf("Exec error = %v, want one wrapping the cancel cause", got.err)
			}
			var ee *platform.ExecError
			if errors.As(got.err, &ee) {
				t.Errorf("a cancelled Exec reported a transport failure: %v", got.err)
			}
			if string(got.res.Stdout) != "started\n" {
				t.Errorf("output so far = %q, want \"started\\n\"", got.res.Stdout)
			}
			var left []int
			if !testrig.Within(10*time.Second, func() bool {
				left = append(procs(fg), procs(bg)...)
				return len(left) == 0
			}) {
				t.Errorf("remote processes %v survived the cancel", left)
			}
			if files := newFiles(before, "/tmp/.taoflow-*"); len(files) > 0 {
				t.Errorf("the cancel left registration files %v", files)
			}
		})
	}
}

// TestKillBeforeStart shows the other order: the kill command reaches the
// remote before the wrapper has started. The wrapper then exits 137 without
// running the script.
func TestKillBeforeStart(t *testing.T) {
	srv := sshtest.Start(t)
	s, inst := newSSH(t, srv, Config{})
	h, err := s.host(inst.Ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.connect(context.Background(), inst.Name, h); err != nil {
		t.Fatal(err)
	}
	nonce := newNonce()
	s.killRemote(h, killTarget{nonce: nonce})

	marker := filepath.Join(t.TempDir(), "ran")
	var stderr bytes.Buffer
	cmd := s.command(context.Background(), h, []string{"-T"}, remoteCommand(nonce, len(platform.ScriptBody("touch "+marker))))
	cmd.Stdin = strings.NewReader(platform.ScriptBody("touch " + marker))
	cmd.Stderr = &stderr
	err = cmd.Run()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 137 {
		t.Errorf("wrapper after the kill: %v, stderr %q; want exit 137", err, stderr.Bytes())
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the script ran although its kill came first")
	}
	if _, err := os.Stat("/tmp/.taoflow-" + nonce); err == nil {
		t.Error("the wrapper left the cancel file behind")
	}
	// The kill command left a process to remove the file in a minute, in
	// case the wrapper never came; it has come, so end that process here.
	for _, p := range testrig.ProcessesWith(nonce) {
		if _, sid, ok := procStat(p.PID); ok && sid > 1 {
			_ = syscall.Kill(-sid, syscall.SIGKILL)
		}
	}
}

// TestKillClientOnly is the control case of TestExecCancelKillsRemote: the
// remote command outlives a killed ssh client (sshd gives a session without
// a terminal no SIGHUP), so the kill through a second command is needed.
func TestKillClientOnly(t *testing.T) {
	srv := sshtest.Start(t)
	s, inst := newSSH(t, srv, Config{NoMultiplex: true})
	h, err := s.host(inst.Ref)
	if err != nil {
		t.Fatal(err)
	}
	sleep := fmt.Sprintf("sleep %d", 7200+time.Now().Nanosecond()%100000)
	cmd := s.command(context.Background(), h, []string{"-T"}, sleep)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testrig.Eventually(t, 30*time.Second, "the remote sleep to start", func() bool { return len(procs(sleep)) > 0 })
	_ = platform.KillGroup(cmd.Process.Pid)
	_ = cmd.Wait()
	time.Sleep(time.Second) // give sshd time to do whatever it does
	left := procs(sleep)
	for _, pid := range left {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if len(left) == 0 {
		t.Error("killing the ssh client alone ended the remote command; TestExecCancelKillsRemote proves less than it claims")
	}
}

// TestExecConnectionLost drops the connection while the script runs: Exec
// must not take that for a failure to connect (safe to retry) nor for an
// exit code.
func TestExecConnectionLost(t *testing.T) {
	srv := sshtest.Start(t)
	s, inst := newSSH(t, srv, Config{NoMultiplex: true})
	sleep := fmt.Sprintf("sleep %d", 7200+time.Now().Nanosecond()%100000)
	before, _ := filepath.Glob("/tmp/.taoflow-*")
	done := make(chan error, 1)
	var res platform.Result
	go func() {
		var err error
		res, err = s.Exec(context.Background(), inst, "echo started; "+sleep, nil)
		done <- err
	}()
	var pids []int
	testrig.Eventually(t, 30*time.Second, "the remote sleep to start", func() bool {
		pids = procs(sleep)
		return len(pids) > 0
	})
	// The session leader is the wrapper; its parent is sshd's process for
	// the connection. Killing that drops the connection.
	_, sid, ok := procStat(pids[0])
	sshd, _, ok2 := procStat(sid)
	if !ok || !ok2 {
		t.Fatal("the remote command's processes vanished")
	}
	if err := syscall.Kill(sshd, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	defer func() {
		// The remote command is still running and registered: end both.
		_ = syscall.Kill(-sid, syscall.SIGKILL)
		for _, f := range newFiles(before, "/tmp/.taoflow-*") {
			if b, _ := os.ReadFile(f); strings.TrimSpace(string(b)) == fmt.Sprint(sid) {
				_ = os.Remove(f)
			}
		}
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(60 * time.Second): // a hang guard, not a timing assertion
		t.Fatal("Exec did not return after its connection was dropped")
	}
	var ee *platform.ExecError
	if !errors.As(err, &ee) || ee.Transient || !strings.Contains(err.Error(), "may have run") {
		t.Errorf("Exec = exit %d, %v; want a permanent ExecError saying the command may have run", res.ExitCode, err)
	}
	if string(res.Stdout) != "started\n" {
		t.Errorf("stdout = %q, want the output before the drop", res.Stdout)
	}
}

// TestMasterDies kills the master connection between two commands: the
// second opens a new one.
func TestMasterDies(t *testing.T) {
	srv := sshtest.Start(t)
	s, inst := newSSH(t, srv, Config{})
	for i := range 2 {
		res, err := s.Exec(context.Background(), inst, "echo ok", nil)
		if err != nil || string(res.Stdout) != "ok\n" {
			t.Fatalf("Exec %d = %q, %v", i, res.Stdout, err)
		}
		ms := masters(s.dir)
		if len(ms) != 1 {
			t.Fatalf("after Exec %d: masters %v, want one", i, ms)
		}
		if i == 0 {
			if err := syscall.Kill(ms[0], syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			testrig.Eventually(t, 10*time.Second, "the killed master to go away", func() bool { return len(masters(s.dir)) == 0 })
		}
	}
	if got := srv.Handshakes(); got != 2 {
		t.Errorf("%d handshakes, want 2", got)
	}
}

// TestExecQueuedCancel cancels a command that waits for a session slot.
func TestExecQueuedCancel(t *testing.T) {
	srv := sshtest.Start(t)
	s, inst := newSSH(t, srv, Config{MaxSessions: 1})
	release := make(chan struct{})
	first := make(chan error, 1)
	go func() {
		// Holds the only slot until release is closed (stdin EOF).
		r, w := io.Pipe()
		go func() { <-release; w.Close() }()
		_, err := s.Exec(context.Background(), inst, "echo in; cat >/dev/null", r)
		first <- err
	}()
	h, _ := s.host(inst.Ref)
	testrig.Eventually(t, time.Minute, "the first Exec to hold the only slot", func() bool { return len(h.sem) > 0 })
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(200*time.Millisecond, func() { cancel(stopCause{}) })
	res, err := s.Exec(ctx, inst, "echo must-not-run", nil)
	if !errors.Is(err, stopCause{}) || res.ExitCode != -1 {
		t.Errorf("queued Exec = exit %d, %v; want the cancel cause", res.ExitCode, err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Errorf("first Exec: %v", err)
	}
}

// newFiles returns the paths matching pattern that are not in before.
func newFiles(before []string, pattern string) []string {
	old := map[string]bool{}
	for _, p := range before {
		old[p] = true
	}
	now, _ := filepath.Glob(pattern)
	var out []string
	for _, p := range now {
		if !old[p] {
			out = append(out, p)
		}
	}
	return out
}

// procStat returns pid's parent and session from /proc; ok is false when
// pid is gone.
func procStat(pid int) (ppid, sid int, ok bool) {
	st, ok := testrig.ReadStat(pid)
	return st.PPID, st.SID, ok
}

// procs returns the pids of live processes whose command line is cmdline
// (a zombie's is empty).
func procs(cmdline string) []int {
	var pids []int
	for _, p := range testrig.Processes(func(p testrig.Proc) bool { return p.Cmdline() == cmdline }) {
		pids = append(pids, p.PID)
	}
	return pids
}

func TestExecConnectFailure(t *testing.T) {
	srv := sshtest.Start(t)
	port := testrig.FreePort(t) // nothing listens there
	for name, noMux := range map[string]bool{"multiplexed": false, "fresh": true} {
		t.Run(name, func(t *testing.T) {
			s, _ := newSSH(t, srv, Config{NoMultiplex: noMux, ConnectTimeout: 5 * time.Second})
			script := "echo never-runs-9931"
			res, err := s.Exec(context.Background(), platform.Instance{Name: "box", Ref: fmt.Sprintf("127.0.0.1:%d", port)}, script, nil)
			var ee *platform.ExecError
			if !errors.As(err, &ee) || !ee.Transient || ee.Instance != "box" {
				t.Fatalf("Exec on a closed port: %v; want a transient ExecError", err)
			}
			if !strings.Contains(err.Error(), "Connection refused") {
				t.Errorf("error %q does not say why", err)
			}
			if strings.Contains(err.Error(), "never-runs") {
				t.Errorf("error %q holds the script", err)
			}
			if res.ExitCode != -1 {
				t.Errorf("exit code %d, want -1 (no exit code: the script did not run)", res.ExitCode)
			}
		})
	}
}

func TestExecRefuses(t *testing.T) {
	srv := sshtest.Start(t)
	s, inst := newSSH(t, srv, Config{})
	tests := map[string]struct {
		inst   platform.Instance
		script string
		want   string
	}{
		"bad destination":   {platform.Instance{Name: "box", Ref: "-oProxyCommand=x"}, "true", "starts with '-'"},
		"script too long":   {inst, strings.Repeat("x", platform.MaxScript+1), "64 MiB"},
		"NUL in the script": {inst, "echo a\x00b", "NUL"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			res, err := s.Exec(context.Background(), tt.inst, tt.script, nil)
			var ee *platform.ExecError
			if !errors.As(err, &ee) || ee.Transient || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Exec: %v; want a permanent ExecError saying %q", err, tt.want)
			}
			if res.ExitCode != -1 {
				t.Errorf("exit code %d, want -1", res.ExitCode)
			}
		})
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(stopCause{})
	if _, err := s.Exec(ctx, inst, "true", nil); !errors.Is(err, stopCause{}) {
		t.Errorf("Exec on a cancelled context: %v, want the cause", err)
	}
}

func TestControlDir(t *testing.T) {
	srv := sshtest.Start(t)
	long := "/tmp/" + strings.Repeat("d", 60)
	t.Run("too long", func(t *testing.T) {
		s, inst := newSSH(t, srv, Config{ControlDir: long})
		_, err := s.Exec(context.Background(), inst, "true", nil)
		if err == nil || !strings.Contains(err.Error(), "too long") {
			t.Errorf("Exec with control dir %s: %v, want a too-long error", long, err)
		}
		if _, err := os.Stat(long); err == nil {
			t.Errorf("the refused control dir %s was made", long)
		}
	})
	t.Run("given and made", func(t *testing.T) {
		dir := filepath.Join("/tmp", "tf-test-"+newNonce()[:6])
		s, inst := newSSH(t, srv, Config{ControlDir: dir})
		if res, err := s.Exec(context.Background(), inst, "true", nil); err != nil || res.ExitCode != 0 {
			t.Fatalf("Exec: %v, exit %d", err, res.ExitCode)
		}
		fi, err := os.Stat(dir)
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("control dir: %v, %v; want mode 0700", fi, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("Close left the control dir %s it made", dir)
		}
	})
	t.Run("given and shared", func(t *testing.T) {
		dir, err := os.MkdirTemp("/tmp", "tf-own-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		s, inst := newSSH(t, srv, Config{ControlDir: dir})
		if _, err := s.Exec(context.Background(), inst, "true", nil); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("Close removed a control dir it did not make: %v", err)
		}
	})
}

// TestClose shows that Close leaves no master connection behind.
func TestClose(t *testing.T) {
	srv := sshtest.Start(t)
	s, inst := newSSH(t, srv, Config{})
	other := platform.Instance{Name: "other", Ref: srv.Dest()}
	for _, in := range []platform.Instance{inst, other, inst} {
		if _, err := s.Exec(context.Background(), in, "true", nil); err != nil {
			t.Fatal(err)
		}
	}
	dir := s.dir
	if len(masters(dir)) == 0 {
		t.Fatalf("no master connection for %s while commands ran; the check below proves nothing", dir)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if left := masters(dir); len(left) > 0 {
		t.Errorf("ssh processes %v for %s survived Close", left, dir)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("Close left the control dir %s", dir)
	}
	if _, err := s.Exec(context.Background(), inst, "true", nil); err == nil {
		t.Error("Exec after Close succeeded")
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestNoSecretOnArgv sends a secret on stdin to a command that holds it for
// a second, while the test reads every process's command line and
// environment. taoflow's own environment holds the secret too (it is where
// secrets come from), and must not reach the ssh client.
func TestNoSecretOnArgv(t *testing.T) {
	srv := sshtest.Start(t)
	const secret = "tf-secret-7f3a91c2d4"
	t.Setenv("TAOFLOW_TEST_SECRET", secret)
	for name, noMux := range map[string]bool{"multiplexed": false, "fresh": true} {
		t.Run(name, func(t *testing.T) {
			s, inst := newSSH(t, srv, Config{NoMultiplex: noMux})
			stop := make(chan struct{})
			found := make(chan string, 1)
			samples := 0
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				self := fmt.Sprint(os.Getpid())
				for {
					select {
					case <-stop:
						return
					default:
					}
					samples++
					for _, kind := range []string{"cmdline", "environ"} {
						paths, _ := filepath.Glob("/proc/[0-9]*/" + kind)
						for _, p := range paths {
							if filepath.Base(filepath.Dir(p)) == self {
								continue // the test's own start-up environment
							}
							if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(secret)) {
								select {
								case found <- p:
								default:
								}
							}
						}
					}
				}
			}()
			script := `read -r S; sleep 1; [ "${#S}" -eq 20 ] && echo got-it`
			res, err := s.Exec(context.Background(), inst, script, strings.NewReader(secret+"\n"))
			close(stop)
			wg.Wait()
			if err != nil || string(res.Stdout) != "got-it\n" {
				t.Fatalf("Exec = %q, %v; want the secret to arrive", res.Stdout, err)
			}
			select {
			case p := <-found:
				t.Errorf("the secret was visible in %s", p)
			default:
			}
			if samples < 5 {
				t.Errorf("only %d samples of /proc were taken", samples)
			}
		})
	}
}

// TestDisconnect: Disconnect makes the master connection to one instance
// exit (a platform calls it before the instance goes away); the next Exec
// connects again.
func TestDisconnect(t *testing.T) {
	srv := sshtest.Start(t)
	s, inst := newSSH(t, srv, Config{})
	ctx := context.Background()
	if res, err := s.Exec(ctx, inst, "echo one", nil); err != nil || string(res.Stdout) != "one\n" {
		t.Fatalf("Exec = %q, %v", res.Stdout, err)
	}
	s.mu.Lock()
	dir := s.dir
	s.mu.Unlock()
	if len(masters(dir)) != 1 {
		t.Fatalf("masters after the first Exec: %v, want one", masters(dir))
	}
	s.Disconnect(ctx, inst)
	if left := masters(dir); len(left) != 0 {
		t.Errorf("masters after Disconnect: %v", left)
	}
	if res, err := s.Exec(ctx, inst, "echo two", nil); err != nil || string(res.Stdout) != "two\n" {
		t.Fatalf("Exec after Disconnect = %q, %v", res.Stdout, err)
	}
	if n := srv.Handshakes(); n != 2 {
		t.Errorf("%d handshakes, want 2 (one per master)", n)
	}
	// An instance never used: nothing to do.
	s.Disconnect(ctx, platform.Instance{Name: "other", Ref: "nobody@127.0.0.1:1"})
}

// TestExecTransportLong: a script's size is no limit over ssh
// (platformtest.ExecLong), with and without a master connection.
func TestExecTransportLong(t *testing.T) {
	srv := sshtest.Start(t)
	for name, cfg := range map[string]Config{"multiplexed": {}, "no multiplex": {NoMultiplex: true}} {
		t.Run(name, func(t *testing.T) {
			platformtest.ExecLong(t, func(t *testing.T) (platform.Platform, platform.Instance) {
				return newSSH(t, srv, cfg)
			}, platformtest.LongOptions{})
		})
	}
}

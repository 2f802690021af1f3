package sshtest

import (
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taoflow/taoflow/internal/testrig"
)

// TestStart logs in through the alias and through host, port and user, and
// sees the remote exit code and both logins counted.
func TestStart(t *testing.T) {
	s := Start(t)
	tests := map[string][]string{
		"alias":          {s.Alias},
		"host port user": {"-p", strconv.Itoa(s.Port), "-l", s.User, "127.0.0.1"},
		"user at host":   {"-p", strconv.Itoa(s.Port), s.User + "@127.0.0.1"},
	}
	for name, dest := range tests {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"-F", s.ConfigFile, "-o", "BatchMode=yes"}, dest...)
			out, err := exec.Command("ssh", append(args, "echo ok; exit 7")...).CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 7 || strings.TrimSpace(string(out)) != "ok" {
				t.Errorf("ssh: %v, output %q; want exit 7 and ok", err, out)
			}
		})
	}
	if got := s.Handshakes(); got != len(tests) {
		t.Errorf("Handshakes() = %d after %d logins, want %d", got, len(tests), len(tests))
	}
}

// TestStop shows that the server and the connections it accepted end with
// the test that started it.
func TestStop(t *testing.T) {
	var s *Server
	var client *exec.Cmd
	sleep := fmt.Sprintf("sleep %d", 3600+time.Now().Nanosecond()%100000)
	clientDone := make(chan struct{})
	t.Run("server", func(t *testing.T) {
		s = Start(t)
		client = exec.Command("ssh", "-F", s.ConfigFile, "-o", "BatchMode=yes", s.Alias, "echo up; exec "+sleep)
		stdout, err := client.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := client.Start(); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 3)
		if _, err := io.ReadFull(stdout, buf); err != nil || string(buf) != "up\n" {
			t.Fatalf("remote command did not start: %q, %v", buf, err)
		}
		go func() { _ = client.Wait(); close(clientDone) }()
	})
	select {
	case <-s.exited:
	default:
		t.Errorf("sshd (pid %d) still runs after its test ended", s.cmd.Process.Pid)
	}
	select {
	case <-clientDone:
	case <-time.After(30 * time.Second): // a hang guard, not a timing assertion
		_ = client.Process.Kill()
		t.Error("an ssh connection to the server outlived it")
	}
	// stop SIGKILLs the session's processes, and a killed process is gone
	// only once the kernel has run its exit: a loaded machine can take a
	// moment (a hang guard, not a timing assertion).
	if !testrig.Within(10*time.Second, func() bool { return len(procs(sleep)) == 0 }) {
		pids := procs(sleep)
		t.Errorf("the remote command %q (pids %v) outlived the server", sleep, pids)
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
}

// procs returns the pids of processes whose command line is cmdline.
func procs(cmdline string) []int {
	var pids []int
	for _, p := range testrig.Processes(func(p testrig.Proc) bool { return p.Cmdline() == cmdline }) {
		pids = append(pids, p.PID)
	}
	return pids
}

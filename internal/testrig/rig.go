package testrig

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// cmdTimeout bounds every command the rig runs, so a wedged daemon fails
// the test instead of hanging it.
const cmdTimeout = 3 * time.Minute

// tool returns the path of a binary the rig needs, or fails the test with
// the install hint. extraDirs are searched after PATH.
func tool(t testing.TB, name string, extraDirs ...string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range extraDirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	t.Fatalf("testrig: %s not found: install %s (make deps)", name, name)
	return ""
}

// command runs one command to completion and returns its stdout; the error
// names the command and carries its stderr. env is added to the process
// environment; stdin may be nil.
func command(env []string, stdin io.Reader, name string, args ...string) (string, error) {
	return commandIn("", env, stdin, name, args...)
}

// commandIn is command run in directory dir ("" for the current one).
func commandIn(dir string, env []string, stdin io.Reader, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", filepath.Base(name), strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Docker runs the docker CLI with args and returns its trimmed stdout. The
// error includes the exit status and stderr; ExitCode reads the status.
// A missing docker binary fails the test.
func Docker(t testing.TB, args ...string) (string, error) {
	t.Helper()
	return DockerEnv(t, nil, nil, args...)
}

// DockerEnv is Docker with extra environment (for example DOCKER_CONFIG=dir)
// and an optional stdin.
func DockerEnv(t testing.TB, env []string, stdin io.Reader, args ...string) (string, error) {
	t.Helper()
	out, err := command(env, stdin, tool(t, "docker"), args...)
	return strings.TrimSpace(out), err
}

// ExitCode returns the exit status carried by an error from Docker,
// DockerEnv or S3.AWS: 0 for nil, -1 when the command did not exit normally.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

var seq atomic.Int64

// UniqueName returns a name for containers, labels and buckets that is
// unique within this test binary and across concurrently running test
// binaries: "tr-<pid>-<n>-<test name>", lower case, at most 63 characters,
// made of [a-z0-9-].
func UniqueName(t testing.TB) string {
	base := strings.Trim(nonName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	name := fmt.Sprintf("tr-%d-%d-%s", os.Getpid(), seq.Add(1), base)
	if len(name) > 63 {
		name = name[:63]
	}
	return strings.TrimRight(name, "-")
}

var nonName = regexp.MustCompile(`[^a-z0-9]+`)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago:
// a server's port to start, or one to find closed.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testrig: finding a free port: %v", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		t.Fatalf("testrig: finding a free port: %v", err)
	}
	return port
}

// daemon is a server process started by the rig.
type daemon struct {
	name string
	cmd  *exec.Cmd
	log  string        // file holding its stdout and stderr
	done chan struct{} // closed when it has exited
	err  error         // its exit status, valid after done
}

// startDaemon starts a server on a free port and waits until ready reports
// it answers. start builds the command for a port; its stdout and stderr go
// to a log file in dir. A server that exits or does not answer in time is
// tried once more on another port (the port may have been taken between
// probing and binding). The server is stopped by t.Cleanup.
func startDaemon(t testing.TB, name, dir string, start func(port int) *exec.Cmd, ready func(addr string) bool) (*daemon, string) {
	t.Helper()
	var lastErr error
	for attempt := 1; attempt <= 2; attempt++ {
		port := FreePort(t)
		addr := "127.0.0.1:" + strconv.Itoa(port)
		d := &daemon{name: name, cmd: start(port), log: filepath.Join(dir, fmt.Sprintf("%s-%d.log", name, attempt)), done: make(chan struct{})}
		f, err := os.Create(d.log)
		if err != nil {
			t.Fatalf("testrig: %s: %v", name, err)
		}
		d.cmd.Stdout, d.cmd.Stderr = f, f
		if err := d.cmd.Start(); err != nil {
			f.Close()
			t.Fatalf("testrig: starting %s: %v", name, err)
		}
		f.Close()
		go func() { d.err = d.cmd.Wait(); close(d.done) }()

		if lastErr = d.waitReady(addr, ready, 15*time.Second); lastErr == nil {
			t.Cleanup(d.stop)
			return d, addr
		}
		d.stop()
	}
	t.Fatalf("testrig: %v", lastErr)
	return nil, ""
}

// waitReady polls ready until it succeeds, the process exits or the
// timeout passes.
func (d *daemon) waitReady(addr string, ready func(string) bool, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if ready(addr) {
			return nil
		}
		select {
		case <-d.done:
			exit := d.err
			if exit == nil {
				exit = errors.New("exit status 0")
			}
			return fmt.Errorf("%s exited before answering on %s (%w); log:\n%s", d.name, addr, exit, d.tail())
		case <-time.After(25 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer on %s within %s; log:\n%s", d.name, addr, timeout, d.tail())
		}
	}
}

// stop ends the server: SIGTERM, then SIGKILL after 5s.
func (d *daemon) stop() {
	select {
	case <-d.done:
		return
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(5 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}

// tail returns the end of the server's log.
func (d *daemon) tail() string {
	b, _ := os.ReadFile(d.log)
	if len(b) > 2048 {
		b = b[len(b)-2048:]
	}
	return string(b)
}

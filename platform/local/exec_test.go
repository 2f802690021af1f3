package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/taoflow/taoflow/internal/testrig"
	"github.com/taoflow/taoflow/platform"
	"github.com/taoflow/taoflow/platform/platformtest"
)

// TestExec runs the Exec contract on a sandbox, then checks that scripts
// run in it.
func TestExec(t *testing.T) {
	platformtest.Exec(t, func(t *testing.T) (platform.Platform, platform.Instance) {
		return newInstance(t)
	})
	l, inst := newInstance(t)
	res, err := l.Exec(t.Context(), inst, `[ "$(pwd -P)" = "$HOME" ] && [ "$TMPDIR" = "$HOME/tmp" ] && [ -d "$TMPDIR" ]`, nil)
	if err != nil || res.ExitCode != 0 {
		t.Errorf("the script did not run in the sandbox: exit %d, %v, %q", res.ExitCode, err, res.Stderr)
	}
}

func TestExecCleanEnvironment(t *testing.T) {
	t.Setenv("TAOFLOW_TEST_SECRET", "xyz")
	t.Setenv("DOCKER_HOST", "unix:///run/test-docker.sock")
	t.Setenv("DOCKER_CONFIG", "/somewhere/else")
	l, inst := newInstance(t)
	res, err := l.Exec(t.Context(), inst, "env", nil)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("env: %v, exit %d, stderr %q", err, res.ExitCode, res.Stderr)
	}
	if bytes.Contains(res.Stdout, []byte("xyz")) {
		t.Errorf("the child's environment holds the test secret:\n%s", res.Stdout)
	}
	env := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		env[k] = v
	}
	// The shell may add PWD, SHLVL, OLDPWD and _ on its own.
	allowed := map[string]bool{
		"HOME": true, "TMPDIR": true, "PATH": true, "LANG": true, "USER": true,
		"LOGNAME": true, "DOCKER_HOST": true, "PWD": true, "SHLVL": true, "OLDPWD": true, "_": true,
	}
	for k := range env {
		if !allowed[k] {
			t.Errorf("unexpected variable %s in the child's environment", k)
		}
	}
	want := map[string]string{
		"HOME":        inst.Ref,
		"TMPDIR":      filepath.Join(inst.Ref, "tmp"),
		"PATH":        os.Getenv("PATH"),
		"LANG":        "C.UTF-8",
		"DOCKER_HOST": "unix:///run/test-docker.sock",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
}

func TestExecOutputCap(t *testing.T) {
	l, inst := newInstance(t)
	const total = 20 << 20
	script := fmt.Sprintf("head -c %d /dev/zero | tr '\\0' a; printf END; head -c %d /dev/zero >&2", total, total)
	res, err := l.Exec(t.Context(), inst, script, nil)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%v, exit %d", err, res.ExitCode)
	}
	platformtest.Truncated(t, "stdout", res.Stdout, MaxOutput)
	platformtest.Truncated(t, "stderr", res.Stderr, MaxOutput)
	wantMarker := fmt.Sprintf("[taoflow: output truncated: %d bytes dropped before this line]\n", total+3-MaxOutput)
	if !bytes.HasPrefix(res.Stdout, []byte(wantMarker)) {
		t.Errorf("stdout marker = %.100q, want %q", res.Stdout, wantMarker)
	}
	if !bytes.HasSuffix(res.Stdout, []byte("aaaEND")) {
		t.Errorf("stdout did not keep its tail: ends %q", res.Stdout[len(res.Stdout)-10:])
	}
}

type stopCause struct{}

func (stopCause) Error() string { return "test stopped the step" }

func TestExecCancelKillsProcessGroup(t *testing.T) {
	l, inst := newInstance(t)
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)

	pidFile := filepath.Join(inst.Ref, "pid")
	type outcome struct {
		res platform.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := l.Exec(ctx, inst, `echo $$ > pid.tmp && mv pid.tmp pid; sleep 300 & sleep 300`, nil)
		done <- outcome{res, err}
	}()

	// Wait until the shell and both sleeps are running in the shell's group.
	var pgid int
	if !testrig.Within(30*time.Second, func() bool {
		if pgid == 0 {
			b, err := os.ReadFile(pidFile)
			if err != nil {
				return false
			}
			if pgid, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
				t.Fatal(err)
			}
		}
		return len(groupMembers(t, pgid)) >= 3
	}) {
		t.Fatalf("the script's processes did not start (pgid %d, members %v)", pgid, groupMembers(t, pgid))
	}

	cancel(stopCause{})
	var got outcome
	select {
	case got = <-done:
	case <-time.After(60 * time.Second): // a hang guard, not a timing assertion
		t.Fatal("Exec did not return after its context was cancelled")
	}
	if !errors.Is(got.err, stopCause{}) {
		t.Errorf("Exec error = %v, want one wrapping the cancel cause", got.err)
	}
	var ee *platform.ExecError
	if errors.As(got.err, &ee) {
		t.Errorf("a cancelled Exec reported a transport failure: %v", got.err)
	}

	var left []int
	if !testrig.Within(5*time.Second, func() bool {
		left = groupMembers(t, pgid)
		return len(left) == 0
	}) {
		t.Errorf("processes %v of group %d survived the cancel", left, pgid)
	}
}

// groupMembers returns the live (not zombie) processes in process group pgid.
func groupMembers(t *testing.T, pgid int) []int {
	t.Helper()
	return testrig.GroupMembers(pgid)
}

func TestExecErrors(t *testing.T) {
	l, inst := newInstance(t)
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(stopCause{})
	res, err := l.Exec(ctx, inst, "touch ran", nil)
	if !errors.Is(err, stopCause{}) {
		t.Errorf("Exec on a cancelled context: error %v, want the cause", err)
	}
	if res.ExitCode != -1 {
		t.Errorf("Exec on a cancelled context: exit code %d, want -1", res.ExitCode)
	}
	if _, err := os.Stat(filepath.Join(inst.Ref, "ran")); err == nil {
		t.Error("the script ran on a cancelled context")
	}

	if err := l.Delete(t.Context(), inst); err != nil {
		t.Fatal(err)
	}
	_, err = l.Exec(t.Context(), inst, "true", nil)
	var ee *platform.ExecError
	if !errors.As(err, &ee) || !errors.Is(err, platform.ErrNotFound) || ee.Instance != "gpu-a" {
		t.Errorf("Exec on a deleted sandbox: error %v, want an ExecError wrapping ErrNotFound", err)
	}
}

// TestExecTransportLong: a script's size is no limit (platformtest.ExecLong).
func TestExecTransportLong(t *testing.T) {
	platformtest.ExecLong(t, func(t *testing.T) (platform.Platform, platform.Instance) {
		return newInstance(t)
	}, platformtest.LongOptions{})
}

// BenchmarkExecScriptSize: scripts of 1 KiB to 10 MiB on a sandbox
// (platformtest.BenchExecScriptSize).
func BenchmarkExecScriptSize(b *testing.B) {
	l := New(filepath.Join(b.TempDir(), "sandboxes"))
	inst, err := l.Create(b.Context(), "bench", platform.Spec{Name: "box"})
	if err != nil {
		b.Fatal(err)
	}
	platformtest.BenchExecScriptSize(b, l, inst)
}

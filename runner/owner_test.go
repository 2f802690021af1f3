package runner

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taoflow/taoflow/internal/testrig"
	"github.com/taoflow/taoflow/state"
)

// sleeper starts a process that waits to be signalled, and returns it with
// a function that ends it and reports the signal that ended it: SIGINT
// means someone else interrupted it before (a pending SIGINT is delivered
// before the SIGTERM sent here, lower numbers first).
func sleeper(t *testing.T) (*exec.Cmd, func() syscall.Signal) {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Start returns once exec has begun; the new program's argv is set a
	// moment later, and /proc/PID/cmdline read before then is empty (seen
	// on a loaded CI machine). Identities are taken once it reads as sleep's.
	want := "sleep\x00300\x00"
	var b []byte
	if !testrig.Within(10*time.Second, func() bool {
		b, _ = os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", cmd.Process.Pid))
		return string(b) == want
	}) {
		t.Fatalf("/proc/%d/cmdline = %q after 10 s, want %q", cmd.Process.Pid, b, want)
	}
	ended := false
	end := func() syscall.Signal {
		ended = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		return ws.Signal()
	}
	t.Cleanup(func() {
		if !ended {
			end()
		}
	})
	return cmd, end
}

// TestReusedPIDNotSignalled: a run whose apply died, and whose pid now
// belongs to another process (here a sleep), is not taken for alive and
// that process is not signalled; the process the run did record is.
func TestReusedPIDNotSignalled(t *testing.T) {
	host, _ := os.Hostname()
	cmd, end := sleeper(t)
	real, err := procIdentity(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	// What the dead apply recorded: the same pid, another process (it
	// started at another time, with another command line).
	dead := state.Run{ID: "r-1", State: state.RunRunning, PID: cmd.Process.Pid, Host: host,
		Proc: strings.Fields(real)[0] + " start=1 argv=0011223344556677"}
	if ApplyAlive(dead) {
		t.Error("ApplyAlive took the process now holding the pid for the run's apply")
	}
	if err := InterruptApply(dead); !errors.Is(err, ErrNotOwner) {
		t.Errorf("InterruptApply = %v, want ErrNotOwner", err)
	}
	legacy := dead
	legacy.Proc = "" // recorded before runs recorded their process
	if ApplyAlive(legacy) || InterruptApply(legacy) == nil {
		t.Error("a run without a recorded process was taken for alive by its pid")
	}
	if sig := end(); sig != syscall.SIGTERM {
		t.Fatalf("the process holding the reused pid was signalled (%v)", sig)
	}

	cmd, end = sleeper(t)
	if real, err = procIdentity(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	live := state.Run{ID: "r-2", State: state.RunRunning, PID: cmd.Process.Pid, Host: host, Proc: real}
	if !ApplyAlive(live) {
		t.Error("ApplyAlive does not see the run's own process")
	}
	if err := InterruptApply(live); err != nil {
		t.Fatal(err)
	}
	if sig := end(); sig != syscall.SIGINT {
		t.Errorf("the run's own process ended by %v, want the SIGINT of InterruptApply", sig)
	}
}

// TestSelfIdentity: an apply records an identity, and it is its own.
func TestSelfIdentity(t *testing.T) {
	id := selfIdentity()
	if id == "" {
		t.Fatal("no identity recorded for this process")
	}
	again, err := procIdentity(os.Getpid())
	if err != nil || again != id {
		t.Errorf("procIdentity(self) = %q, %v; want %q", again, err, id)
	}
}

// TestFindRunEmptyPrefix: "" is a prefix of every run id; it names none.
func TestFindRunEmptyPrefix(t *testing.T) {
	ctx := t.Context()
	store, err := state.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.CreateRun(ctx, state.Run{ID: "only-0101-000000-aaaa", Name: "only", State: state.RunFailed}); err != nil {
		t.Fatal(err)
	}
	r, err := FindRun(ctx, store, "")
	if err == nil || !strings.Contains(err.Error(), "the run id is empty") {
		t.Errorf(`FindRun("") = %q, %v; want an error`, r.ID, err)
	}
}

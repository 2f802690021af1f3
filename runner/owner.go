package runner

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/taoflow/taoflow/state"
)

// procIdentity says which process pid is, so that a later process given
// the same pid is not taken for it: the boot, the process's start time (in
// clock ticks since boot, field 22 of /proc/PID/stat) and a hash of its
// command line. Two processes with one pid in one boot cannot share a
// start time.
func procIdentity(pid int) (string, error) {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", err
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	// The command name, in parentheses, may hold spaces and parentheses:
	// the fields that follow start after the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return "", fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(string(stat[i+1:]))
	const startTime = 22 - 3 // fields[0] is field 3 (state)
	if len(fields) <= startTime {
		return "", fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields)+2)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(cmdline)
	return fmt.Sprintf("boot=%s start=%s argv=%s", strings.TrimSpace(string(boot)), fields[startTime], hex.EncodeToString(sum[:8])), nil
}

// selfIdentity is procIdentity of this process, "" where /proc cannot
// tell (a run recorded so is never taken for a live apply by pid alone).
func selfIdentity() string {
	id, _ := procIdentity(os.Getpid())
	return id
}

// OwnerAlive reports whether the process that owns run r, as the run
// recorded it, still runs on this host: the pid is alive and is the same
// process (procIdentity), not a later one that was given the pid. A run
// that recorded no identity is never taken for alive.
func OwnerAlive(r state.Run) bool {
	host, _ := os.Hostname()
	if r.PID <= 0 || r.Host != host || r.PID == os.Getpid() || r.Proc == "" {
		return false
	}
	id, err := procIdentity(r.PID)
	return err == nil && id == r.Proc
}

// ErrNotOwner is returned (wrapped) by InterruptApply when the process
// with the run's pid is not the apply that owns it (it ended, and the pid
// may belong to another process now).
var ErrNotOwner = errors.New("the run's apply process is gone")

// InterruptApply sends SIGINT (a Ctrl-C) to the apply process that owns
// run r, and to no other: it holds the process by a pidfd while it checks
// that the process is the one the run recorded, so a pid reused between
// the check and the signal is not signalled either.
func InterruptApply(r state.Run) error {
	if !OwnerAlive(r) {
		return fmt.Errorf("run %s, pid %d: %w", r.ID, r.PID, ErrNotOwner)
	}
	fd, err := unix.PidfdOpen(r.PID, 0)
	if err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("run %s, pid %d: %w", r.ID, r.PID, ErrNotOwner)
		}
		return fmt.Errorf("run %s: opening pid %d: %w", r.ID, r.PID, err)
	}
	defer unix.Close(fd)
	// The pidfd names one process for good: if the pid was reused before
	// it was opened, this check fails; if after, the signal cannot reach
	// the newcomer.
	if !OwnerAlive(r) {
		return fmt.Errorf("run %s, pid %d: %w", r.ID, r.PID, ErrNotOwner)
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGINT, nil, 0); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("run %s, pid %d: %w", r.ID, r.PID, ErrNotOwner)
		}
		return fmt.Errorf("run %s: signalling pid %d: %w", r.ID, r.PID, err)
	}
	return nil
}

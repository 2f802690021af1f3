//go:build unix

package platform

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// InGroup makes cmd run in a process group of its own (and, on Linux, be
// killed by the kernel if taoflow dies), and makes a cancel of its context
// kill that whole group: the shell and everything it started, not only the
// direct child. waitDelay bounds how long Wait then waits for output that
// something the command left running still holds open.
func InGroup(cmd *exec.Cmd, waitDelay time.Duration) {
	cmd.SysProcAttr = groupAttr()
	cmd.Cancel = func() error { return KillGroup(cmd.Process.Pid) }
	cmd.WaitDelay = waitDelay
}

// KillGroup kills (SIGKILL) the process group that pid leads. A group that
// is gone already is os.ErrProcessDone.
func KillGroup(pid int) error {
	err := syscall.Kill(-pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

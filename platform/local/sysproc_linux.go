package local

import "syscall"

// sysProcAttr puts the shell in its own process group and, on Linux, has the
// kernel kill it if taoflow dies (PR_SET_PDEATHSIG). Pdeathsig reaches only
// the shell; its children are reached by killing the group on cancel.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

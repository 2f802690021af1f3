package brev

import "syscall"

// sysProcAttr puts a brev command in its own process group, so that a
// cancel kills brev together with the bash and ssh it starts, and on Linux
// has the kernel kill it if taoflow dies (PR_SET_PDEATHSIG).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

package ssh

import "syscall"

// sysProcAttr puts the ssh client in its own process group and, on Linux,
// has the kernel kill it if taoflow dies (PR_SET_PDEATHSIG). A master that
// the client forks into the background leaves the group and the death
// signal behind: it outlives taoflow by at most ControlPersist.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

package platform

import "syscall"

// groupAttr puts a command in its own process group and has the kernel
// kill it if taoflow dies (PR_SET_PDEATHSIG). The death signal reaches only
// the direct child; what it forks into the background (an ssh master)
// leaves both behind.
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

//go:build unix && !linux

package ssh

import "syscall"

// sysProcAttr puts the ssh client in its own process group.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

//go:build unix && !linux

package local

import "syscall"

// sysProcAttr puts the shell in its own process group.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

//go:build unix && !linux

package platform

import "syscall"

// groupAttr puts a command in its own process group.
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

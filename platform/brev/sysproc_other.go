//go:build unix && !linux

package brev

import "syscall"

// sysProcAttr puts a brev command in its own process group, so that a
// cancel kills brev together with the bash and ssh it starts.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/taoflow/taoflow/internal/shellquote"
	"github.com/taoflow/taoflow/platform/brev/brevtest/internal/fakestate"
)

// poweroffArg is the hidden first argument with which an instance's own
// shutdown (written by writeMachineBin) asks the fake to power it off: it
// is no brev command, and no client call is logged for it.
const poweroffArg = "__poweroff-from-inside"

// writeMachineBin gives the instance's sandbox the commands of a machine
// that can be powered off from inside: <sandbox>.bin, which the test sshd
// puts first on PATH of the sandbox's sessions (sshtest), holds shutdown
// and poweroff, which ask this fake to power instance name off, and a sudo
// that runs its command as it is (the fake's sessions run as the test's
// user, who is the instance's only user).
func writeMachineBin(dir, sandbox, name string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	bin := sandbox + ".bin"
	if err := os.MkdirAll(bin, 0o700); err != nil {
		return err
	}
	off := "#!/bin/sh\n# The fake instance's own shutdown: the machine powers off (brev ls: STOPPING, then STOPPED).\n" +
		fakestate.EnvDir + "=" + shellquote.Quote(dir) + " exec " + shellquote.Quote(self) + " " + poweroffArg + " " + shellquote.Quote(name) + "\n"
	sudo := "#!/bin/sh\n# The fake instance's sudo: its options are dropped, its command runs as it is.\n" +
		"while [ $# -gt 0 ]; do case $1 in --) shift; break;; -*) shift;; *) break;; esac; done\nexec \"$@\"\n"
	for f, text := range map[string]string{"shutdown": off, "poweroff": off, "sudo": sudo} {
		if err := os.WriteFile(filepath.Join(bin, f), []byte(text), 0o700); err != nil {
			return err
		}
	}
	return nil
}

// powerOff is the instance name powering itself off (its shutdown): as
// far as brev can tell (docs/design.md §8.8), it is STOPPING, then STOPPED
// at the next tick, its disk kept; ssh to it is refused and what ran on it
// dies, this process (the shutdown) last.
func powerOff(dir, name string) int {
	var sandbox string
	err := fakestate.Update(dir, func(s *fakestate.State) error {
		i := s.Find(name)
		if i == nil {
			return fmt.Errorf("no instance %q", name)
		}
		sandbox = i.Sandbox
		if i.Status == fakestate.Running {
			i.SetStatus(fakestate.Stopping)
		}
		return nil
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "shutdown: %v\n", err)
		return 1
	}
	if err := os.WriteFile(sandbox+".down", nil, 0o600); err != nil {
		fmt.Fprintf(os.Stderr, "shutdown: %v\n", err)
		return 1
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range procs {
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if env, err := os.ReadFile(p); err == nil && bytes.Contains(env, []byte("\x00HOME="+sandbox+"\x00")) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return 0
}

package testrig

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Proc is a process of this machine, as /proc shows it.
type Proc struct {
	PID int
	// Argv is /proc/PID/cmdline: the arguments, each ended by a NUL. It is
	// empty for a zombie and for a kernel thread.
	Argv []byte
}

// Cmdline is the arguments joined with spaces.
func (p Proc) Cmdline() string {
	return string(bytes.ReplaceAll(bytes.TrimRight(p.Argv, "\x00"), []byte{0}, []byte{' '}))
}

// Has reports whether text is in the arguments, taken one by one (a value
// passed as one argument) or joined with spaces (a command and its
// arguments).
func (p Proc) Has(text string) bool {
	return bytes.Contains(p.Argv, []byte(text)) || strings.Contains(p.Cmdline(), text)
}

// Comm is the process's command name (/proc/PID/comm), or "" once it is
// gone.
func (p Proc) Comm() string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.PID), "comm"))
	return strings.TrimSpace(string(b))
}

// Processes returns the processes of this machine, other than the caller,
// for which keep returns true (all of them for a nil keep). A process that
// ends while they are read is left out.
func Processes(keep func(Proc) bool) []Proc {
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	self := os.Getpid()
	var out []Proc
	for _, path := range paths {
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		if p := (Proc{PID: pid, Argv: b}); keep == nil || keep(p) {
			out = append(out, p)
		}
	}
	return out
}

// ProcessesWith returns the processes whose arguments hold text (Proc.Has).
func ProcessesWith(text string) []Proc {
	return Processes(func(p Proc) bool { return p.Has(text) })
}

// Stat is what /proc/PID/stat says of a process.
type Stat struct {
	PID   int
	State byte // R, S, D, Z (zombie), …
	PPID  int
	PGID  int
	SID   int
}

// Live reports whether the process runs (is not a zombie or dead).
func (s Stat) Live() bool { return s.State != 'Z' && s.State != 'X' }

// ReadStat reads pid's stat; ok is false once it is gone.
func ReadStat(pid int) (Stat, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	// pid (comm) state ppid pgrp session ...; comm may hold spaces and parens.
	i := bytes.LastIndexByte(b, ')')
	if err != nil || i < 0 {
		return Stat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 4 || len(f[0]) != 1 {
		return Stat{}, false
	}
	st := Stat{PID: pid, State: f[0][0]}
	var errs [3]error
	st.PPID, errs[0] = strconv.Atoi(f[1])
	st.PGID, errs[1] = strconv.Atoi(f[2])
	st.SID, errs[2] = strconv.Atoi(f[3])
	return st, errs[0] == nil && errs[1] == nil && errs[2] == nil
}

// Stats returns the stat of every process of this machine.
func Stats() []Stat {
	paths, _ := filepath.Glob("/proc/[0-9]*")
	var out []Stat
	for _, path := range paths {
		if pid, err := strconv.Atoi(filepath.Base(path)); err == nil {
			if st, ok := ReadStat(pid); ok {
				out = append(out, st)
			}
		}
	}
	return out
}

// GroupMembers returns the live (not zombie) processes of process group
// pgid; none for 0.
func GroupMembers(pgid int) []int {
	var pids []int
	for _, st := range Stats() {
		if pgid != 0 && st.PGID == pgid && st.Live() {
			pids = append(pids, st.PID)
		}
	}
	return pids
}

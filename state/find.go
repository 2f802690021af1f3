package state

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// DirName is the name of a state directory that commands find by
// themselves: .taoflow in the working directory or one of its parents.
const DirName = ".taoflow"

// Find looks for a state directory as git looks for .git: DirName in
// start (an absolute directory), then in each parent up to the
// filesystem root. It stops before a parent that is not this user's
// (mine, for the parent's FileInfo, says whether it is): a directory
// someone else controls could hold a state that steers taoflow's
// commands. The start directory itself is always looked at, as the
// default state ./.taoflow always was. It returns the directory found
// and whether one was; one found is still checked by Open and
// OpenReadOnly (owner and mode) before it is read.
func Find(start string, mine func(fs.FileInfo) bool) (string, bool) {
	dir := filepath.Clean(start)
	for {
		cand := filepath.Join(dir, DirName)
		if fi, err := os.Stat(cand); err == nil && fi.IsDir() {
			return cand, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false // the filesystem root
		}
		fi, err := os.Stat(parent)
		if err != nil || !mine(fi) {
			return "", false
		}
		dir = parent
	}
}

// Mine says whether fi is owned by this user (the effective uid): the
// test Find applies to each parent it searches. Group- or world-writable
// parents of the user's own (a shared project directory) are searched.
func Mine(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return !ok || int(st.Uid) == os.Geteuid()
}

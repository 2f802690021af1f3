package ssh

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// sweepAge is how long a control directory of an unknown run must have
// been left untouched before Sweep("") removes it.
const sweepAge = time.Hour

// Sweep removes the default control directories (/tmp/tf-<hash>-*, see
// Config.ControlDir) that an ssh of a run that died (kill -9, power loss)
// left behind: those of run, or with run "" of any run, untouched for an
// hour. A directory is removed only when it is this user's, no ssh process
// names it (no master of a live run uses it) and it holds nothing but
// sockets. It returns the directories removed.
func Sweep(run string) []string {
	pattern := "tf-??????-*"
	if run != "" {
		sum := sha256.Sum256([]byte(run))
		pattern = "tf-" + hex.EncodeToString(sum[:3]) + "-*"
	}
	dirs, _ := filepath.Glob(filepath.Join("/tmp", pattern))
	var removed []string
	for _, dir := range dirs {
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Getuid() {
			continue
		}
		if run == "" && time.Since(fi.ModTime()) < sweepAge {
			continue
		}
		if len(masters(dir)) > 0 {
			continue
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		onlySockets := true
		for _, e := range entries {
			onlySockets = onlySockets && e.Type()&os.ModeSocket != 0
		}
		if !onlySockets {
			continue
		}
		for _, e := range entries {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
		if os.Remove(dir) == nil {
			removed = append(removed, dir)
		}
	}
	return removed
}

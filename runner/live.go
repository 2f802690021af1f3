package runner

import (
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
)

// A live run is announced in a per-user directory while its apply runs, so
// that `taoflow reap`, started from another working directory (another
// state), leaves the brev instances of a run going on on this machine alone:
// brev instances carry no labels, only their names.

// liveRun is the content of a live run's file.
type liveRun struct {
	Run   string   `json:"run"`
	PID   int      `json:"pid"`
	Names []string `json:"names"` // platform names of the instances it may create
}

// LiveDir is where live runs are announced: the user's cache directory.
func LiveDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "taoflow", "live"), nil
}

// Announce writes run's live file and returns the func that removes it.
// Failing to write it is not fatal: reap is then less sure, not apply.
func Announce(run string, names []string) func() {
	dir, err := LiveDir()
	if err != nil {
		return func() {}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return func() {}
	}
	b, _ := json.Marshal(liveRun{Run: run, PID: os.Getpid(), Names: names})
	path := filepath.Join(dir, run+".json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return func() {}
	}
	return func() { _ = os.Remove(path) }
}

// LiveNames returns the instance names of the runs announced by live apply
// processes of this machine; files of processes gone are removed.
func LiveNames() map[string]string {
	names := map[string]string{}
	dir, err := LiveDir()
	if err != nil {
		return names
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var lr liveRun
		if json.Unmarshal(b, &lr) != nil || lr.PID <= 0 {
			continue
		}
		if syscall.Kill(lr.PID, 0) != nil {
			_ = os.Remove(f) // its apply died: the run is for destroy/--resume or reap
			continue
		}
		for _, n := range lr.Names {
			names[n] = lr.Run
		}
	}
	return names
}

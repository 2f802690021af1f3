package state

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// ApplyLogName is the file, in a run's directory, that holds what its
// apply printed once no terminal showed it: the output of a detached apply
// (apply --detach) from its start, or of one that went on after its
// terminal hung up (--detach-on-hangup) from then.
const ApplyLogName = "apply.log"

// ApplyLogPath is the apply log of run in the state directory dir:
// dir/runs/<run>/apply.log, the run's name made safe for a file name as
// its node logs' are.
func ApplyLogPath(dir, run string) string {
	return filepath.Join(dir, "runs", fileName(run), ApplyLogName)
}

// OpenApplyLog opens the apply log of run in dir for appending, creating
// it (mode 0600, whatever the umask) and the run's directory (0700) when
// missing. The state directory must already be one Open accepts: a dir
// that is not this user's alone is refused with an error wrapping
// ErrUnsafe. What is written to it is the caller's to redact.
func OpenApplyLog(dir, run string) (*os.File, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	if err := checkPrivate(abs); err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	path := ApplyLogPath(abs, run)
	if err := mkdirPrivate(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("state: create %s: %w", filepath.Dir(path), err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, fmt.Errorf("state: %w", err)
	}
	return f, nil
}

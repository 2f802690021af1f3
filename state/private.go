package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrUnsafe is returned (wrapped) by Open and OpenReadOnly for a state
// directory or database that someone other than this user wrote or can
// write: one owned by another user, or writable by group or others (a
// shared TAOFLOW_STATE, a 0777 directory made by someone else). Such a
// state could name the programs that destroy and cancel run, so it is
// refused rather than read. Test for it with errors.Is.
var ErrUnsafe = errors.New("unsafe state")

// UnsafeError says which path of a state is unsafe, why, and what to do.
type UnsafeError struct {
	Path string
	Why  string // "owned by uid 65534, not by you (uid 1000)", "writable by others (mode 0777)"
	Fix  string
}

func (e *UnsafeError) Error() string {
	return fmt.Sprintf("refusing the state at %s: it is %s; a state that someone else wrote or can write could make taoflow run their programs. %s", e.Path, e.Why, e.Fix)
}

func (e *UnsafeError) Unwrap() error { return ErrUnsafe }

// checkPrivate refuses a state directory, or its state.db, that is not
// this user's alone to write: owned by another user, writable by group or
// others, or (the database) not a regular file. A missing database is
// fine (Open creates it); a missing directory is for the caller to handle.
func checkPrivate(dir string) error {
	uid := os.Geteuid()
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if err := checkOwner(dir, fi, uid); err != nil {
		return err
	}
	if !fi.IsDir() {
		return &UnsafeError{Path: dir, Why: "not a directory", Fix: "Give --state (or TAOFLOW_STATE) a directory of your own."}
	}
	db := filepath.Join(dir, dbName)
	fi, err = os.Lstat(db)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return &UnsafeError{Path: db, Why: "not a regular file (" + fi.Mode().Type().String() + ")", Fix: "Remove it, or use a state directory of your own (--state DIR or TAOFLOW_STATE)."}
	}
	return checkOwner(db, fi, uid)
}

// checkOwner refuses path (described by fi) unless uid owns it and group
// and others cannot write it.
func checkOwner(path string, fi fs.FileInfo, uid int) error {
	switch why := NotPrivate(fi, uid); {
	case why == "":
		return nil
	case strings.HasPrefix(why, "owned"):
		return &UnsafeError{Path: path, Why: why,
			Fix: "Use a state directory of your own (--state DIR or TAOFLOW_STATE); never share one between users."}
	default:
		return &UnsafeError{Path: path, Why: why,
			Fix: fmt.Sprintf("If everything in it is yours, make it private (chmod go-w %s); else use a state directory of your own (--state DIR or TAOFLOW_STATE).", path)}
	}
}

// NotPrivate says why the file or directory fi describes is not uid's
// alone to write — "owned by uid 65534, not by you (uid 1000)", "writable
// by group or others (mode 0777)" — or "" when it is: the rule for the
// state, and for every directory taoflow writes into on the user's behalf
// (results --download DIR).
func NotPrivate(fi fs.FileInfo, uid int) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "" // no owners to check on this system
	}
	if int(st.Uid) != uid {
		return fmt.Sprintf("owned by uid %d, not by you (uid %d)", st.Uid, uid)
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Sprintf("writable by group or others (mode %04o)", perm)
	}
	return ""
}

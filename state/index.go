package state

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// MaxIndexed bounds the index of state directories: when it would hold
// more, the directories that no longer exist are dropped, then the oldest.
const MaxIndexed = 256

// IndexFile is this user's index of the state directories apply has used
// (status --all, reap): $XDG_STATE_HOME/taoflow/states, else
// $HOME/.local/state/taoflow/states; "" when neither is an absolute path.
// getenv is os.Getenv in the CLI.
func IndexFile(getenv func(string) string) string {
	if d := getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "taoflow", "states")
	}
	if h := getenv("HOME"); filepath.IsAbs(h) {
		return filepath.Join(h, ".local", "state", "taoflow", "states")
	}
	return ""
}

// indexEntry is one line of the index (JSON lines, so any path fits).
type indexEntry struct {
	Dir string `json:"dir"`
}

// Remember adds the state directory dir (made absolute) to the index
// file, unless it is there already. The file is 0600 in a 0700
// directory, and written under an exclusive lock: applies started at
// once each add their line. Past MaxIndexed entries it is rewritten
// (atomically, by rename) without the directories that are gone and the
// oldest.
func Remember(index, dir string) error {
	if index == "" {
		return errors.New("no index file (neither XDG_STATE_HOME nor HOME is an absolute path)")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(index), 0o700); err != nil {
		return err
	}
	for {
		f, err := os.OpenFile(index, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return err
		}
		again, err := rememberLocked(f, index, abs)
		f.Close()
		if !again {
			return err
		}
	}
}

// rememberLocked does Remember's work on the open index f; again says the
// file was replaced while this waited for its lock (open it anew).
func rememberLocked(f *os.File, index, abs string) (again bool, err error) {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return false, err
	}
	held, err1 := f.Stat()
	now, err2 := os.Stat(index)
	if err1 != nil || err2 != nil || !os.SameFile(held, now) {
		return true, nil
	}
	if why := NotPrivate(held, os.Geteuid()); why != "" {
		return false, &UnsafeError{Path: index, Why: why, Fix: fmt.Sprintf("Remove it, or make it private (chmod 600 %s).", index)}
	}
	dirs, err := readIndex(index)
	if err != nil {
		return false, err
	}
	for _, d := range dirs {
		if d == abs {
			return false, nil
		}
	}
	line, err := json.Marshal(indexEntry{Dir: abs})
	if err != nil {
		return false, err
	}
	if len(dirs) < MaxIndexed {
		_, err := f.Write(append(line, '\n'))
		return false, err
	}
	// Full: keep the newest that still exist, then this one.
	var keep []string
	for _, d := range dirs {
		if _, err := os.Stat(d); err == nil {
			keep = append(keep, d)
		}
	}
	if len(keep) >= MaxIndexed {
		keep = keep[len(keep)-MaxIndexed+1:]
	}
	keep = append(keep, abs)
	tmp, err := os.CreateTemp(filepath.Dir(index), ".states-*")
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name())
	w := bufio.NewWriter(tmp)
	for _, d := range keep {
		b, _ := json.Marshal(indexEntry{Dir: d})
		_, _ = w.Write(append(b, '\n')) // an error stays in w: Flush returns it
	}
	if err := w.Flush(); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	return false, os.Rename(tmp.Name(), index)
}

// Indexed returns the state directories in the index file, oldest first,
// without those that no longer exist. A missing index holds none; lines
// that are not entries are skipped. An index that is not this user's
// alone is refused (ErrUnsafe), as a state is.
func Indexed(index string) ([]string, error) {
	if index == "" {
		return nil, nil
	}
	fi, err := os.Stat(index)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if why := NotPrivate(fi, os.Geteuid()); why != "" {
		return nil, &UnsafeError{Path: index, Why: why, Fix: fmt.Sprintf("Remove it, or make it private (chmod 600 %s).", index)}
	}
	if di, err := os.Stat(filepath.Dir(index)); err != nil {
		return nil, err
	} else if why := NotPrivate(di, os.Geteuid()); why != "" {
		return nil, &UnsafeError{Path: filepath.Dir(index), Why: why, Fix: fmt.Sprintf("Make it private (chmod 700 %s).", filepath.Dir(index))}
	}
	dirs, err := readIndex(index)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range dirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			out = append(out, d)
		}
	}
	return out, nil
}

// readIndex reads the directories in the index file, each once.
func readIndex(index string) ([]string, error) {
	f, err := os.Open(index)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var dirs []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		var e indexEntry
		if json.Unmarshal(sc.Bytes(), &e) != nil || !filepath.IsAbs(e.Dir) || seen[e.Dir] {
			continue
		}
		seen[e.Dir] = true
		dirs = append(dirs, e.Dir)
	}
	return dirs, sc.Err()
}

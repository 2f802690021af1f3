package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestFindUpward: the nearest .taoflow in the start directory or a parent
// is found; none found above the filesystem root is none.
func TestFindUpward(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, "proj", "a", "b")
	mkdirs(t, deep, filepath.Join(root, "proj", DirName))
	// A file named .taoflow is not a state directory.
	if err := os.WriteFile(filepath.Join(root, "proj", "a", DirName), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	all := func(fs.FileInfo) bool { return true }
	if got, ok := Find(deep, all); !ok || got != filepath.Join(root, "proj", DirName) {
		t.Errorf("Find(%s) = %q, %v; want the project's state", deep, got, ok)
	}
	mkdirs(t, filepath.Join(deep, DirName))
	if got, _ := Find(deep, all); got != filepath.Join(deep, DirName) {
		t.Errorf("Find(%s) = %q; want the nearest state, its own", deep, got)
	}
	other := filepath.Join(root, "other")
	mkdirs(t, other)
	if got, ok := Find(other, all); ok && strings.HasPrefix(got, root) {
		t.Errorf("Find(%s) = %q; want none", other, got)
	}
}

// TestFindStopsAtAnotherUsersDirectory: the search does not go into, nor
// above, a parent that is not this user's: a state there (someone else's
// directory) does not steer the commands. The owner check is faked (the
// tests may run as root, who cannot be someone else); Mine's own rule is
// TestMineIsTheOwner.
func TestFindStopsAtAnotherUsersDirectory(t *testing.T) {
	root := t.TempDir()
	shared := filepath.Join(root, "shared")
	deep := filepath.Join(shared, "mine", "work")
	mkdirs(t, deep, filepath.Join(shared, DirName), filepath.Join(root, DirName))
	notMine := func(fi fs.FileInfo) bool { return fi.Name() != "shared" }
	if got, ok := Find(deep, notMine); ok {
		t.Errorf("Find went past a directory that is not the user's: %q", got)
	}
	// The start directory itself is always looked at.
	mkdirs(t, filepath.Join(shared, "mine", DirName))
	if got, _ := Find(filepath.Join(shared, "mine"), func(fs.FileInfo) bool { return false }); got != filepath.Join(shared, "mine", DirName) {
		t.Errorf("Find did not look in its start directory: %q", got)
	}
}

// TestMineIsTheOwner: Mine is the owner check, not the mode check.
func TestMineIsTheOwner(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !Mine(fi) {
		t.Errorf("Mine is false for a directory of this user's")
	}
	fi, err = os.Stat("/proc/1")
	if err == nil && os.Geteuid() != 0 && Mine(fi) {
		t.Errorf("Mine is true for /proc/1 (root's) as uid %d", os.Geteuid())
	}
}

// TestIndexRememberAndTolerate: Remember adds a directory once, as an
// absolute path, in a 0600 file of a 0700 directory; Indexed leaves out
// the directories that are gone and the lines that are not entries.
func TestIndexRememberAndTolerate(t *testing.T) {
	base := t.TempDir()
	index := IndexFile(func(k string) string { return map[string]string{"XDG_STATE_HOME": base, "HOME": "/nowhere"}[k] })
	if index != filepath.Join(base, "taoflow", "states") {
		t.Fatalf("IndexFile = %q", index)
	}
	if got := IndexFile(func(k string) string { return map[string]string{"XDG_STATE_HOME": "rel", "HOME": "/h"}[k] }); got != "/h/.local/state/taoflow/states" {
		t.Errorf("IndexFile with a relative XDG_STATE_HOME = %q", got)
	}
	a, b := filepath.Join(base, "a"), filepath.Join(base, "b")
	mkdirs(t, a, b)
	for _, d := range []string{a, b, a} {
		if err := Remember(index, d); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := Indexed(index); err != nil || fmt.Sprint(got) != fmt.Sprint([]string{a, b}) {
		t.Errorf("Indexed = %v, %v; want [%s %s]", got, err, a, b)
	}
	for path, want := range map[string]os.FileMode{index: 0o600, filepath.Dir(index): 0o700} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, %v; want %04o", path, fi.Mode().Perm(), err, want)
		}
	}
	f, err := os.OpenFile(index, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("not json\n{\"dir\":\"relative\"}\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.RemoveAll(a); err != nil {
		t.Fatal(err)
	}
	if got, err := Indexed(index); err != nil || fmt.Sprint(got) != fmt.Sprint([]string{b}) {
		t.Errorf("Indexed = %v, %v; want [%s]", got, err, b)
	}
	if got, err := Indexed(filepath.Join(base, "none")); err != nil || len(got) != 0 {
		t.Errorf("a missing index: %v, %v", got, err)
	}
	if err := os.Chmod(index, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := Indexed(index); !errors.Is(err, ErrUnsafe) {
		t.Errorf("an index others can write was read: %v", err)
	}
	if err := Remember(index, b); !errors.Is(err, ErrUnsafe) {
		t.Errorf("Remember wrote to an index others can write: %v", err)
	}
}

// TestIndexBounded: past MaxIndexed entries, those that are gone go
// first, then the oldest; the newest is always kept.
func TestIndexBounded(t *testing.T) {
	base := t.TempDir()
	index := filepath.Join(base, "x", "states")
	var lines []string
	for i := range MaxIndexed {
		d := filepath.Join(base, fmt.Sprint("s", i))
		if i >= 10 {
			mkdirs(t, d) // the first ten are gone
		}
		b, _ := json.Marshal(indexEntry{Dir: d})
		lines = append(lines, string(b))
	}
	mkdirs(t, filepath.Dir(index))
	if err := os.WriteFile(index, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	last := filepath.Join(base, "new")
	mkdirs(t, last)
	if err := Remember(index, last); err != nil {
		t.Fatal(err)
	}
	dirs, err := readIndex(index)
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) != MaxIndexed-9 || dirs[0] != filepath.Join(base, "s10") || dirs[len(dirs)-1] != last {
		t.Errorf("after a full index: %d entries, first %s, last %s", len(dirs), dirs[0], dirs[len(dirs)-1])
	}
	// All there: the oldest goes.
	for i := range 20 {
		d := filepath.Join(base, fmt.Sprint("more", i))
		mkdirs(t, d)
		if err := Remember(index, d); err != nil {
			t.Fatal(err)
		}
	}
	if dirs, _ = readIndex(index); len(dirs) > MaxIndexed || dirs[len(dirs)-1] != filepath.Join(base, "more19") {
		t.Errorf("the index grew past its bound, or lost the newest: %d entries", len(dirs))
	}
}

// TestIndexConcurrentWriters: applies that start at once each add their
// state; none is lost, even to another writer's rewrite of the full index
// (a writer that waited for the lock of the file replaced starts over).
func TestIndexConcurrentWriters(t *testing.T) {
	base := t.TempDir()
	index := filepath.Join(base, "x", "states")
	var lines []string
	for i := range MaxIndexed {
		d := filepath.Join(base, fmt.Sprint("old", i))
		mkdirs(t, d)
		b, _ := json.Marshal(indexEntry{Dir: d})
		lines = append(lines, string(b))
	}
	mkdirs(t, filepath.Dir(index))
	if err := os.WriteFile(index, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Full: every one of these writers rewrites the index.
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, n)
	var added []string
	for i := range n {
		d := filepath.Join(base, fmt.Sprint("new", i))
		mkdirs(t, d)
		added = append(added, d)
		wg.Add(1)
		go func() { defer wg.Done(); errs <- Remember(index, d) }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := readIndex(index)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, d := range got {
		have[d] = true
	}
	if len(got) > MaxIndexed {
		t.Errorf("%d entries, more than %d", len(got), MaxIndexed)
	}
	for _, d := range added {
		if !have[d] {
			t.Errorf("%s was added but is not in the index (lost to a rewrite)", d)
		}
	}
}

func mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
}

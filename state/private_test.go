package state

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// otherUID is a uid that is not the test's: nobody.
const otherUID = 65534

// TestUnsafeStateRefused: a state directory or database that another user
// owns, or that group or others can write, is refused by Open and by
// OpenReadOnly with ErrUnsafe, saying why and what to do; the database is
// not touched.
func TestUnsafeStateRefused(t *testing.T) {
	if os.Geteuid() == otherUID {
		t.Fatalf("the test runs as uid %d, the uid it gives files of another user", otherUID)
	}
	// made makes a state with one run in a fresh directory.
	made := func(t *testing.T) string {
		dir := filepath.Join(t.TempDir(), ".taoflow")
		s, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		mustCreateRun(t, s, "r1")
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	chown := func(t *testing.T, path string) {
		// Only root may give a file away; these tests run as root (the
		// rig), as does a CI container.
		if err := os.Chown(path, otherUID, otherUID); err != nil {
			t.Fatalf("chown %s to another user (needs root): %v", path, err)
		}
	}
	chmod := func(t *testing.T, path string, m os.FileMode) {
		if err := os.Chmod(path, m); err != nil {
			t.Fatal(err)
		}
	}
	tests := map[string]struct {
		setup func(t *testing.T, dir string)
		path  string // under dir, the one named
		why   string
	}{
		"dir mode 0777":       {func(t *testing.T, dir string) { chmod(t, dir, 0o777) }, "", "writable by group or others (mode 0777)"},
		"dir mode 0770":       {func(t *testing.T, dir string) { chmod(t, dir, 0o770) }, "", "writable by group or others (mode 0770)"},
		"dir of another user": {func(t *testing.T, dir string) { chown(t, dir) }, "", "owned by uid 65534"},
		"db of another user":  {func(t *testing.T, dir string) { chown(t, filepath.Join(dir, dbName)) }, dbName, "owned by uid 65534"},
		"db mode 0666":        {func(t *testing.T, dir string) { chmod(t, filepath.Join(dir, dbName), 0o666) }, dbName, "writable by group or others (mode 0666)"},
		"db a symlink": {func(t *testing.T, dir string) {
			db := filepath.Join(dir, dbName)
			moved := filepath.Join(filepath.Dir(dir), "elsewhere.db")
			if err := os.Rename(db, moved); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(moved, db); err != nil {
				t.Fatal(err)
			}
		}, dbName, "not a regular file"},
	}
	opens := map[string]func(dir string) (*Store, error){
		"Open":         func(dir string) (*Store, error) { return Open(dir) },
		"OpenReadOnly": func(dir string) (*Store, error) { return OpenReadOnly(dir) },
	}
	for name, tt := range tests {
		for oname, open := range opens {
			t.Run(name+"/"+oname, func(t *testing.T) {
				dir := made(t)
				tt.setup(t, dir)
				s, err := open(dir)
				if err == nil {
					s.Close()
					t.Fatal("the state was opened")
				}
				if !errors.Is(err, ErrUnsafe) {
					t.Fatalf("error %v does not wrap ErrUnsafe", err)
				}
				msg := err.Error()
				want := filepath.Join(dir, tt.path)
				for _, w := range []string{want, tt.why, "state directory of your own"} {
					if !strings.Contains(msg, w) {
						t.Errorf("error %q does not say %q", msg, w)
					}
				}
			})
		}
	}
}

// TestPrivateStateOpens: the modes taoflow itself makes, and a
// world-readable (not writable) database, still open.
func TestPrivateStateOpens(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".taoflow")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	mustCreateRun(t, s, "r1")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ro, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	ro.Close()
}

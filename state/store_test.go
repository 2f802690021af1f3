package state

import (
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// TestPermissions checks the modes of everything the store creates under a
// permissive umask, and that an existing world-readable state.db is tightened.
func TestPermissions(t *testing.T) {
	old := syscall.Umask(0o002)
	defer syscall.Umask(old)

	t.Run("new", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "a", ".taoflow")
		s, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		mustCreateRun(t, s, "r1")
		if err := s.AppendLog("r1", "train[lr=0.1]@gpu0", []byte("hello\n")); err != nil {
			t.Fatal(err)
		}
		paths := map[string]string{
			"parent":   filepath.Dir(dir),
			"dir":      dir,
			"db":       filepath.Join(dir, "state.db"),
			"wal":      filepath.Join(dir, "state.db-wal"),
			"shm":      filepath.Join(dir, "state.db-shm"),
			"runs":     filepath.Join(dir, "runs"),
			"run":      filepath.Join(dir, "runs", "r1"),
			"logs":     filepath.Join(dir, "runs", "r1", "logs"),
			"node log": s.LogPath("r1", "train[lr=0.1]@gpu0"),
		}
		got := map[string]fs.FileMode{}
		for name, p := range paths {
			got[name] = mode(t, p)
		}
		want := map[string]fs.FileMode{
			"parent": 0o700, "dir": 0o700, "db": 0o600, "wal": 0o600, "shm": 0o600,
			"runs": 0o700, "run": 0o700, "logs": 0o700, "node log": 0o600,
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("modes (-want +got):\n%s", diff)
		}
	})

	t.Run("existing", func(t *testing.T) {
		dir := t.TempDir()
		// Under this umask t.TempDir is group-writable, which Open refuses
		// (TestUnsafeStateRefused); this case is about the database.
		if err := os.Chmod(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		db := filepath.Join(dir, "state.db")
		if err := os.WriteFile(db, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(db, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if got := mode(t, db); got != 0o600 {
			t.Errorf("state.db mode = %v, want 0600", got)
		}
	})
}

func TestOpenReadOnlyCreatesNothing(t *testing.T) {
	tests := map[string]func(t *testing.T) string{
		"missing dir": func(t *testing.T) string { return filepath.Join(t.TempDir(), "nope") },
		"empty dir":   func(t *testing.T) string { return t.TempDir() },
		"empty db file": func(t *testing.T) string {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "state.db"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return dir
		},
	}
	for name, setup := range tests {
		t.Run(name, func(t *testing.T) {
			dir := setup(t)
			before := listDir(t, dir)
			_, err := OpenReadOnly(dir)
			if err == nil || err.Error() != "no taoflow state in "+dir {
				t.Fatalf("OpenReadOnly error = %v, want %q", err, "no taoflow state in "+dir)
			}
			if diff := cmp.Diff(before, listDir(t, dir)); diff != "" {
				t.Errorf("OpenReadOnly changed the directory (-before +after):\n%s", diff)
			}
		})
	}
}

// listDir lists the names under dir, nil if it does not exist.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		names = append(names, p)
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return names
}

// TestReopen checks that opening twice migrates once and keeps the data, and
// that a read-only store can open the state after the writer has closed it
// (and its -wal and -shm files are gone).
func TestReopen(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	for i := range 2 {
		s, err := Open(dir)
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		if i == 0 {
			mustCreateRun(t, s, "r1")
		}
		var v int
		if err := s.db.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v != len(migrations) {
			t.Errorf("open %d: user_version = %d, want %d", i, v, len(migrations))
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	ro, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	runs, err := ro.Runs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].ID != "r1" {
		t.Errorf("runs after reopen = %+v, want just r1", runs)
	}
}

func TestSchemaVersionChecks(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite", filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec("PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	raw.Close()

	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "newer than this taoflow knows") {
		t.Errorf("Open of a newer schema: error = %v", err)
	}
	if _, err := OpenReadOnly(dir); err == nil || !strings.Contains(err.Error(), "newer than this taoflow knows") {
		t.Errorf("OpenReadOnly of a newer schema: error = %v", err)
	}
}

func TestReadOnlyRejectsWrites(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	w, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	mustCreateRun(t, w, "r1")
	ro, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()

	writes := map[string]func() error{
		"CreateRun":   func() error { return ro.CreateRun(ctx, Run{ID: "r2"}) },
		"UpdateRun":   func() error { return ro.UpdateRun(ctx, "r1", RunUpdate{State: RunFailed}) },
		"SetRunOwner": func() error { return ro.SetRunOwner(ctx, "r1", 1, "h", "") },
		"PutNode":     func() error { return ro.PutNode(ctx, Node{RunID: "r1", ID: "n"}) },
		"RecordIntent": func() error {
			_, err := ro.RecordIntent(ctx, Resource{RunID: "r1", Kind: KindJob, Name: "p"})
			return err
		},
		"MarkCreated": func() error { return ro.MarkCreated(ctx, 1, nil) },
		"MarkDeleted": func() error { return ro.MarkDeleted(ctx, 1) },
		"MarkFailed":  func() error { return ro.MarkFailed(ctx, 1, "x") },
		"AppendEvent": func() error { _, err := ro.AppendEvent(ctx, Event{RunID: "r1"}); return err },
		"AppendLog":   func() error { return ro.AppendLog("r1", "n", []byte("x\n")) },
		"FlushLog":    func() error { return ro.FlushLog("r1", "n") },
	}
	for name, write := range writes {
		t.Run(name, func(t *testing.T) {
			if err := write(); !errors.Is(err, ErrReadOnly) {
				t.Errorf("error = %v, want ErrReadOnly", err)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "runs")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("read-only AppendLog created runs/: %v", err)
	}
}

func TestNotFound(t *testing.T) {
	ctx := t.Context()
	s := openTest(t)
	empty := map[string]func() error{
		"LatestRun": func() error { _, err := s.LatestRun(ctx); return err },
	}
	for name, f := range empty {
		t.Run("empty "+name, func(t *testing.T) {
			if err := f(); !errors.Is(err, ErrNotFound) {
				t.Errorf("error = %v, want ErrNotFound", err)
			}
		})
	}
	mustCreateRun(t, s, "r1")
	tests := map[string]func() error{
		"Run":         func() error { _, err := s.Run(ctx, "nope"); return err },
		"UpdateRun":   func() error { return s.UpdateRun(ctx, "nope", RunUpdate{State: RunFailed}) },
		"SetRunOwner": func() error { return s.SetRunOwner(ctx, "nope", 1, "h", "") },
		"Node":        func() error { _, err := s.Node(ctx, "r1", "nope"); return err },
		"Resource":    func() error { _, err := s.Resource(ctx, 42); return err },
		"MarkCreated": func() error { return s.MarkCreated(ctx, 42, nil) },
		"MarkDeleted": func() error { return s.MarkDeleted(ctx, 42) },
		"MarkFailed":  func() error { return s.MarkFailed(ctx, 42, "x") },
		"OpenLog":     func() error { _, err := s.OpenLog("r1", "nope"); return err },
	}
	for name, f := range tests {
		t.Run(name, func(t *testing.T) {
			if err := f(); !errors.Is(err, ErrNotFound) {
				t.Errorf("error = %v, want ErrNotFound", err)
			}
		})
	}
}

// TestForeignKeys checks that records of a run that does not exist are
// refused, which proves foreign_keys is on.
func TestForeignKeys(t *testing.T) {
	ctx := t.Context()
	s := openTest(t)
	tests := map[string]func() error{
		"PutNode":     func() error { return s.PutNode(ctx, Node{RunID: "ghost", ID: "n"}) },
		"AppendEvent": func() error { _, err := s.AppendEvent(ctx, Event{RunID: "ghost"}); return err },
		"RecordIntent": func() error {
			_, err := s.RecordIntent(ctx, Resource{RunID: "ghost", Kind: KindJob, Name: "p"})
			return err
		},
		"AppendLog": func() error { return s.AppendLog("ghost", "n", []byte("x\n")) },
	}
	for name, f := range tests {
		t.Run(name, func(t *testing.T) {
			if err := f(); err == nil || !strings.Contains(err.Error(), "FOREIGN KEY") {
				t.Errorf("error = %v, want a FOREIGN KEY constraint error", err)
			}
		})
	}
}

func TestPragmas(t *testing.T) {
	s := openTest(t)
	for pragma, want := range map[string]string{
		"journal_mode": "wal",
		"busy_timeout": "5000",
		"foreign_keys": "1",
		"synchronous":  "1", // NORMAL
	} {
		var got string
		if err := s.db.QueryRow("PRAGMA " + pragma).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("PRAGMA %s = %s, want %s", pragma, got, want)
		}
	}
}

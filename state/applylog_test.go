package state

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestOpenApplyLog: the apply log is dir/runs/<run>/apply.log, made
// private whatever the umask (file 0600, run directory 0700), appended to
// by each open; a run id that is no file name is mapped as node logs'
// are; a state directory others can write is refused; a symlink planted
// as the log is not followed.
func TestOpenApplyLog(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), ".taoflow")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	for _, line := range []string{"one\n", "two\n"} {
		f, err := OpenApplyLog(dir, "run-1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(line); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	path := ApplyLogPath(dir, "run-1")
	if want := filepath.Join(dir, "runs", "run-1", "apply.log"); path != want {
		t.Errorf("ApplyLogPath = %s, want %s", path, want)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "one\ntwo\n" {
		t.Errorf("apply.log holds %q (%v), want both lines appended", b, err)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700 | os.ModeDir} {
		if fi, err := os.Stat(p); err != nil || fi.Mode() != want {
			t.Errorf("%s: mode %v (%v), want %v", p, fi.Mode(), err, want)
		}
	}

	hostile := "../../x/" + strings.Repeat("a", 300)
	if p := ApplyLogPath(dir, hostile); !strings.HasPrefix(p, filepath.Join(dir, "runs")+"/") || strings.Count(p, "/") != strings.Count(path, "/") {
		t.Errorf("ApplyLogPath(%q) = %s: outside dir/runs/<one name>/", hostile, p)
	}

	// A symlink where the log goes is refused, not followed.
	target := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.MkdirAll(filepath.Dir(ApplyLogPath(dir, "run-2")), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, ApplyLogPath(dir, "run-2")); err != nil {
		t.Fatal(err)
	}
	if f, err := OpenApplyLog(dir, "run-2"); err == nil {
		f.Close()
		t.Error("OpenApplyLog followed a symlink planted as the log")
	}
	if _, err := os.Stat(target); err == nil {
		t.Error("the symlink's target was created")
	}

	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenApplyLog(dir, "run-3"); !errors.Is(err, ErrUnsafe) {
		t.Errorf("OpenApplyLog in a state others can write: %v, want ErrUnsafe", err)
	}
}

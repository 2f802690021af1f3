package state

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestStateIgnoredByGit: Open writes a .gitignore of "*" into a state
// directory it makes, and into an existing one of taoflow's own entries
// that lacks it (made by an older taoflow, logs and all), so that a real
// git stops seeing the state; a directory that holds anything else (the
// state put in a project, --state .) or a .gitignore of its own is left
// as it is.
func TestStateIgnoredByGit(t *testing.T) {
	repo := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	git("init", "-q")
	open := func(dir string) {
		t.Helper()
		s, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		mustCreateRun(t, s, "r1")
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	body := func(dir string) string {
		b, err := os.ReadFile(filepath.Join(dir, ".gitignore"))
		if err != nil {
			return "(none)"
		}
		return string(b)
	}

	// A new state directory.
	fresh := filepath.Join(repo, ".taoflow")
	open(fresh)
	if b := body(fresh); b != gitignoreBody || !strings.HasSuffix(b, "\n*\n") {
		t.Fatalf(".gitignore of a new state: %q", b)
	}

	// One made before: state.db, WAL files, run logs, no .gitignore.
	old := filepath.Join(repo, "old-state")
	if err := os.MkdirAll(filepath.Join(old, "runs", "r0", "logs"), 0o700); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if err := os.WriteFile(filepath.Join(old, "runs", "r0", "logs", strings.Repeat("n", i+1)+".log"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if st := git("status", "--porcelain", "--untracked-files=all"); !strings.Contains(st, "old-state/runs/") {
		t.Fatalf("git does not see the old state before: %q", st)
	}
	open(old)
	if b := body(old); b != gitignoreBody {
		t.Fatalf(".gitignore of an old state: %q", b)
	}
	if st := git("status", "--porcelain", "--untracked-files=all", "--ignored=no"); st != "" {
		t.Errorf("git still sees the state: %q", st)
	}

	// A project directory used as the state: left alone.
	proj := filepath.Join(t.TempDir(), "proj")
	if err := os.MkdirAll(proj, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, "train.py"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	open(proj)
	if b := body(proj); b != "(none)" {
		t.Errorf("a project's directory got a .gitignore: %q", b)
	}

	// A .gitignore of the user's own is kept.
	own := filepath.Join(t.TempDir(), "own")
	if err := os.MkdirAll(own, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(own, ".gitignore"), []byte("state.db\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	open(own)
	if b := body(own); b != "state.db\n" {
		t.Errorf("the user's .gitignore became %q", b)
	}
}

package provenance

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func gitT(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestGitStateCleanDirtyNoRepo(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()

	g := GitState(ctx, dir)
	if g.Repo || g.Note != "not in a git repository" {
		t.Fatalf("outside a repo: %+v", g)
	}

	gitT(t, dir, "init", "-q", "-b", "main")
	write(t, filepath.Join(dir, "plan.yaml"), "a: 1\n")
	g = GitState(ctx, dir)
	if !g.Repo || g.Commit != "" || g.Note != "no commit yet" || !g.Dirty {
		t.Fatalf("no commit yet: %+v", g)
	}

	gitT(t, dir, "add", "plan.yaml")
	gitT(t, dir, "commit", "-qm", "one")
	gitT(t, dir, "remote", "add", "origin", "https://bob:ghp_tokenvalue123@github.com/lab/exp.git")
	head := gitT(t, dir, "rev-parse", "HEAD")
	g = GitState(ctx, filepath.Join(dir))
	want := &Git{Repo: true, Root: gitT(t, dir, "rev-parse", "--show-toplevel"), Commit: head, Branch: "main", Remote: "https://github.com/lab/exp.git"}
	if diff := cmp.Diff(want, g); diff != "" {
		t.Fatalf("clean (-want +got):\n%s", diff)
	}

	write(t, filepath.Join(dir, "plan.yaml"), "a: 2\n")
	write(t, filepath.Join(dir, "notes.txt"), "x\n")
	g = GitState(ctx, dir)
	if !g.Dirty || g.Commit != head {
		t.Fatalf("dirty: %+v", g)
	}
	if diff := cmp.Diff([]string{"plan.yaml", "notes.txt"}, g.Changed); diff != "" {
		t.Errorf("changed (-want +got):\n%s", diff)
	}
	if len(g.DiffHash) != 64 {
		t.Fatalf("diff hash %q", g.DiffHash)
	}
	first := g.DiffHash
	write(t, filepath.Join(dir, "plan.yaml"), "a: 3\n")
	if g = GitState(ctx, dir); g.DiffHash == first {
		t.Errorf("a different diff kept hash %s", first)
	}
	write(t, filepath.Join(dir, "plan.yaml"), "a: 2\n")
	if g = GitState(ctx, dir); g.DiffHash != first {
		t.Errorf("the same diff hashed %s, then %s", first, g.DiffHash)
	}
}

func TestCollect(t *testing.T) {
	dir := t.TempDir()
	plan := filepath.Join(dir, "p.yaml")
	write(t, plan, "x")
	info := Collect(t.Context(), plan, "v9")
	host, _ := os.Hostname()
	if info.PlanPath != plan || info.Version != "v9" || info.Host != host || info.User == "" || info.Git == nil || info.Git.Repo {
		t.Fatalf("%+v", info)
	}
}

func TestCleanURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:tok3n@github.com/a/b.git":    "https://github.com/a/b.git",
		"https://tok3n@github.com/a/b.git":         "https://github.com/a/b.git",
		"https://github.com/a/b.git?token=tok3n#x": "https://github.com/a/b.git",
		"git@github.com:a/b.git":                   "git@github.com:a/b.git",
		"git:tok3n@github.com:a/b.git":             "git@github.com:a/b.git",
		"ssh://git@host:22/a/b.git":                "ssh://host:22/a/b.git",
		"/srv/git/b.git":                           "/srv/git/b.git",
		"https://u:p%zz@host/a":                    "https://host/a",
	} {
		if got := CleanURL(in); got != want {
			t.Errorf("CleanURL(%q) = %q, want %q", in, got, want)
		}
	}
}

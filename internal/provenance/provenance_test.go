package provenance

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func gitT(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func write(t testing.TB, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestGitStateCleanDirtyNoRepo(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()

	g := GitState(ctx, dir, Options{})
	if g.Repo || g.Note != "not in a git repository" {
		t.Fatalf("outside a repo: %+v", g)
	}

	gitT(t, dir, "init", "-q", "-b", "main")
	write(t, filepath.Join(dir, "plan.yaml"), "a: 1\n")
	g = GitState(ctx, dir, Options{})
	if !g.Repo || g.Commit != "" || g.Note != "no commit yet" || !g.Dirty {
		t.Fatalf("no commit yet: %+v", g)
	}

	gitT(t, dir, "add", "plan.yaml")
	gitT(t, dir, "commit", "-qm", "one")
	gitT(t, dir, "remote", "add", "origin", "https://bob:ghp_tokenvalue123@github.com/lab/exp.git")
	head := gitT(t, dir, "rev-parse", "HEAD")
	g = GitState(ctx, filepath.Join(dir), Options{})
	want := &Git{Repo: true, Root: gitT(t, dir, "rev-parse", "--show-toplevel"), Commit: head, Branch: "main", Remote: "https://github.com/lab/exp.git"}
	if diff := cmp.Diff(want, g); diff != "" {
		t.Fatalf("clean (-want +got):\n%s", diff)
	}

	write(t, filepath.Join(dir, "plan.yaml"), "a: 2\n")
	write(t, filepath.Join(dir, "notes.txt"), "x\n")
	g = GitState(ctx, dir, Options{})
	if !g.Dirty || g.Commit != head {
		t.Fatalf("dirty: %+v", g)
	}
	if diff := cmp.Diff([]string{"plan.yaml", "notes.txt"}, g.Changed); diff != "" || g.ChangedCount != 2 || g.ChangedDigest != listDigest(g.Changed) {
		t.Errorf("changed (-want +got):\n%s\ncount %d, digest %s", diff, g.ChangedCount, g.ChangedDigest)
	}
	if len(g.DiffHash) != 64 {
		t.Fatalf("diff hash %q", g.DiffHash)
	}
	first := g.DiffHash
	write(t, filepath.Join(dir, "plan.yaml"), "a: 3\n")
	if g = GitState(ctx, dir, Options{}); g.DiffHash == first {
		t.Errorf("a different diff kept hash %s", first)
	}
	write(t, filepath.Join(dir, "plan.yaml"), "a: 2\n")
	if g = GitState(ctx, dir, Options{}); g.DiffHash != first {
		t.Errorf("the same diff hashed %s, then %s", first, g.DiffHash)
	}
}

func TestCollect(t *testing.T) {
	dir := t.TempDir()
	plan := filepath.Join(dir, "p.yaml")
	write(t, plan, "x")
	info := Collect(t.Context(), plan, "v9", Options{})
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

// ManyUntracked is how many untracked files the bounded-provenance test
// makes; BenchmarkGitState50k makes BenchUntracked.
const (
	ManyUntracked  = 3000
	BenchUntracked = 50000
)

// busyRepo makes the repository of a real experiment: one commit, n
// untracked checkpoint files (some under a deep path), a .gitignore'd
// directory of outputs, and a prior taoflow state directory (.taoflow,
// made before it held a .gitignore) full of logs. It returns the repo.
func busyRepo(tb testing.TB, n int) string {
	tb.Helper()
	dir := tb.TempDir()
	gitT(tb, dir, "init", "-q", "-b", "main")
	write(tb, filepath.Join(dir, "plan.yaml"), "a: 1\n")
	write(tb, filepath.Join(dir, ".gitignore"), "outputs/\n")
	gitT(tb, dir, "add", "plan.yaml", ".gitignore")
	gitT(tb, dir, "commit", "-qm", "one")
	mk := func(sub string, count int, name string) {
		d := filepath.Join(dir, sub)
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
		for i := range count {
			write(tb, filepath.Join(d, fmt.Sprintf(name, i)), "x")
		}
	}
	mk("ckpt/lr=0.01/deep/er", n, "epoch_%05d.pth")
	mk("outputs", 500, "o%d.bin")
	mk(".taoflow/runs/sweep-1/logs", 800, "train@cell-%d.log")
	write(tb, filepath.Join(dir, ".taoflow", "state.db"), "")
	return dir
}

// TestGitStateBounded: thousands of untracked files and a prior state
// directory of logs give a provenance of MaxChanged names, the count and
// the digest of the whole list, without the state directory or what
// .gitignore ignores, and a small manifest entry.
func TestGitStateBounded(t *testing.T) {
	dir := busyRepo(t, ManyUntracked)
	info := Collect(t.Context(), filepath.Join(dir, "plan.yaml"), "v1", Options{Exclude: []string{filepath.Join(dir, ".taoflow")}})
	g := info.Git
	if !g.Repo || !g.Dirty || g.Note != "" {
		t.Fatalf("%+v", g)
	}
	if g.ChangedCount != ManyUntracked || len(g.Changed) != MaxChanged {
		t.Fatalf("changed: count %d, %d names; want %d, %d", g.ChangedCount, len(g.Changed), ManyUntracked, MaxChanged)
	}
	// The digest is of git's whole list, less .taoflow and ignored files.
	all := strings.Split(strings.TrimRight(gitT(t, dir, "ls-files", "-z", "--others", "--exclude-standard", "--", ".", ":(exclude).taoflow"), "\x00"), "\x00")
	if len(all) != ManyUntracked {
		t.Fatalf("git lists %d untracked files", len(all))
	}
	if g.ChangedDigest != listDigest(all) {
		t.Errorf("digest %s is not that of the whole list", g.ChangedDigest)
	}
	for _, p := range g.Changed {
		if strings.HasPrefix(p, ".taoflow") || strings.HasPrefix(p, "outputs") {
			t.Errorf("changed lists %s", p)
		}
	}
	b, err := json.Marshal(info.Shared(LevelMinimal))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 8<<10 {
		t.Errorf("the manifest's provenance is %d bytes:\n%s", len(b), b)
	}

	// Without the exclusion (an older taoflow, a state elsewhere), the
	// logs are counted: the option is what leaves them out.
	if g := GitState(t.Context(), dir, Options{}); g.ChangedCount != ManyUntracked+800+1 {
		t.Errorf("without Exclude: %d changed", g.ChangedCount)
	}
}

// fakeGit puts a git on PATH that runs body (sh) for the subcommands
// matched by the case pattern when, and the real git for the others.
func fakeGit(t *testing.T, when, body string) {
	t.Helper()
	real, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	// git -C DIR -c K=V -c K=V SUB ...: the subcommand is the 7th word.
	script := "#!/bin/sh\ncase \"$7\" in " + when + ") " + body + " ;; esac\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// TestGitStateGitFails: a git that errors, or hangs (with a child that
// holds its output open), gives a provenance that says so, within the
// timeout; Collect never fails. (The timeout is shared by every git
// command, so it leaves the ones before a hanging one room on a busy
// machine.)
func TestGitStateGitFails(t *testing.T) {
	dir := busyRepo(t, 10)
	for name, c := range map[string]struct {
		when, body string
		repo       bool
		note       string
	}{
		"every git errors": {"*", "echo 'fatal: disk on fire' >&2; exit 128", false, "git rev-parse: fatal: disk on fire"},
		"every git hangs":  {"*", "sleep 300", false, "git rev-parse: git did not answer within 3s (killed)"},
		"status errors":    {"status", "echo 'fatal: index file corrupt' >&2; exit 128", true, "changed files unknown: git status: fatal: index file corrupt"},
		"status hangs":     {"status", "sleep 300 & wait", true, "changed files unknown: git status: git did not answer within 3s (killed)"},
		"diff hangs":       {"diff", "sleep 300", true, "diff hash unknown: git diff: git did not answer within 3s (killed)"},
	} {
		t.Run(name, func(t *testing.T) {
			fakeGit(t, c.when, c.body)
			write(t, filepath.Join(dir, "plan.yaml"), "a: 2\n") // dirty: diff runs
			info := Collect(t.Context(), filepath.Join(dir, "plan.yaml"), "v1", Options{Timeout: 3 * time.Second})
			g := info.Git
			if g.Repo != c.repo || g.Note != c.note {
				t.Errorf("repo %v, note %q; want %v, %q", g.Repo, g.Note, c.repo, c.note)
			}
		})
	}
}

// TestShared: the minimal view leaves out the user, the host, absolute
// paths (the plan's path is the one in the repository); full keeps them;
// a long list recorded before the bound is bounded in both.
func TestShared(t *testing.T) {
	long := make([]string, 3000)
	for i := range long {
		long[i] = fmt.Sprintf("f%d", i)
	}
	in := &Info{Version: "v1", PlanPath: "/home/alice/exp/cfg/plan.yaml", User: "alice", Host: "lab-7",
		Git: &Git{Repo: true, Root: "/home/alice/exp", Commit: "abc", Dirty: true, Changed: long, Remote: "/srv/git/exp.git"}}
	min := in.Shared(LevelMinimal)
	want := &Info{Version: "v1", PlanPath: "cfg/plan.yaml", Level: LevelMinimal,
		Git: &Git{Repo: true, Commit: "abc", Dirty: true, Changed: long[:MaxChanged], ChangedCount: 3000, ChangedDigest: listDigest(long)}}
	if diff := cmp.Diff(want, min); diff != "" {
		t.Errorf("minimal (-want +got):\n%s", diff)
	}
	full := in.Shared(LevelFull)
	if full.User != "alice" || full.Host != "lab-7" || full.PlanPath != in.PlanPath || full.Git.Root != in.Git.Root || full.Git.Remote != in.Git.Remote || len(full.Git.Changed) != MaxChanged || full.Level != "" {
		t.Errorf("full: %+v %+v", full, full.Git)
	}
	if len(in.Git.Changed) != 3000 || in.User != "alice" {
		t.Error("Shared changed its receiver")
	}
	out := (&Info{PlanPath: "/tmp/x/plan.yaml", User: "u", Git: &Git{Note: "not in a git repository"}}).Shared("")
	if out.PlanPath != "plan.yaml" || out.User != "" {
		t.Errorf("outside a repository: %+v", out)
	}
}

// BenchmarkGitState50k: the provenance of a repository with 50,000
// untracked files (and a prior state directory of logs). Reports the
// process's and git's peak resident memory.
func BenchmarkGitState50k(b *testing.B) {
	dir := busyRepo(b, BenchUntracked)
	opts := Options{Exclude: []string{filepath.Join(dir, ".taoflow")}}
	b.ResetTimer()
	var g *Git
	for b.Loop() {
		g = GitState(b.Context(), dir, opts)
	}
	b.StopTimer()
	if g.ChangedCount != BenchUntracked || g.Note != "" {
		b.Fatalf("%d changed, note %q", g.ChangedCount, g.Note)
	}
	var self, kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	b.ReportMetric(float64(self.Maxrss)/1024, "maxRSS-MB")
	b.ReportMetric(float64(kids.Maxrss)/1024, "git-maxRSS-MB")
}

package steps

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/taoflow/taoflow/plan"
)

// gitRepo makes a work tree at dir as an experiment repository holds
// one: tracked files (one of them deleted since), untracked files, a
// .gitignore'd directory of old results, a prior taoflow state directory
// without a .gitignore, a nested repository git does not track, and the
// repository's own .git.
func gitRepo(t *testing.T, dir string) {
	t.Helper()
	git := func(dir string, args ...string) {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	writeTree(t, dir, map[string]string{
		"train.py":                   "print(1)\n",
		"specs/spec.yaml":            "lr: 1\n",
		"gone.txt":                   "tracked, then deleted\n",
		".gitignore":                 "results/\n*.ckpt\n",
		"notes.md":                   "untracked\n",
		"specs/new.yaml":             "untracked too\n",
		"model.ckpt":                 "ignored by pattern",
		"results/old/a.bin":          "old results",
		".taoflow/state.db":          "",
		".taoflow/runs/r/logs/n.log": "log",
		"vendor/lib/x.py":            "nested repo file",
	})
	git(dir, "init", "-q", "-b", "main")
	git(dir, "add", "train.py", "specs/spec.yaml", "gone.txt", ".gitignore")
	git(dir, "commit", "-qm", "one")
	git(filepath.Join(dir, "vendor"), "init", "-q")
	if err := os.Remove(filepath.Join(dir, "gone.txt")); err != nil {
		t.Fatal(err)
	}
}

// files lists the regular files under dir, relative, sorted.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// TestSendGitWorkTree: send of a directory in a git work tree copies what
// git would commit (tracked files still there, untracked ones no
// .gitignore rule ignores, a nested repository's files but not its .git)
// and never .git or taoflow's state directory; a second send finds the
// same tree and copies nothing; a directory the repository ignores is
// sent whole; SendSize counts exactly what is sent.
func TestSendGitWorkTree(t *testing.T) {
	x := xferRigs(t)["local"](t)
	gitRepo(t, x.planDir)
	x.steps.cfg.StateDir = filepath.Join(x.planDir, ".taoflow")
	ctx := context.Background()

	w := with("from", ".", "to", "~/exp")
	log, err := x.do(ctx, plan.KindSend, w)
	if err != nil {
		t.Fatalf("send: %v\n%s", err, log)
	}
	want := []string{".gitignore", "notes.md", "specs/new.yaml", "specs/spec.yaml", "train.py", "vendor/lib/x.py"}
	if diff := cmp.Diff(want, files(t, filepath.Join(x.home, "exp"))); diff != "" {
		t.Errorf("sent (-want +got):\n%s", diff)
	}
	if !strings.Contains(log.String(), "(6 files, ") || !strings.Contains(log.String(), "git work tree: tracked and not-ignored files") {
		t.Errorf("log:\n%s", log)
	}
	req := Request{NodeID: "send@a", Step: &plan.Step{ID: "send", Uses: plan.KindSend}, Instance: x.inst, With: w}
	size, err := x.steps.SendSize(ctx, req)
	if err != nil || size.Files != 6 || !size.Repo || size.Bytes != int64(len("results/\n*.ckpt\n")+len("untracked\n")+len("untracked too\n")+len("lr: 1\n")+len("print(1)\n")+len("nested repo file")) {
		t.Errorf("SendSize: %+v, %v", size, err)
	}

	log, err = x.do(ctx, plan.KindSend, w)
	if err != nil || !strings.Contains(log.String(), "nothing to send") {
		t.Errorf("a second send of the same work tree: %v\n%s", err, log)
	}

	// A directory the repository ignores is data: sent whole.
	log, err = x.do(ctx, plan.KindSend, with("from", "results", "to", "~/results"))
	if err != nil {
		t.Fatalf("send of an ignored directory: %v\n%s", err, log)
	}
	if diff := cmp.Diff([]string{"old/a.bin"}, files(t, filepath.Join(x.home, "results"))); diff != "" {
		t.Errorf("sent (-want +got):\n%s", diff)
	}
}

// TestSendNoRepo: outside a git work tree every file is sent, but never a
// .git (a repository git cannot read here) or the state directory.
func TestSendNoRepo(t *testing.T) {
	x := xferRigs(t)["local"](t)
	writeTree(t, x.planDir, map[string]string{"a.txt": "a", "out/b.bin": "b", ".git/HEAD": "ref: x", "st/state.db": ""})
	x.steps.cfg.StateDir = filepath.Join(x.planDir, "st")
	if log, err := x.do(context.Background(), plan.KindSend, with("from", ".", "to", "~/exp")); err != nil {
		t.Fatalf("send: %v\n%s", err, log)
	}
	if diff := cmp.Diff([]string{"a.txt", "out/b.bin"}, files(t, filepath.Join(x.home, "exp"))); diff != "" {
		t.Errorf("sent (-want +got):\n%s", diff)
	}
}

// TestSendGitFails: in a work tree where git fails to list the files, the
// send fails and says why, and nothing reaches the instance (rather than
// a copy with .git and every ignored file in it).
func TestSendGitFails(t *testing.T) {
	x := xferRigs(t)["local"](t)
	gitRepo(t, x.planDir)
	real, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	// git -C DIR -c K=V -c K=V SUB: the subcommand is the 7th word.
	script := "#!/bin/sh\ncase \"$7\" in ls-files) echo 'fatal: index file corrupt' >&2; exit 128 ;; esac\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	log, err := x.do(context.Background(), plan.KindSend, with("from", ".", "to", "~/exp"))
	if err == nil || !strings.Contains(err.Error(), "is in a git work tree, but listing its files failed: git ls-files: fatal: index file corrupt") {
		t.Fatalf("send: %v\n%s", err, log)
	}
	if _, err := os.Stat(filepath.Join(x.home, "exp")); !os.IsNotExist(err) {
		t.Errorf("the destination exists: %v", err)
	}
}

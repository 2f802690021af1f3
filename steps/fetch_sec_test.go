package steps

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/taoflow/taoflow/plan"
)

// TestFetchRefusesWhatItWouldDelete (issue 22 item 2): fetch replaces its
// destination, so when the step runs (whatever validate saw) a to that is
// the plan's directory, above it, the home directory or the state
// directory, inside the state directory, or that climbs with "..", is
// refused before anything is copied, and everything is left as it was.
func TestFetchRefusesWhatItWouldDelete(t *testing.T) {
	tests := map[string]struct {
		to   func(x xfer, home, state string) string
		want string
	}{
		"dot dot":             {func(x xfer, _, _ string) string { return ".." }, `holds a ".." segment`},
		"dot dot inside":      {func(x xfer, _, _ string) string { return "results/../.." }, `holds a ".." segment`},
		"the plan's dir":      {func(x xfer, _, _ string) string { return x.planDir }, "is the plan's directory"},
		"above the plan":      {func(x xfer, _, _ string) string { return filepath.Dir(x.planDir) }, "is above the plan's directory"},
		"root":                {func(x xfer, _, _ string) string { return "/" }, "is above the plan's directory"},
		"home":                {func(_ xfer, home, _ string) string { return home }, "is your home directory"},
		"above home":          {func(_ xfer, home, _ string) string { return filepath.Dir(home) }, "is above"},
		"the state dir":       {func(_ xfer, _, state string) string { return state }, "is taoflow's state directory"},
		"inside the state":    {func(_ xfer, _, state string) string { return filepath.Join(state, "runs") }, "is inside taoflow's state directory"},
		"through a link up":   {func(x xfer, _, _ string) string { return "up/" + filepath.Base(x.planDir) }, "is the plan's directory"},
		"the state, its link": {func(x xfer, _, _ string) string { return "st/runs" }, "is inside taoflow's state directory"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			base := t.TempDir()
			home := filepath.Join(base, "home")
			t.Setenv("HOME", home)
			x := xferRigs(t)["local"](t)
			state := filepath.Join(base, "state")
			x.steps.cfg.StateDir = state
			writeTree(t, x.planDir, map[string]string{"plan.yaml": "taoflow: 1\n"})
			writeTree(t, home, map[string]string{".bashrc": "mine\n"})
			writeTree(t, state, map[string]string{"state.db": "db"})
			writeTree(t, x.home, map[string]string{"results/a": "a"})
			if err := os.Symlink(filepath.Dir(x.planDir), filepath.Join(x.planDir, "up")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(state, filepath.Join(x.planDir, "st")); err != nil {
				t.Fatal(err)
			}
			log, err := x.do(context.Background(), plan.KindFetch, with("from", "~/results", "to", tt.to(x, home, state), "replace", true))
			if err == nil {
				t.Fatalf("fetch to %s: no error\n%s", tt.to(x, home, state), log)
			}
			if e := stepError(t, err); e.Class != ClassInvalidConfig || !strings.Contains(e.Msg, tt.want) {
				t.Errorf("error %q; want class %q with %q", err, ClassInvalidConfig, tt.want)
			}
			for _, f := range []string{filepath.Join(x.planDir, "plan.yaml"), filepath.Join(home, ".bashrc"), filepath.Join(state, "state.db")} {
				if _, err := os.Stat(f); err != nil {
					t.Errorf("%s after the refused fetch: %v", f, err)
				}
			}
		})
	}
}

// TestFetchReplacesOnlyItsOwn (issue 22 item 2): what stands at to is
// replaced only when a fetch wrote it (its taoflow-run.json) or it is an
// empty directory; a directory of the user's, a file or a symlink needs
// replace: true, and is left as it was without it.
func TestFetchReplacesOnlyItsOwn(t *testing.T) {
	x := xferRigs(t)["local"](t)
	ctx := context.Background()
	writeTree(t, x.home, map[string]string{"results/a": "new"})
	writeTree(t, x.planDir, map[string]string{"mine/notes.txt": "mine", "file": "a file"})
	if err := os.Symlink("mine", filepath.Join(x.planDir, "link")); err != nil {
		t.Fatal(err)
	}
	for to, what := range map[string]string{"mine": "no fetch wrote", "file": "is a file", "link": "is a symlink"} {
		log, err := x.do(ctx, plan.KindFetch, with("from", "~/results", "to", to))
		if err == nil {
			t.Fatalf("fetch to %s: no error\n%s", to, log)
		}
		if e := stepError(t, err); e.Class != ClassInvalidConfig || !strings.Contains(e.Msg, what) || !strings.Contains(e.Msg, "replace: true") {
			t.Errorf("fetch to %s: %q; want %q and the replace: true advice", to, err, what)
		}
		if strings.Contains(log.String(), "fetching") {
			t.Errorf("fetch to %s copied before refusing:\n%s", to, log)
		}
	}
	if b, err := os.ReadFile(filepath.Join(x.planDir, "mine", "notes.txt")); err != nil || string(b) != "mine" {
		t.Errorf("mine/notes.txt after the refused fetch: %q, %v", b, err)
	}
	if left, _ := filepath.Glob(filepath.Join(x.planDir, ".taoflow-fetch-*")); len(left) > 0 {
		t.Errorf("temporary directories left: %v", left)
	}

	// An empty directory, and then the fetch's own copy, are replaced.
	if err := os.Mkdir(filepath.Join(x.planDir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if log, err := x.do(ctx, plan.KindFetch, with("from", "~/results", "to", "empty")); err != nil {
		t.Fatalf("fetch into an empty directory: %v\n%s", err, log)
	}
	writeTree(t, x.home, map[string]string{"results/a": "newer"})
	if log, err := x.do(ctx, plan.KindFetch, with("from", "~/results", "to", "empty")); err != nil {
		t.Fatalf("fetch over its own copy: %v\n%s", err, log)
	}
	if b, _ := os.ReadFile(filepath.Join(x.planDir, "empty", "a")); string(b) != "newer" {
		t.Errorf("the second fetch's a: %q", b)
	}

	// replace: true replaces the user's directory.
	if log, err := x.do(ctx, plan.KindFetch, with("from", "~/results", "to", "mine", "replace", true)); err != nil {
		t.Fatalf("fetch with replace: true: %v\n%s", err, log)
	}
	if _, err := os.Stat(filepath.Join(x.planDir, "mine", "notes.txt")); err == nil {
		t.Errorf("replace: true kept the old notes.txt")
	}
}

// TestFetchPermissionsAndLinks (issue 22 item 8): fetched directories and
// files get their archived modes less this process's umask (a 0777
// directory on the instance is not 0777 here under umask 027), and a
// symlink that points outside the fetched tree (absolute, climbing above
// it, or through another link) is left out and listed in the manifest,
// while links inside are kept; a second fetch of the same tree copies
// nothing.
func TestFetchPermissionsAndLinks(t *testing.T) {
	old := syscall.Umask(0o027)
	t.Cleanup(func() { syscall.Umask(old) })
	x := xferRigs(t)["local"](t)
	src := filepath.Join(x.home, "results")
	writeTree(t, src, map[string]string{"open/f.txt": "f", "sub/deep/g.txt": "g"})
	for p, mode := range map[string]fs.FileMode{src: 0o777, filepath.Join(src, "open"): 0o777, filepath.Join(src, "sub"): 0o755} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(src, "open", "f.txt"), 0o666); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"in":             "open/f.txt",
		"sub/deep/up":    "../../open",
		"abs":            "/etc/passwd",
		"sub/out":        "../..",
		"here":           ".",
		"sub/via":        "../here/..",    // through "here" (.) and then above the tree
		"sub/deep/chain": "../../outlink", // through a link that leaves
		"outlink":        "sub/out/x",
		"loop":           "loop2",
		"loop2":          "loop",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(src, name)); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	log, err := x.do(ctx, plan.KindFetch, with("from", "~/results", "to", "out"))
	if err != nil {
		t.Fatalf("fetch: %v\n%s", err, log)
	}
	out := filepath.Join(x.planDir, "out")
	for name, want := range map[string]fs.FileMode{"open": 0o750, "sub": 0o750, "open/f.txt": 0o640} {
		fi, err := os.Stat(filepath.Join(out, name))
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, %v; want mode %v (the archived mode less the umask 027)", name, fi.Mode().Perm(), err, want)
		}
	}
	kept := []string{"in", "sub/deep/up", "here"}
	gone := []string{"abs", "sub/out", "sub/via", "sub/deep/chain", "outlink", "loop", "loop2"}
	for _, name := range kept {
		if got, err := os.Readlink(filepath.Join(out, name)); err != nil || got != links[name] {
			t.Errorf("%s: %q, %v; want the link inside the tree kept", name, got, err)
		}
	}
	for _, name := range gone {
		if _, err := os.Lstat(filepath.Join(out, name)); err == nil {
			t.Errorf("%s (-> %s) was fetched: it leads outside the fetched tree", name, links[name])
		}
	}
	var m Manifest
	b, err := os.ReadFile(filepath.Join(out, manifestName))
	if err != nil || json.Unmarshal(b, &m) != nil {
		t.Fatalf("manifest: %v\n%s", err, b)
	}
	if len(m.LinksLeftOut) != len(gone) || m.LinksLeftOut["abs"] != "/etc/passwd" {
		t.Errorf("manifest links_left_out: %v; want %v", m.LinksLeftOut, gone)
	}
	if !strings.Contains(log.String(), "left out 7 symlinks pointing outside") {
		t.Errorf("the log does not say which links were left out:\n%s", log)
	}
	log, err = x.do(ctx, plan.KindFetch, with("from", "~/results", "to", "out"))
	if err != nil || !strings.Contains(log.String(), "nothing to fetch") {
		t.Errorf("a second fetch of the same tree: %v\n%s", err, log)
	}
}

package local

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/taoflow/taoflow/platform"
)

func newInstance(t *testing.T) (*Local, platform.Instance) {
	t.Helper()
	l := New(filepath.Join(t.TempDir(), "sandboxes"))
	inst, err := l.Create(t.Context(), "run1", platform.Spec{Name: "gpu-a"})
	if err != nil {
		t.Fatal(err)
	}
	return l, inst
}

func TestCreate(t *testing.T) {
	l, inst := newInstance(t)
	want := platform.Instance{
		Name:    "gpu-a",
		Ref:     filepath.Join(l.root, "run1", "gpu-a"),
		Created: true,
		Attrs:   map[string]string{"run": "run1"},
	}
	if diff := cmp.Diff(want, inst); diff != "" {
		t.Fatalf("Create (-want +got):\n%s", diff)
	}
	for _, dir := range []string{inst.Ref, filepath.Join(inst.Ref, "tmp")} {
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0o700 {
			t.Errorf("%s: mode %v, want 0700", dir, got)
		}
	}

	// A second Create (resume) reuses the sandbox and what is in it.
	if err := os.WriteFile(filepath.Join(inst.Ref, "kept"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	again, err := l.Create(t.Context(), "run1", platform.Spec{Name: "gpu-a"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(inst, again); diff != "" {
		t.Errorf("second Create (-first +second):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(again.Ref, "kept")); err != nil {
		t.Errorf("second Create lost the sandbox's files: %v", err)
	}
}

func TestCreateRefuses(t *testing.T) {
	tests := map[string]struct {
		run  string
		spec platform.Spec
	}{
		"upper-case name":   {"run1", platform.Spec{Name: "Gpu"}},
		"leading dash":      {"run1", platform.Spec{Name: "-a"}},
		"slash in name":     {"run1", platform.Spec{Name: "a/b"}},
		"dot-dot name":      {"run1", platform.Spec{Name: ".."}},
		"empty name":        {"run1", platform.Spec{Name: ""}},
		"dot-dot run":       {"..", platform.Spec{Name: "a"}},
		"slash in run":      {"../x", platform.Spec{Name: "a"}},
		"empty run":         {"", platform.Spec{Name: "a"}},
		"existing instance": {"run1", platform.Spec{Name: "a", Existing: "box"}},
		"ssh host":          {"run1", platform.Spec{Name: "a", Host: "u@h"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "sandboxes")
			if _, err := New(root).Create(t.Context(), tt.run, tt.spec); err == nil {
				t.Fatalf("Create(%q, %+v) succeeded", tt.run, tt.spec)
			}
			if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused Create left %s behind (%v)", root, err)
			}
		})
	}
}

func TestDelete(t *testing.T) {
	l, inst := newInstance(t)
	if err := os.MkdirAll(filepath.Join(inst.Ref, "a", "b"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := l.Delete(t.Context(), inst); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(inst.Ref); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("sandbox still there after Delete: %v", err)
	}
	if _, err := os.Stat(filepath.Dir(inst.Ref)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("empty run directory still there after Delete: %v", err)
	}
	if err := l.Delete(t.Context(), inst); err != nil {
		t.Errorf("deleting a missing sandbox: %v", err)
	}
}

func TestDeleteReadOnlyTree(t *testing.T) {
	l, inst := newInstance(t)
	dir := filepath.Join(inst.Ref, "ro", "deeper")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o400); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o500); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Delete(t.Context(), inst); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(inst.Ref); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("sandbox still there after Delete: %v", err)
	}
}

func TestDeleteRefuses(t *testing.T) {
	l, inst := newInstance(t)
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	// root/run1/link → outside: removing it would follow nothing, but a
	// resolved path outside the root must be refused, not removed.
	link := filepath.Join(l.root, "run1", "link")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	// root/runlink → outside/run: a sandbox reached through a symlinked run dir.
	if err := os.MkdirAll(filepath.Join(outside, "run", "box"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "run"), filepath.Join(l.root, "runlink")); err != nil {
		t.Fatal(err)
	}

	tests := map[string]string{
		"outside root":          outside,
		"empty ref":             "",
		"the root itself":       l.root,
		"a run directory":       filepath.Join(l.root, "run1"),
		"too deep":              filepath.Join(inst.Ref, "tmp"),
		"dot-dot out of root":   filepath.Join(l.root, "run1", "..", "..", filepath.Base(outside)),
		"symlinked sandbox":     link,
		"symlinked run dir":     filepath.Join(l.root, "runlink", "box"),
		"relative outside root": "victim",
	}
	for name, ref := range tests {
		t.Run(name, func(t *testing.T) {
			if err := l.Delete(t.Context(), platform.Instance{Name: "x", Ref: ref}); err == nil {
				t.Errorf("Delete(%q) succeeded", ref)
			}
		})
	}
	for _, p := range []string{victim, filepath.Join(outside, "run", "box"), inst.Ref} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was touched: %v", p, err)
		}
	}
}

func TestList(t *testing.T) {
	l := New(filepath.Join(t.TempDir(), "sandboxes"))
	ctx := t.Context()
	got, err := l.List(ctx)
	if err != nil || len(got) != 0 {
		t.Fatalf("List before any sandbox = %v, %v; want none", got, err)
	}
	var want []platform.Instance
	for _, c := range []struct{ run, name string }{{"r1", "a"}, {"r1", "b"}, {"r2", "a"}} {
		inst, err := l.Create(ctx, c.run, platform.Spec{Name: c.name})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, inst)
	}
	got, err = l.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(got, func(i, j int) bool { return got[i].Ref < got[j].Ref })
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
}

func TestTail(t *testing.T) {
	tests := map[string]struct {
		max    int
		writes []string
		want   string
	}{
		"under the cap":         {8, []string{"abc", "de"}, "abcde"},
		"exactly the cap":       {5, []string{"abc", "de"}, "abcde"},
		"one write over":        {4, []string{"abcdef"}, "[taoflow: output truncated: 2 bytes dropped before this line]\ncdef"},
		"wraps the ring":        {4, []string{"abc", "de", "fgh"}, "[taoflow: output truncated: 4 bytes dropped before this line]\nefgh"},
		"many small writes":     {3, strings.Split("abcdefghij", ""), "[taoflow: output truncated: 7 bytes dropped before this line]\nhij"},
		"big write after ring":  {3, []string{"ab", "cd", "efghij"}, "[taoflow: output truncated: 7 bytes dropped before this line]\nhij"},
		"nothing written":       {3, nil, ""},
		"split across the wrap": {5, []string{"abcd", "efg", "h"}, "[taoflow: output truncated: 3 bytes dropped before this line]\ndefgh"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			w := platform.NewTail(tt.max)
			for _, s := range tt.writes {
				if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", s, n, err)
				}
			}
			if diff := cmp.Diff(tt.want, string(w.Bytes())); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestInstanceRef: the sandbox named before Create is the one Create makes.
func TestInstanceRef(t *testing.T) {
	l := New(t.TempDir())
	spec := platform.Spec{Name: "gpu"}
	want := l.InstanceRef("r1", spec)
	inst, err := l.Create(t.Context(), "r1", spec)
	if err != nil {
		t.Fatal(err)
	}
	if inst.Ref != want {
		t.Errorf("InstanceRef = %q, Create made %q", want, inst.Ref)
	}
}

// TestAdopt: a resumed run takes back its sandbox where it was, and only
// there.
func TestAdopt(t *testing.T) {
	l := New(t.TempDir())
	spec := platform.Spec{Name: "gpu"}
	inst, err := l.Create(t.Context(), "r1", spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(inst.Ref, "kept"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	again, err := l.Adopt(t.Context(), "r1", spec, inst.Ref)
	if err != nil || again.Ref != inst.Ref || !again.Created {
		t.Fatalf("Adopt = %+v, %v", again, err)
	}
	if _, err := os.Stat(filepath.Join(again.Ref, "kept")); err != nil {
		t.Errorf("the adopted sandbox lost its files: %v", err)
	}
	if _, err := l.Adopt(t.Context(), "r1", spec, "/elsewhere"); err == nil {
		t.Error("Adopt of a sandbox recorded elsewhere succeeded")
	}
}

package steps

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taoflow/taoflow/plan"
)

// TestUploadFileSymlinks: a file:// upload never writes through a symlink
// and never copies what a result link points to. The job planted, in its
// results, taoflow-run.json.tmp → a host file (the manifest's old fixed
// temporary name) and a link to a host-only file; an earlier upload left,
// at the destination, a link where this one has a file. The host files
// keep their content, the link is copied as a link, the manifest is
// written.
func TestUploadFileSymlinks(t *testing.T) {
	base := t.TempDir()
	host := t.TempDir() // files of the host the instance must not touch
	e := newEnv(t, func(c *Config) { c.BaseDir = base })
	hostFile := func(name string) string {
		p := filepath.Join(host, name)
		if err := os.WriteFile(p, []byte("host "+name), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	res := filepath.Join(e.inst.Ref, "results")
	writeTree(t, res, map[string]string{"model.pth": "weights", "sub/a.txt": "a"})
	links := map[string]string{
		filepath.Join(res, "taoflow-run.json.tmp"): hostFile("manifest-target"),
		filepath.Join(res, "leak.txt"):             hostFile("host-only"),
	}
	dest := filepath.Join(base, "out")
	if err := os.MkdirAll(dest, 0o700); err != nil {
		t.Fatal(err)
	}
	links[filepath.Join(dest, "model.pth")] = hostFile("model-target")
	links[filepath.Join(dest, "sub")] = host // a directory link: sub/a.txt would land in host/
	for link, target := range links {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}

	log, err := e.upload(with("from", "~/results", "to", "file://"+dest), nil)
	if err != nil {
		t.Fatalf("upload: %v\n%s", err, log)
	}
	for _, name := range []string{"manifest-target", "host-only", "model-target"} {
		if b, err := os.ReadFile(filepath.Join(host, name)); err != nil || string(b) != "host "+name {
			t.Errorf("host file %s was written through: %q, %v", name, b, err)
		}
	}
	if _, err := os.Stat(filepath.Join(host, "a.txt")); err == nil {
		t.Error("the upload wrote through the destination's directory link into the host")
	}
	for name, want := range map[string]string{"model.pth": "weights", "sub/a.txt": "a"} {
		p := filepath.Join(dest, name)
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s at the destination: %v, %v; want a regular file", name, fi, err)
			continue
		}
		if b, _ := os.ReadFile(p); string(b) != want {
			t.Errorf("%s = %q, want %q", name, b, want)
		}
	}
	if target, err := os.Readlink(filepath.Join(dest, "leak.txt")); err != nil || target != filepath.Join(host, "host-only") {
		t.Errorf("leak.txt at the destination: %q, %v; want the link itself, not the host file's content", target, err)
	}
	if b, err := os.ReadFile(filepath.Join(dest, manifestName)); err != nil || !strings.Contains(string(b), `"files"`) {
		t.Errorf("manifest: %q, %v", b, err)
	}
	left, _ := filepath.Glob(filepath.Join(dest, "."+manifestName+".*"))
	if len(left) > 0 {
		t.Errorf("temporary manifests left: %v", left)
	}
}

// TestPathsConfinedAtRunTime: a value substituted at run time that takes a
// path out of the directory its literal text names is refused before
// anything runs: the upload's destination and a volume's host directory.
func TestPathsConfinedAtRunTime(t *testing.T) {
	base := t.TempDir()
	e := newEnv(t, func(c *Config) { c.BaseDir = base })
	writeTree(t, filepath.Join(e.inst.Ref, "results"), map[string]string{"model.pth": "weights"})
	raw := with("from", "~/results", "to", "file://"+base+"/out/${{ matrix.d }}")
	log := &logBuf{}
	err := e.steps.Do(t.Context(), Request{
		NodeID: "upload[d=x]", Step: &plan.Step{ID: "upload", Uses: plan.KindUploadS3, With: raw},
		Instance: e.inst, With: with("from", "~/results", "to", "file://"+base+"/out/../../escaped"), Log: log,
	})
	if se := stepError(t, err); se.Class != ClassInvalidConfig || !strings.Contains(se.Msg, `must not climb out`) {
		t.Errorf("upload error = %v, want %s", err, ClassInvalidConfig)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(filepath.Dir(base)), "escaped")); err == nil {
		t.Error("the upload wrote outside its destination")
	}

	req := Request{NodeID: "train[d=x]", JobID: "tf-r1-train-x", Instance: e.inst,
		Step: &plan.Step{ID: "train", Uses: plan.KindRun, With: with("image", "busybox", "command", "true", "volumes", []string{"~/data/${{ matrix.d }}:/data"})},
		With: with("image", "busybox", "command", "true", "volumes", []string{"~/data/../../../etc:/data"})}
	if _, _, _, err := e.steps.jobSpecFor(req); err == nil || !strings.Contains(err.Error(), "must not climb out") {
		t.Errorf("volume error = %v, want it refused", err)
	}
}

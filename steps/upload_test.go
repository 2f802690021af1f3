package steps

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/taoflow/taoflow/plan"
)

// writeTree creates files (path → content) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func (e *env) upload(w *plan.Value, cell *Cell) (*logBuf, error) {
	log := &logBuf{}
	err := e.steps.Do(context.Background(), Request{
		NodeID: "upload[lr=0.1]", Step: &plan.Step{ID: "upload", Uses: plan.KindUploadS3},
		Cell: cell, Instance: e.inst, With: w, Log: log,
	})
	return log, err
}

func TestUploadFile(t *testing.T) {
	base := t.TempDir()
	p := &plan.Plan{Name: "sweep", Hash: "abc123", Vars: []plan.Var{{Name: "bucket", Value: "file:///srv/out"}, {Name: "epochs", Value: "10"}}}
	e := newEnv(t, func(c *Config) { c.BaseDir = base; c.Plan = p; c.RunID = "r1" })
	results := map[string]string{
		"train/status.json":       `{"epoch": 1}` + "\n",
		"train/model_epoch_1.pth": strings.Repeat("w", 1000),
		"train/empty":             "",
		"taoflow-run.json":        "a stale manifest in the source",
	}
	writeTree(t, filepath.Join(e.inst.Ref, "results", "lr-0.1"), results)
	cell := &Cell{ID: "lr-0.1", Index: 0, Values: []KV{{Key: "lr", Value: "0.1"}}}
	log, err := e.upload(with("from", "~/results/lr-0.1", "to", "file://"+base+"/out/r1/lr-0.1"), cell)
	if err != nil {
		t.Fatalf("upload: %v\n%s", err, log)
	}
	dest := filepath.Join(base, "out", "r1", "lr-0.1")
	for name, content := range results {
		if name == manifestName {
			continue
		}
		got, err := os.ReadFile(filepath.Join(dest, name))
		if err != nil || string(got) != content {
			t.Errorf("%s: %q, %v; want %q", name, got, err, content)
		}
	}
	b, err := os.ReadFile(filepath.Join(dest, manifestName))
	if err != nil {
		t.Fatal(err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("manifest is not JSON: %v\n%s", err, b)
	}
	if _, err := time.Parse(time.RFC3339, m.UploadedAt); err != nil {
		t.Errorf("uploaded_at %q: %v", m.UploadedAt, err)
	}
	want := Manifest{
		RunID: "r1", Plan: "sweep", PlanHash: "abc123",
		Vars: map[string]string{"bucket": "file:///srv/out", "epochs": "10"},
		Node: "upload[lr=0.1]", Step: "upload",
		Cell:     &ManifestCell{ID: "lr-0.1", Index: 0, Values: map[string]string{"lr": "0.1"}},
		Instance: "a", From: "~/results/lr-0.1", To: "file://" + base + "/out/r1/lr-0.1",
		Files: 3, Bytes: int64(len(results["train/status.json"]) + 1000),
		SHA256: map[string]string{},
	}
	for name, content := range results {
		if name != manifestName {
			sum := sha256.Sum256([]byte(content))
			want.SHA256[name] = hex.EncodeToString(sum[:])
		}
	}
	if diff := cmp.Diff(want, m, cmpopts.IgnoreFields(Manifest{}, "UploadedAt")); diff != "" {
		t.Errorf("manifest (-want +got):\n%s", diff)
	}
	// Again (a retry): the same files verify again.
	if log, err := e.upload(with("from", "~/results/lr-0.1", "to", "file://"+dest), cell); err != nil {
		t.Errorf("second upload to the absolute path: %v\n%s", err, log)
	}
}

func TestUploadFails(t *testing.T) {
	tests := map[string]struct {
		with      *plan.Value
		setup     func(t *testing.T, home, base string)
		wantClass string
		wantMsg   string
	}{
		"destination holds other files": {
			with: with("from", "~/res", "to", "file://BASE/out"),
			setup: func(t *testing.T, home, base string) {
				writeTree(t, filepath.Join(home, "res"), map[string]string{"a": "aaaa"})
				writeTree(t, filepath.Join(base, "out"), map[string]string{"stale.bin": "old"})
			},
			wantClass: ClassMismatch,
			wantMsg:   "~/res holds 1 files (4 bytes) but BASE/out holds 2 files (7 bytes)",
		},
		"no verify": {
			with: with("from", "~/res", "to", "file://BASE/out", "verify", false),
			setup: func(t *testing.T, home, base string) {
				writeTree(t, filepath.Join(home, "res"), map[string]string{"a": "aaaa"})
				writeTree(t, filepath.Join(base, "out"), map[string]string{"stale.bin": "old"})
			},
		},
		"missing source": {
			with:      with("from", "~/nothing", "to", "file://BASE/out"),
			wantClass: ClassUploadFailed,
			wantMsg:   "~/nothing on a is not a directory (did the job write its results there?)",
		},
		"destination under a file": {
			with: with("from", "~/res", "to", "file://BASE/file/out"),
			setup: func(t *testing.T, home, base string) {
				writeTree(t, filepath.Join(home, "res"), map[string]string{"a": "aaaa"})
				writeTree(t, base, map[string]string{"file": "not a directory"})
			},
			wantClass: ClassUploadFailed,
		},
		"s3 without credentials": {with: with("from", "~/res", "to", "s3://bucket/x"), wantClass: ClassInvalidConfig, wantMsg: "secret AWS_ACCESS_KEY_ID has no value: list it under secrets: and set it in taoflow's environment"},
		"bad scheme":             {with: with("from", "~/res", "to", "gs://bucket/x"), wantClass: ClassInvalidConfig},
		"relative file:// URL": {
			with:      with("from", "~/res", "to", "file://out"),
			wantClass: ClassInvalidConfig,
			wantMsg:   `with.to "file://out": a file:// URL takes an absolute path: file:///srv/out, or file://${{ plan.dir }}/out beside a local plan`,
		},
		"exclude later": {with: with("from", "~/res", "to", "file://BASE/out", "exclude", []string{"*.tmp"}), wantClass: ClassUnsupported},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			base := t.TempDir()
			e := newEnv(t, func(c *Config) { c.BaseDir = base })
			if tt.setup != nil {
				tt.setup(t, e.inst.Ref, base)
			}
			for i, f := range tt.with.Fields {
				tt.with.Fields[i].Value.Text = strings.ReplaceAll(f.Value.Text, "BASE", base)
			}
			log, err := e.upload(tt.with, nil)
			if tt.wantClass == "" {
				if err != nil {
					t.Fatalf("upload: %v\n%s", err, log)
				}
				return
			}
			se := stepError(t, err)
			if se.Class != tt.wantClass {
				t.Errorf("error = %v, want class %q", err, tt.wantClass)
			}
			if tt.wantMsg != "" && se.Msg != strings.ReplaceAll(tt.wantMsg, "BASE", base) {
				t.Errorf("message %q, want %q", se.Msg, strings.ReplaceAll(tt.wantMsg, "BASE", base))
			}
			if _, err := os.Stat(filepath.Join(base, "out", manifestName)); err == nil {
				t.Errorf("a failed upload wrote the manifest")
			}
		})
	}
}

package plan_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rogpeppe/go-internal/txtar"

	"github.com/taoflow/taoflow/plan"
)

// update rewrites golden files: UPDATE_GOLDEN=1 go test ./plan
var update = os.Getenv("UPDATE_GOLDEN") == "1"

// TestDiagnostics runs every plan of testdata/diagnostics/*.txtar and
// compares the rendered diagnostics with the archive's "want" section.
func TestDiagnostics(t *testing.T) {
	files, err := filepath.Glob("testdata/diagnostics/*.txtar")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 30 {
		t.Fatalf("the corpus has %d broken plans; keep at least 30", len(files))
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".txtar")
		t.Run(name, func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			src, want := section(ar, "plan.yaml"), section(ar, "want")
			if src == nil || want == nil {
				t.Fatalf("%s needs a plan.yaml and a want section", file)
			}
			_, diags := plan.Parse("plan.yaml", src, plan.Options{})
			got := render(diags)
			if update {
				setSection(ar, "want", []byte(got))
				if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("diagnostics differ (-want +got); UPDATE_GOLDEN=1 go test ./plan rewrites them:\n%s", diff)
			}
			if got == "" {
				t.Errorf("a broken plan must produce at least one diagnostic")
			}
		})
	}
}

func render(diags plan.Diagnostics) string {
	var b strings.Builder
	for _, d := range diags {
		fmt.Fprintln(&b, d)
	}
	return b.String()
}

func section(ar *txtar.Archive, name string) []byte {
	for _, f := range ar.Files {
		if f.Name == name {
			return f.Data
		}
	}
	return nil
}

func setSection(ar *txtar.Archive, name string, data []byte) {
	for i := range ar.Files {
		if ar.Files[i].Name == name {
			ar.Files[i].Data = data
		}
	}
}

// TestEncoding covers inputs a txtar file can't hold comfortably.
func TestEncoding(t *testing.T) {
	tests := map[string]struct {
		src  []byte
		want []string
	}{
		"invalid UTF-8": {
			src:  []byte("taoflow: 1\nname: caf\xe9\n"),
			want: []string{"plan.yaml:2:10: error: the file is not valid UTF-8 (byte 0xe9)"},
		},
		"NUL byte": {
			src:  []byte("taoflow: 1\nname: a\x00b\n"),
			want: []string{"plan.yaml:2:8: error: control character U+0000 is not allowed in a plan"},
		},
		"BOM is fine": {
			src:  []byte("\xef\xbb\xbftaoflow: 1\nname: bom\ninstances: {box: {}}\nsteps: [{id: p, uses: preflight}]\n"),
			want: nil,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, diags := plan.Parse("plan.yaml", tc.src, plan.Options{})
			var got []string
			for _, d := range diags {
				got = append(got, d.String())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestExamples keeps every example plan valid and warning-free.
func TestExamples(t *testing.T) {
	files, _ := filepath.Glob("../examples/plans/*.yaml")
	if len(files) < 4 {
		t.Fatalf("found %d example plans, want at least 4", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			p, diags := plan.Load(f, plan.Options{})
			if len(diags) > 0 {
				t.Fatalf("example has diagnostics:\n%s", render(diags))
			}
			if p.Name == "" || len(p.Steps) == 0 {
				t.Fatalf("example loaded empty: %+v", p)
			}
		})
	}
}

func TestVarOverrides(t *testing.T) {
	src := []byte("taoflow: 1\nname: v\nvars: {image: busybox}\ninstances: {box: {}}\nsteps:\n  - {id: p, uses: pull, with: {image: \"${{ vars.image }}\"}}\n")
	p, diags := plan.Parse("plan.yaml", src, plan.Options{Vars: map[string]string{"image": "alpine:3"}})
	if len(diags) != 0 {
		t.Fatalf("unexpected diagnostics:\n%s", render(diags))
	}
	if v, _ := p.Var("image"); v != "alpine:3" {
		t.Errorf("image = %q, want the override alpine:3", v)
	}
	_, diags = plan.Parse("plan.yaml", src, plan.Options{Vars: map[string]string{"imag": "x"}})
	want := "--var imag: error: plan.yaml declares no var \"imag\" (it declares: image)\n"
	if got := render(diags); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// bigPlan builds a valid plan of n steps chained in groups, like a large
// generated pipeline.
func bigPlan(n int) []byte {
	var b bytes.Buffer
	b.WriteString("taoflow: 1\nname: big\nvars: {image: busybox}\ninstances:\n  a: {slots: 4}\n  b: {slots: 4}\nsteps:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - id: s%d\n    uses: pull\n    with: {image: \"${{ vars.image }}:%d\"}\n", i, i)
		if i > 0 {
			fmt.Fprintf(&b, "    needs: [s%d]\n", i/2)
		}
	}
	return b.Bytes()
}

func TestTenThousandSteps(t *testing.T) {
	p, diags := plan.Parse("big.yaml", bigPlan(10_000), plan.Options{})
	if len(diags) != 0 {
		t.Fatalf("unexpected diagnostics:\n%s", render(diags[:min(len(diags), 10)]))
	}
	if len(p.Steps) != 10_000 {
		t.Fatalf("got %d steps", len(p.Steps))
	}
}

// BenchmarkLoad10kSteps measures validating a 10,000-step plan (issue 13's
// goal: under 0.2 s per op; docs/benchmarks.md has the figures).
func BenchmarkLoad10kSteps(b *testing.B) {
	src := bigPlan(10_000)
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if _, diags := plan.Parse("big.yaml", src, plan.Options{}); diags.HasErrors() {
			b.Fatal(diags)
		}
	}
}

// FuzzLoad feeds arbitrary bytes to the loader: it must never panic, and
// every diagnostic must carry a position in the file.
func FuzzLoad(f *testing.F) {
	files, _ := filepath.Glob("testdata/diagnostics/*.txtar")
	for _, file := range files {
		if ar, err := txtar.ParseFile(file); err == nil {
			f.Add(section(ar, "plan.yaml"))
		}
	}
	examples, _ := filepath.Glob("../examples/plans/*.yaml")
	for _, e := range examples {
		if data, err := os.ReadFile(e); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, diags := plan.Parse("f.yaml", data, plan.Options{})
		for _, d := range diags {
			if d.Pos.File != "f.yaml" || d.Pos.Line < 1 || d.Pos.Col < 1 {
				t.Fatalf("diagnostic without a position: %q", d)
			}
			// A message may quote the user's own text, which can hold
			// anything; only words the input does not contain are a leak.
			for _, internal := range []string{"goroutine ", "#/"} {
				if strings.Contains(d.Message, internal) && !bytes.Contains(data, []byte(internal)) {
					t.Fatalf("diagnostic leaks internals (%q): %q", internal, d)
				}
			}
		}
	})
}

package plan_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/taoflow/taoflow/plan"
)

const varsPlan = `taoflow: 1
name: v
vars:
  poll: 30s
  min_gpus: 1
  note: ""
instances:
  box: {}
steps:
  - id: pre
    uses: preflight
    with: {gpus: "${{ vars.min_gpus }}"}
  - id: r
    uses: run
    with: {command: "echo ${{ vars.note }}"}
  - id: w
    uses: wait
    needs: [r]
    with: {interval: "${{ vars.poll }}", timeout: 1h}
`

// TestVarValuesChecked: a --var or --var-file value is checked where it is
// used and named in the error; an empty value is refused unless the
// default is empty.
func TestVarValuesChecked(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "v.yaml")
	if err := os.WriteFile(file, []byte("poll: 10\nmin_gpus: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fileVars, fileSources, fileDiags := plan.ReadVarFiles([]string{file})
	if len(fileDiags) > 0 {
		t.Fatalf("var file: %v", fileDiags)
	}
	tests := map[string]struct {
		opts plan.Options
		want []string
	}{
		"defaults": {},
		"--var poll=30": {
			opts: plan.Options{Vars: map[string]string{"poll": "30"}},
			want: []string{`plan.yaml:19:23: error: steps[2].with.interval: "30" is not a duration (use Go syntax such as 90s, 10m, 1h30m); vars.poll is "30" (from --var poll=30)`},
		},
		"--var min_gpus=one": {
			opts: plan.Options{Vars: map[string]string{"min_gpus": "one"}},
			want: []string{`plan.yaml:12:19: error: steps[0].with.gpus: expected an integer, got a string; vars.min_gpus is "one" (from --var min_gpus=one)`},
		},
		"--var poll=0s": {
			opts: plan.Options{Vars: map[string]string{"poll": "0s"}},
			want: []string{`plan.yaml:19:23: error: steps[2].with.interval: "0s" is not a duration longer than zero (use Go syntax such as 90s, 10m, 1h30m); vars.poll is "0s" (from --var poll=0s)`},
		},
		"--var-file": {
			opts: plan.Options{Vars: fileVars, Sources: fileSources},
			want: []string{`plan.yaml:19:23: error: steps[2].with.interval: "10" is not a duration (use Go syntax such as 90s, 10m, 1h30m); vars.poll is "10" (from --var-file ` + file + ` line 1)`},
		},
		"empty value of a var with a default": {
			opts: plan.Options{Vars: map[string]string{"poll": ""}},
			want: []string{`--var poll: error: --var poll= sets var "poll" to an empty value; its default is "30s" (vars: line 4): give a value, or leave it out to keep the default`},
		},
		"empty value of a var whose default is empty": {
			opts: plan.Options{Vars: map[string]string{"note": ""}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, diags := plan.Parse("plan.yaml", []byte(varsPlan), tc.opts)
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

// TestVarFilesLaterWins: of two var files, the later one's value is used.
func TestVarFilesLaterWins(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	_ = os.WriteFile(a, []byte("poll: 1m\nmin_gpus: 4\n"), 0o644)
	_ = os.WriteFile(b, []byte("poll: 2m\n"), 0o644)
	vars, src, diags := plan.ReadVarFiles([]string{a, b})
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	want := map[string]string{"poll": "2m", "min_gpus": "4"}
	if diff := cmp.Diff(want, vars); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if src["poll"].From != "--var-file "+b+" line 1" {
		t.Errorf("poll from %q", src["poll"].From)
	}
	_, _, diags = plan.ReadVarFiles([]string{filepath.Join(dir, "none.yaml")})
	if len(diags) != 1 || diags[0].Message != "cannot read the var file: no such file" {
		t.Errorf("missing file: %v", diags)
	}
}

package plan_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taoflow/taoflow/plan"
)

// TestTransferChecks: send's from is checked on this machine at validate
// time (relative to the plan's directory), fetch's to outside the plan's
// directory is a warning, both are refused under brev's transport: exec,
// a fetch after a delete of its instance is an error, and ${{ plan.dir }}
// is the plan's absolute directory.
func TestTransferChecks(t *testing.T) {
	head := "taoflow: 1\nname: xfer\n"
	local := head + "instances: {a: {}}\n"
	tests := map[string]struct {
		plan string
		want []string // substrings of the rendered diagnostics, in any order
		none bool     // no diagnostic at all
	}{
		"send from exists": {
			plan: local + "steps:\n  - {id: s, uses: send, with: {from: specs/, to: ~/specs}}\n",
			none: true,
		},
		"send from missing": {
			plan: local + "steps:\n  - id: s\n    uses: send\n    with: {from: nope/, to: ~/specs}\n",
			want: []string{"plan.yaml:7:18: error: with.from: nope/: no such file or directory (/", "/nope; send reads paths relative to the plan's directory): create it or fix the path"},
		},
		"send from under plan.dir": {
			plan: local + "steps:\n  - {id: s, uses: send, with: {from: \"${{ plan.dir }}/specs\", to: ~/specs}}\n",
			none: true,
		},
		"send from depends on the matrix": {
			plan: local + "steps:\n  - {id: s, uses: send, matrix: {x: [a, b]}, with: {from: \"specs/${{ matrix.x }}\", to: ~/specs}}\n",
			none: true,
		},
		"unknown plan field": {
			plan: local + "steps:\n  - {id: s, uses: send, with: {from: \"${{ plan.file }}\", to: ~/specs}}\n",
			want: []string{`error: unknown plan field "file" (plan.dir exists)`},
		},
		"fetch outside the plan directory": {
			plan: local + "steps:\n  - id: f\n    uses: fetch\n    with: {from: ~/results, to: /srv/elsewhere}\n",
			want: []string{"plan.yaml:7:33: warning: with.to: /srv/elsewhere is outside the plan's directory"},
		},
		"fetch climbing out": {
			plan: local + "steps:\n  - id: f\n    uses: fetch\n    with: {from: ~/results, to: ../elsewhere}\n",
			want: []string{`plan.yaml:7:33: error: with.to "../elsewhere" holds a ".." segment: fetch replaces its destination`},
		},
		"fetch to the plan's directory by a var": {
			plan: local + "vars: {d: .}\nsteps:\n  - id: f\n    uses: fetch\n    with: {from: ~/results, to: \"${{ vars.d }}\"}\n",
			want: []string{`plan.yaml:8:33: error: with.to "." (`, `) is the plan's directory `, `(vars.d is set by vars: line 4)`},
		},
		"fetch to a matrix value above the plan": {
			plan: local + "steps:\n  - id: f\n    uses: fetch\n    matrix: {d: [ok, /]}\n    with: {from: ~/results, to: \"${{ matrix.d }}\"}\n",
			want: []string{`plan.yaml:8:33: error: with.to "/" (/) is above the plan's directory`},
		},
		"fetch inside": {
			plan: local + "steps:\n  - {id: f, uses: fetch, with: {from: ~/results, to: \"results/${{ run.id }}\"}}\n",
			none: true,
		},
		"transport exec": {
			plan: head + "platform: {kind: brev, transport: exec}\ninstances: {g: {create: {type: g5.xlarge}}}\nsteps:\n" +
				"  - {id: s, uses: send, with: {from: specs, to: ~/specs}}\n  - {id: f, uses: fetch, needs: [s], with: {from: ~/r, to: r}}\n",
			want: []string{
				`send step "s" streams files over the transport's stdin, which transport: exec (brev exec) cannot carry: use transport: ssh`,
				`fetch step "f" streams files over the transport's stdout`,
			},
		},
		"fetch after delete": {
			plan: local + "steps:\n  - {id: d, uses: delete}\n  - {id: f, uses: fetch, needs: [d], with: {from: ~/r, to: r}}\n",
			want: []string{`error: fetch step "f" runs after delete step "d" on a: the results would already be gone; order the delete after the fetch`},
		},
		"download-s3 credentials declared": {
			plan: local + "steps:\n  - {id: d, uses: download-s3, with: {from: s3://b/p, to: ~/data, env: [KEY]}}\n",
			want: []string{`secret "KEY" is not declared`},
		},
		"download-s3 bad source": {
			plan: local + "steps:\n  - {id: d, uses: download-s3, with: {from: http://b/p, to: ~/data}}\n",
			want: []string{"must start with s3:// or file://"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.MkdirAll(filepath.Join(dir, "specs"), 0o755); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(dir, "plan.yaml")
			if err := os.WriteFile(file, []byte(tt.plan), 0o600); err != nil {
				t.Fatal(err)
			}
			t.Chdir(dir)
			p, diags := plan.Load("plan.yaml", plan.Options{})
			got := render(diags)
			if tt.none && got != "" {
				t.Errorf("diagnostics of a good plan:\n%s", got)
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("diagnostics lack %q:\n%s", w, got)
				}
			}
			if p != nil && p.Dir() != dir {
				t.Errorf("plan.Dir() = %q, want %q", p.Dir(), dir)
			}
		})
	}
}

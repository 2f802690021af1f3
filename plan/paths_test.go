package plan

import (
	"strings"
	"testing"
)

func TestUnderLiteralPrefix(t *testing.T) {
	tests := map[string]struct {
		raw, rendered string
		want          bool
	}{
		"cell under out":       {"file://out/${{ cell.id }}", "file://out/lr-1", true},
		"dotdot out of out":    {"file://out/${{ matrix.d }}", "file://out/../../etc", false},
		"dotdot inside out":    {"file://out/${{ matrix.d }}", "file://out/a/../b", true},
		"absolute value":       {"file://out/${{ matrix.d }}", "file://out//etc", true},
		"in a segment":         {"out/run-${{ matrix.d }}", "out/run-../../x", true},
		"out of a segment":     {"out/run-${{ matrix.d }}", "out/run-x/../../../y", false},
		"home":                 {"~/data/${{ matrix.d }}:/data", "~/data/../../etc:/data", false},
		"home ok":              {"~/data/${{ matrix.d }}:/data", "~/data/x:/data", true},
		"whole base from var":  {"file://${{ vars.dest }}/x", "file://../shared/x", true},
		"no reference":         {"file://../x", "file://../x", true},
		"s3":                   {"s3://b/${{ matrix.d }}", "s3://b/../x", true},
		"prefix changed":       {"out/${{ matrix.d }}", "elsewhere/x", false},
		"reference at start":   {"${{ vars.d }}/x", "../x", true},
		"bare dotdot in value": {"file://out/${{ matrix.d }}", "file://out/..", false},
	}
	for name, tt := range tests {
		if got := UnderLiteralPrefix(tt.raw, tt.rendered); got != tt.want {
			t.Errorf("%s: UnderLiteralPrefix(%q, %q) = %v, want %v", name, tt.raw, tt.rendered, got, tt.want)
		}
	}
}

// TestPathValuesEscape: a matrix value or a var with a ".." segment in a
// path field, after literal text, is an error at its position; at the
// start of the path, where the base is the user's, it is not.
func TestPathValuesEscape(t *testing.T) {
	src := `taoflow: 1
name: esc
vars: {sub: "../../etc", base: "../shared"}
instances:
  a: {}
steps:
  - id: train
    uses: run
    matrix: {d: [ok, "../.."]}
    with:
      command: "true"
      volumes: ["~/data/${{ matrix.d }}:/data"]
  - id: wait
    uses: wait
    needs: [train]
    matrix: inherit
  - id: up
    uses: upload-s3
    needs: [wait]
    matrix: inherit
    with: {from: "~/r", to: "file://out/${{ vars.sub }}"}
  - id: up2
    uses: upload-s3
    needs: [wait]
    matrix: inherit
    with: {from: "~/r", to: "file://${{ vars.base }}/r"}
`
	_, diags := Parse("esc.yaml", []byte(src), Options{})
	var got []string
	for _, d := range diags {
		if strings.Contains(d.String(), `".." segment`) {
			got = append(got, d.String())
		}
	}
	want := []string{
		`esc.yaml:12:25: error: ${{ matrix.d }} can be "../..", which would take with.volumes out of the directory "~/data/" names`,
		`esc.yaml:21:41: error: ${{ vars.sub }} can be "../../etc", which would take with.to out of the directory "file://out/" names`,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d path errors, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("error %d = %q, want it to start %q", i, got[i], want[i])
		}
	}
}

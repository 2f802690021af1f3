package plan

import (
	"strings"
	"testing"
)

// TestSharedValueCheckedOnce: a value reached twice through an alias is
// checked once (the expressions walk keeps a visited set only for trees
// with aliases).
func TestSharedValueCheckedOnce(t *testing.T) {
	src := `taoflow: 1
name: t
instances: {a: null}
steps:
  - id: one
    uses: run
    with: {image: busybox, command: &c "echo ${{ matrix.lr }}"}
  - id: two
    uses: run
    with: {image: busybox, command: *c}
  - {id: w, uses: wait, needs: [one, two]}
`
	_, diags := Parse("plan.yaml", []byte(src), Options{})
	n := 0
	for _, d := range diags {
		if strings.Contains(d.Message, "which has no matrix") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("got %d reports of the shared value, want 1:\n%s", n, diags)
	}
}

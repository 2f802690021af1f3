package plan_test

import (
	"testing"

	"github.com/taoflow/taoflow/plan"
)

// TestRunCreates pins the one ownership rule (issue 15): local sandboxes and
// brev create: are the run's, so keep: on them draws no warning; ssh hosts
// and brev existing: are not, and keep: on them is warned about.
func TestRunCreates(t *testing.T) {
	for _, tc := range []struct {
		name, plan string
		creates    bool
	}{
		{"local", "instances:\n  a: {keep: true}\n", true},
		{"brev create", "platform: brev\ninstances:\n  a: {create: {type: g5.xlarge}, keep: true}\n", true},
		{"brev existing", "platform: brev\ninstances:\n  a: {existing: box, keep: true}\n", false},
		{"ssh", "platform: ssh\ninstances:\n  a: {host: gpu-box, keep: true}\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "taoflow: 1\nname: p\n" + tc.plan + "steps:\n  - id: p\n    uses: preflight\n"
			p, diags := plan.Parse("plan.yaml", []byte(src), plan.Options{})
			if diags.HasErrors() || p == nil {
				t.Fatalf("plan does not parse: %v", diags)
			}
			in := p.Instance("a")
			if got := in.RunCreates(p.Platform.Kind); got != tc.creates {
				t.Errorf("RunCreates(%s) = %v, want %v", p.Platform.Kind, got, tc.creates)
			}
			warned := len(diags) > 0
			if warned == tc.creates {
				t.Errorf("keep: warning = %v, want %v; diagnostics: %v", warned, !tc.creates, diags)
			}
		})
	}
}

package plan_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/schema"
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

// TestDefaultBackoffMatchesSchema: the schema documents the default backoff
// (the reference is generated from it); plan.DefaultBackoff is the value used.
func TestDefaultBackoffMatchesSchema(t *testing.T) {
	var doc any
	if err := json.Unmarshal(schema.JSON, &doc); err != nil {
		t.Fatal(err)
	}
	var found []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if b, ok := v["backoff"].(map[string]any); ok {
				if d, ok := b["default"].(string); ok {
					found = append(found, d)
				}
			}
			for _, c := range v {
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(doc)
	if len(found) != 1 {
		t.Fatalf("schema has %d backoff defaults (%v), want 1", len(found), found)
	}
	if d, err := time.ParseDuration(found[0]); err != nil || d != plan.DefaultBackoff {
		t.Errorf("schema backoff default %q, plan.DefaultBackoff %v", found[0], plan.DefaultBackoff)
	}
}

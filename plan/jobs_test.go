package plan_test

import (
	"testing"

	"github.com/taoflow/taoflow/plan"
)

func TestJobNames(t *testing.T) {
	for _, tc := range []struct{ run, step, suffix, id, prefix string }{
		{"r1", "train", "lr-0.1", "tf-r1-train.lr-0.1", "tf-r1-"},
		{"2026-12-02.x", "up", "a", "tf-2026-12-02.x-up.a", "tf-2026-12-02.x-"},
		{"a b/c", "s", "x=y", "tf-a_b_c-s.x_y", "tf-a_b_c-"},
	} {
		if got := plan.JobID(tc.run, tc.step, tc.suffix); got != tc.id {
			t.Errorf("JobID(%q, %q, %q) = %q, want %q", tc.run, tc.step, tc.suffix, got, tc.id)
		}
		if got := plan.JobPrefix(tc.run); got != tc.prefix {
			t.Errorf("JobPrefix(%q) = %q, want %q", tc.run, got, tc.prefix)
		}
	}
}

// TestJobIDsInjective: the attack of issue 17 item 7 — step a × cell x-y-z
// and step a-x × cell y-z were both tf-RUN-a-x-y-z, so the second step
// adopted the first's job and its own command never ran.
func TestJobIDsInjective(t *testing.T) {
	if a, b := plan.JobID("RUN", "a", "x-y-z"), plan.JobID("RUN", "a-x", "y-z"); a == b {
		t.Fatalf("step a × x-y-z and step a-x × y-z share the job id %s", a)
	}
	steps := []string{"a", "a-x", "a-x-y", "a_x", "b"}
	suffixes := []string{"x-y-z", "y-z", "z", "x", "x-y", "x.y", "y.z", "lr-0.1_b-2", "cell0-1a2b3c4d"}
	seen := map[string]string{}
	for _, s := range steps {
		for _, x := range suffixes {
			id := plan.JobID("RUN", s, x)
			if prev, dup := seen[id]; dup {
				t.Errorf("%s × %s and %s share the job id %s", s, x, prev, id)
			}
			seen[id] = s + " × " + x
		}
	}
}

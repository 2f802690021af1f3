package plan_test

import (
	"testing"

	"github.com/taoflow/taoflow/plan"
)

func TestJobNames(t *testing.T) {
	for _, tc := range []struct{ run, step, suffix, id, prefix string }{
		{"r1", "train", "lr-0.1", "tf-r1-train-lr-0.1", "tf-r1-"},
		{"2026-12-02.x", "up", "a", "tf-2026-12-02.x-up-a", "tf-2026-12-02.x-"},
		{"a b/c", "s", "x=y", "tf-a_b_c-s-x_y", "tf-a_b_c-"},
	} {
		if got := plan.JobID(tc.run, tc.step, tc.suffix); got != tc.id {
			t.Errorf("JobID(%q, %q, %q) = %q, want %q", tc.run, tc.step, tc.suffix, got, tc.id)
		}
		if got := plan.JobPrefix(tc.run); got != tc.prefix {
			t.Errorf("JobPrefix(%q) = %q, want %q", tc.run, got, tc.prefix)
		}
	}
}

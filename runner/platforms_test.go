package runner

import (
	"slices"
	"testing"
)

// TestEnvironWithout: a platform CLI (brev) runs without the plan's
// secret values in its environment.
func TestEnvironWithout(t *testing.T) {
	got := environWithout([]string{"PATH=/bin", "NGC_KEY=nvapi-x", "HOME=/h", "AWS_SECRET_ACCESS_KEY=y", "NGC_KEY_OTHER=z"},
		[]string{"NGC_KEY", "AWS_SECRET_ACCESS_KEY"})
	if want := []string{"PATH=/bin", "HOME=/h", "NGC_KEY_OTHER=z"}; !slices.Equal(got, want) {
		t.Errorf("environWithout = %q, want %q", got, want)
	}
}

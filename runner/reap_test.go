package runner

import (
	"strings"
	"testing"
)

// TestReapOnlyBrevWithoutBrev: asked to look only at brev instances where
// there is no brev CLI, Reap says so instead of finding nothing in silence,
// and does not look at containers.
func TestReapOnlyBrevWithoutBrev(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // neither brev nor docker
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	r, err := Reap(t.Context(), ReapConfig{StateDir: t.TempDir(), Only: ReapBrev})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if len(r.Found) != 0 || len(r.Problems) != 1 || !strings.Contains(r.Problems[0].Error(), "no brev CLI on PATH") {
		t.Errorf("found %v, problems %v; want nothing and one problem naming the missing brev CLI", r.Found, r.Problems)
	}
}

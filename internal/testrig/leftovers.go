package testrig

import (
	"strings"
	"testing"
)

// NoLeftovers registers a cleanup that fails the test if any container or
// volume carrying label still exists, then removes them so the next test
// starts clean. label is a docker filter: "key" or "key=value".
//
// Call it first in a test: cleanups run last-registered first, so this one
// then runs after the test's own teardown. Test binaries of different
// packages run at the same time and containers inherit image labels
// (TestLabel), so give each test a label value of its own (UniqueName),
// for example NoLeftovers(t, "taoflow.run="+run).
func NoLeftovers(t testing.TB, label string) {
	t.Helper()
	tool(t, "docker")
	t.Cleanup(func() {
		filter := "label=" + label
		names, err := Docker(t, "ps", "-a", "--filter", filter, "--format", "{{.Names}}")
		if err != nil {
			t.Errorf("testrig: %v", err)
		} else if names != "" {
			list := strings.Fields(names)
			t.Errorf("testrig: containers left behind with %s: %s", label, strings.Join(list, ", "))
			if _, err := Docker(t, append([]string{"rm", "-f", "-v"}, list...)...); err != nil {
				t.Errorf("testrig: %v", err)
			}
		}
		vols, err := Docker(t, "volume", "ls", "-q", "--filter", filter)
		if err != nil {
			t.Errorf("testrig: %v", err)
		} else if vols != "" {
			list := strings.Fields(vols)
			t.Errorf("testrig: volumes left behind with %s: %s", label, strings.Join(list, ", "))
			if _, err := Docker(t, append([]string{"volume", "rm", "-f"}, list...)...); err != nil {
				t.Errorf("testrig: %v", err)
			}
		}
	})
}

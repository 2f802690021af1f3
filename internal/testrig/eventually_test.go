package testrig

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// fataler records what Eventually fails with.
type fataler struct{ msg string }

func (f *fataler) Fatalf(format string, args ...any) { f.msg = fmt.Sprintf(format, args...) }

func TestEventually(t *testing.T) {
	n := 0
	Eventually(t, time.Minute, "the third try", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Errorf("cond ran %d times, want 3", n)
	}

	var f fataler
	start := time.Now()
	Eventually(&f, 30*time.Millisecond, "godot", func() bool { return false })
	if !strings.Contains(f.msg, "timed out after 30ms waiting for godot") {
		t.Errorf("failure = %q, want it to say what was awaited and for how long", f.msg)
	}
	if time.Since(start) < 30*time.Millisecond {
		t.Errorf("gave up after %s, before its bound", time.Since(start))
	}
	if !Within(0, func() bool { return true }) {
		t.Error("Within(0) of a cond that holds = false")
	}
}

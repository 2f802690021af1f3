package testrig

import (
	"time"
)

// Fataler is what Eventually needs of a test: a *testing.T, a testing.TB
// or a testscript's *TestScript.
type Fataler interface {
	Fatalf(format string, args ...any)
}

// Eventually polls cond until it holds and fails the test when it has not
// within bound, saying what was awaited: "timed out after 10s waiting for
// WHAT". bound is a limit for a condition on a loaded machine, never a
// duration that orders anything: a cond that holds at once returns at
// once.
func Eventually(t Fataler, bound time.Duration, what string, cond func() bool) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	if !Within(bound, cond) {
		t.Fatalf("timed out after %s waiting for %s", bound, what)
	}
}

// Within polls cond until it holds and reports whether it did within
// bound, for a caller whose failure says more than Eventually's (what was
// seen last) or must not end the test. cond is tried at once, then every
// few milliseconds, the pause growing to 50ms.
func Within(bound time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(bound)
	pause := 5 * time.Millisecond
	for {
		if cond() {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(min(pause, time.Until(deadline)+time.Millisecond))
		pause = min(2*pause, 50*time.Millisecond)
	}
}

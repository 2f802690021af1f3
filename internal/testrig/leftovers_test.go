package testrig

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// recorder is a testing.TB that records failures and cleanups instead of
// acting on them, to test the rig's own checks.
type recorder struct {
	testing.TB
	cleanups []func()
	errors   []string
	fatal    string
}

func (r *recorder) Helper()             {}
func (r *recorder) Cleanup(f func())    { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Logf(string, ...any) {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// runCleanups runs the recorded cleanups, last registered first.
func (r *recorder) runCleanups() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// inGoroutine runs f so that a recorded Fatalf (runtime.Goexit) ends only f.
func inGoroutine(f func()) {
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	<-done
}

func TestNoLeftovers(t *testing.T) {
	img := BuildTrainerImage(t, "")
	name := UniqueName(t)
	label := "taoflow.testrig=" + name
	t.Cleanup(func() { // in case the check under test fails to remove them
		_, _ = Docker(t, "rm", "-f", name)
		_, _ = Docker(t, "volume", "rm", "-f", name)
	})

	rec := &recorder{TB: t}
	NoLeftovers(rec, label)
	if _, err := Docker(t, "create", "--name", name, "--label", label, img); err != nil {
		t.Fatal(err)
	}
	if _, err := Docker(t, "volume", "create", "--label", label, name); err != nil {
		t.Fatal(err)
	}
	rec.runCleanups()

	want := []string{
		"testrig: containers left behind with " + label + ": " + name,
		"testrig: volumes left behind with " + label + ": " + name,
	}
	if diff := cmp.Diff(want, rec.errors); diff != "" {
		t.Errorf("reported (-want +got):\n%s", diff)
	}
	for _, args := range [][]string{
		{"ps", "-aq", "--filter", "label=" + label},
		{"volume", "ls", "-q", "--filter", "label=" + label},
	} {
		if out, err := Docker(t, args...); err != nil || out != "" {
			t.Errorf("docker %s after cleanup: %q, %v", strings.Join(args, " "), out, err)
		}
	}

	clean := &recorder{TB: t}
	NoLeftovers(clean, label)
	clean.runCleanups()
	if len(clean.errors) != 0 {
		t.Errorf("clean test reported %q", clean.errors)
	}
}

func TestMissingToolFails(t *testing.T) {
	rec := &recorder{TB: t}
	inGoroutine(func() { tool(rec, "testrig-no-such-tool", t.TempDir()) })
	if want := "testrig: testrig-no-such-tool not found: install testrig-no-such-tool (make deps)"; rec.fatal != want {
		t.Errorf("Fatalf %q, want %q", rec.fatal, want)
	}
}

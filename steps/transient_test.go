package steps

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taoflow/taoflow/platform"
)

// flaky fails the first fails Execs with err, then runs nothing and
// succeeds; it records the stdin of every call.
type flaky struct {
	fails  int
	err    error
	calls  int
	stdins []string
}

func (f *flaky) Kind() string { return "flaky" }

func (f *flaky) Exec(ctx context.Context, inst platform.Instance, script string, stdin io.Reader) (platform.Result, error) {
	f.calls++
	var b []byte
	if stdin != nil {
		b, _ = io.ReadAll(stdin)
	}
	f.stdins = append(f.stdins, string(b))
	if f.calls <= f.fails {
		return platform.Result{ExitCode: -1}, f.err
	}
	return platform.Result{Stdout: []byte("ran\n")}, nil
}

// TestExecRetriesTransient: a transport failure before the script ran is
// tried again (with the same stdin), up to transientTries; any other error
// is returned at once, since the script may have run.
func TestExecRetriesTransient(t *testing.T) {
	inst := platform.Instance{Name: "gpu"}
	transient := &platform.ExecError{Instance: "gpu", Transient: true, Err: errors.New("ssh: connect: Connection refused")}
	lost := &platform.ExecError{Instance: "gpu", Err: errors.New("connection lost while the command ran")}

	f := &flaky{fails: 2, err: transient}
	s := New(Config{Platform: f, TransientBackoff: time.Millisecond})
	res, err := s.exec(t.Context(), inst, "true", []byte("key\n"))
	if err != nil || string(res.Stdout) != "ran\n" || f.calls != 3 {
		t.Errorf("two transient failures: %q, %v after %d calls; want success on the 3rd", res.Stdout, err, f.calls)
	}
	if strings.Join(f.stdins, "|") != "key\n|key\n|key\n" {
		t.Errorf("stdin per try: %q", f.stdins)
	}

	f = &flaky{fails: 100, err: transient}
	s = New(Config{Platform: f, TransientBackoff: time.Millisecond})
	_, err = s.exec(t.Context(), inst, "true", nil)
	if err == nil || f.calls != transientTries || !strings.Contains(err.Error(), "tried 4 times") || !errors.Is(err, transient) {
		t.Errorf("always transient: %v after %d calls; want the error after %d tries", err, f.calls, transientTries)
	}

	f = &flaky{fails: 1, err: lost}
	s = New(Config{Platform: f, TransientBackoff: time.Millisecond})
	if _, err = s.exec(t.Context(), inst, "true", nil); !errors.Is(err, lost) || f.calls != 1 {
		t.Errorf("a connection lost mid-command: %v after %d calls; want it returned at once", err, f.calls)
	}

	ctx, cancel := context.WithCancelCause(t.Context())
	f = &flaky{fails: 100, err: transient}
	s = New(Config{Platform: f, TransientBackoff: time.Hour})
	go func() { time.Sleep(20 * time.Millisecond); cancel(errors.New("stop")) }()
	if _, err = s.exec(ctx, inst, "true", nil); err == nil || err.Error() != "stop" {
		t.Errorf("cancelled while waiting to try again: %v; want the cause", err)
	}
}

// TestArchiveRetriesTransient: send's archive follows the same rule as
// exec — a transport failure before the script ran sends a fresh, whole
// archive again; any other failure is returned at once.
func TestArchiveRetriesTransient(t *testing.T) {
	inst := platform.Instance{Name: "gpu"}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(filepath.Join(dir, "a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	files := []localFile{{Rel: "a.txt", Abs: filepath.Join(dir, "a.txt"), Info: fi}}
	transient := &platform.ExecError{Instance: "gpu", Transient: true, Err: errors.New("ssh: connect: Connection refused")}
	lost := &platform.ExecError{Instance: "gpu", Err: errors.New("connection lost while the command ran")}

	f := &flaky{fails: 2, err: transient}
	s := New(Config{Platform: f, TransientBackoff: time.Millisecond})
	res, werr, err := s.execArchive(t.Context(), inst, "true", files)
	if err != nil || werr != nil || string(res.Stdout) != "ran\n" || f.calls != 3 {
		t.Fatalf("two transient failures: %q, %v, %v after %d calls; want success on the 3rd", res.Stdout, werr, err, f.calls)
	}
	for i, in := range f.stdins {
		if in != f.stdins[2] || !strings.Contains(in, "hello") {
			t.Errorf("try %d sent a different or partial archive (%d bytes, want %d)", i+1, len(in), len(f.stdins[2]))
		}
	}

	f = &flaky{fails: 1, err: lost}
	s = New(Config{Platform: f, TransientBackoff: time.Millisecond})
	if _, _, err = s.execArchive(t.Context(), inst, "true", files); !errors.Is(err, lost) || f.calls != 1 {
		t.Errorf("a connection lost mid-command: %v after %d calls; want it returned at once", err, f.calls)
	}
}

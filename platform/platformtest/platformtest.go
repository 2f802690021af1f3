// Package platformtest holds the behaviour every platform's Exec must
// show, as tests each platform package runs against its own instances.
package platformtest

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/taoflow/taoflow/platform"
)

// NewFunc returns a platform and an instance of it to run scripts on.
type NewFunc func(t *testing.T) (platform.Platform, platform.Instance)

// Exec checks what platform.Platform.Exec promises: the script runs under
// sh exactly as written, stdout and stderr come back apart, the exit code
// is the script's (143 when it dies of SIGTERM, 127 for a missing
// command), stdin reaches it whether or not it reads it, and a stdin that
// never ends does not keep Exec from returning.
func Exec(t *testing.T, newInstance NewFunc) {
	type result struct {
		Stdout, Stderr string
		ExitCode       int
	}
	verbatim := "it's \"quoted\" $HOME `id` \\n \\\\ ${X:-y} %s %% * ~ #\n\tsecond line\n'\n"
	tests := map[string]struct {
		script string
		stdin  string
		nilIn  bool
		want   result
	}{
		"exit 0":            {script: "printf out; printf err >&2", want: result{"out", "err", 0}},
		"exit 7":            {script: "echo before; exit 7", want: result{Stdout: "before\n", ExitCode: 7}},
		"exit 255":          {script: "exit 255", want: result{ExitCode: 255}},
		"missing command":   {script: "no-such-command-taoflow 2>/dev/null", want: result{ExitCode: 127}},
		"killed by SIGTERM": {script: "kill -TERM $$", want: result{ExitCode: 143}},
		"stdin reaches it":  {script: `read -r X; printf %s "$X"`, stdin: "hello world\nsecond\n", want: result{Stdout: "hello world"}},
		"nil stdin":         {script: "cat; echo done", nilIn: true, want: result{Stdout: "done\n"}},
		"unread stdin":      {script: "exit 0", stdin: strings.Repeat("x", 1<<20)},
		"all stdin read":    {script: "wc -c | tr -d ' '", stdin: strings.Repeat("x", 1<<20), want: result{Stdout: "1048576\n"}},
		"script verbatim":   {script: "cat <<'EOF'\n" + verbatim + "EOF", want: result{Stdout: verbatim}},
		"runs under sh":     {script: `case $0 in *sh) echo sh;; esac; echo "$#"`, want: result{Stdout: "sh\n0\n"}},
		"no newline at end": {script: "printf 'a'; printf 'b' >&2; exit 3", want: result{"a", "b", 3}},
	}
	pf, inst := newInstance(t)
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var in io.Reader
			if !tt.nilIn {
				in = strings.NewReader(tt.stdin)
			}
			res, err := pf.Exec(context.Background(), inst, tt.script, in)
			if err != nil {
				t.Fatalf("Exec: %v (stderr %q)", err, res.Stderr)
			}
			got := result{string(res.Stdout), string(res.Stderr), res.ExitCode}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	// A pipe given as an *os.File may go to the process as is, with no
	// copy in between: it must still end where the script stops reading,
	// and reach the script whole.
	pipes := map[string]func(t *testing.T) (io.Reader, io.WriteCloser){
		"io.Pipe": func(*testing.T) (io.Reader, io.WriteCloser) { return io.Pipe() },
		"os.Pipe": func(t *testing.T) (io.Reader, io.WriteCloser) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = r.Close() })
			return r, w
		},
	}
	for kind, pipe := range pipes {
		t.Run("stdin never ends/"+kind, func(t *testing.T) {
			r, w := pipe(t)
			defer w.Close()
			go func() { _, _ = w.Write([]byte("first\n")) }() // then nothing, never EOF
			done := make(chan error, 1)
			var res platform.Result
			go func() {
				var err error
				res, err = pf.Exec(context.Background(), inst, `read -r X; printf %s "$X"`, r)
				done <- err
			}()
			select {
			case err := <-done:
				if err != nil || string(res.Stdout) != "first" || res.ExitCode != 0 {
					t.Errorf("Exec = %q, exit %d, %v; want \"first\", exit 0", res.Stdout, res.ExitCode, err)
				}
			case <-time.After(60 * time.Second): // a hang guard, not a timing assertion
				t.Fatal("Exec waited for a stdin that never ends")
			}
		})
		t.Run("all stdin read/"+kind, func(t *testing.T) {
			r, w := pipe(t)
			go func() {
				_, _ = w.Write(bytes.Repeat([]byte("x"), 4<<20))
				_ = w.Close()
			}()
			res, err := pf.Exec(context.Background(), inst, "wc -c | tr -d ' '", r)
			if err != nil || string(res.Stdout) != "4194304\n" || res.ExitCode != 0 {
				t.Errorf("Exec = %q, exit %d, %v; want 4194304, exit 0", res.Stdout, res.ExitCode, err)
			}
		})
	}
}

// Truncated checks output a platform capped at max bytes: a marker line
// "[taoflow: output truncated…" and then exactly the last max bytes.
func Truncated(t *testing.T, name string, out []byte, max int) {
	t.Helper()
	marker, rest, ok := bytes.Cut(out, []byte("\n"))
	if !ok || !bytes.HasPrefix(marker, []byte("[taoflow: output truncated")) {
		t.Errorf("%s does not start with a truncation marker: %.80q", name, out)
		return
	}
	if len(rest) != max {
		t.Errorf("%s kept %d bytes after the marker, want %d", name, len(rest), max)
	}
}

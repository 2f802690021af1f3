// Package platformtest holds the behaviour every platform's Exec must
// show, as tests each platform package runs against its own instances.
package platformtest

import (
	"bytes"
	"context"
	"io"
	"os"
	"strconv"
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

// LongOptions say what a platform's transport cannot do.
type LongOptions struct {
	// NoStdin: the transport passes no stdin (brev exec).
	NoStdin bool
}

// ExecLong checks that a script's size is no limit below
// platform.MaxScript (the kernel caps one argument at 128 KiB, so a
// script must not travel as one): a 1 MiB script runs, a 10 MiB value in
// a script comes back byte for byte and lands in a file whole, stdin
// reaches a long script, its exit code is its own, a script that exits
// before its end does not hang Exec, and a script over MaxScript or with
// a NUL byte is refused with the limit named.
func ExecLong(t *testing.T, newInstance NewFunc, opts LongOptions) {
	pf, inst := newInstance(t)
	ctx := context.Background()
	// value is n bytes of printable lines, none like the heredoc's end.
	value := func(n int) string {
		var b strings.Builder
		for i := 0; b.Len() < n; i++ {
			b.WriteString(strings.Repeat(string(rune('a'+i%26)), 63) + "'\"$`\\\n")
		}
		return b.String()[:n-1] + "\n"
	}
	heredoc := func(v string) string { return "cat <<'TAOFLOW_EOF'\n" + v + "TAOFLOW_EOF\n" }

	t.Run("1 MiB script", func(t *testing.T) {
		v := value(1 << 20)
		res, err := pf.Exec(ctx, inst, heredoc(v)+"exit 7", nil)
		if err != nil || res.ExitCode != 7 || string(res.Stdout) != v {
			t.Errorf("Exec = %d bytes of stdout (want the script's %d byte for byte: %v), exit %d (want 7), %v; stderr %q",
				len(res.Stdout), len(v), string(res.Stdout) == v, res.ExitCode, err, tail(res.Stderr))
		}
	})
	t.Run("10 MiB value", func(t *testing.T) {
		v := value(10 << 20)
		script := "f=$HOME/.taoflow-long-test\ncat >\"$f\" <<'TAOFLOW_EOF'\n" + v + "TAOFLOW_EOF\n" +
			"wc -c <\"$f\" | tr -d ' '; cat \"$f\"; rm -f \"$f\""
		res, err := pf.Exec(ctx, inst, script, nil)
		want := strconv.Itoa(len(v)) + "\n" + v
		if err != nil || res.ExitCode != 0 || string(res.Stdout) != want {
			t.Errorf("Exec = %d bytes of stdout (want %d, byte for byte: %v; starts %.20q), exit %d, %v; stderr %q",
				len(res.Stdout), len(want), string(res.Stdout) == want, res.Stdout, res.ExitCode, err, tail(res.Stderr))
		}
	})
	if !opts.NoStdin {
		t.Run("stdin of a long script", func(t *testing.T) {
			in := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
			script := ": <<'TAOFLOW_EOF'\n" + value(1<<20) + "TAOFLOW_EOF\nread -r first; echo \"$first\" | wc -c | tr -d ' '; wc -c | tr -d ' '"
			res, err := pf.Exec(ctx, inst, script, strings.NewReader("line one\n"+in))
			want := "9\n" + strconv.Itoa(len(in)) + "\n"
			if err != nil || res.ExitCode != 0 || string(res.Stdout) != want {
				t.Errorf("Exec = %q, exit %d, %v; want %q, exit 0; stderr %q", res.Stdout, res.ExitCode, err, want, tail(res.Stderr))
			}
		})
	}
	t.Run("exits before its end", func(t *testing.T) {
		res, err := pf.Exec(ctx, inst, "echo early; exit 3\n"+value(8<<20), nil)
		if err != nil || res.ExitCode != 3 || string(res.Stdout) != "early\n" {
			t.Errorf("Exec = %q, exit %d, %v; want \"early\\n\", exit 3", res.Stdout, res.ExitCode, err)
		}
	})
	t.Run("over the limit", func(t *testing.T) {
		res, err := pf.Exec(ctx, inst, "#"+strings.Repeat("x", platform.MaxScript), nil)
		if err == nil || !strings.Contains(err.Error(), strconv.Itoa(platform.MaxScript)) || res.ExitCode != -1 {
			t.Errorf("Exec of a script over MaxScript = exit %d, %v; want an error naming the limit", res.ExitCode, err)
		}
	})
	t.Run("NUL byte", func(t *testing.T) {
		res, err := pf.Exec(ctx, inst, "echo a\x00b", nil)
		if err == nil || !strings.Contains(err.Error(), "NUL") || res.ExitCode != -1 {
			t.Errorf("Exec of a script with a NUL byte = exit %d, %v; want an error saying NUL", res.ExitCode, err)
		}
	})
}

// tail is the end of b, for messages.
func tail(b []byte) []byte {
	if len(b) > 300 {
		return b[len(b)-300:]
	}
	return b
}

// ExecScriptSizes are the script sizes BenchExecScriptSize runs.
var ExecScriptSizes = []int{1 << 10, 100 << 10, 1 << 20, 10 << 20}

// BenchExecScriptSize runs, for each of ExecScriptSizes, a script of that
// size (`echo ok`, then comment lines) on the platform, one after
// another, and reports its throughput (SetBytes: MB/s) and the memory
// Exec allocates for it. The figures include the shell's reading of the
// script.
func BenchExecScriptSize(b *testing.B, pf platform.Platform, inst platform.Instance) {
	ctx := context.Background()
	for _, size := range ExecScriptSizes {
		line := "# " + strings.Repeat("x", 61) + "\n"
		script := "echo ok\n" + strings.Repeat(line, (size-8)/len(line)) + strings.Repeat("#", (size-8)%len(line))
		if len(script) != size {
			b.Fatalf("script of %d bytes, want %d", len(script), size)
		}
		b.Run(strconv.Itoa(size>>10)+"KiB", func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				res, err := pf.Exec(ctx, inst, script, nil)
				if err != nil || res.ExitCode != 0 || string(res.Stdout) != "ok\n" {
					b.Fatalf("Exec = %q, exit %d, %v", res.Stdout, res.ExitCode, err)
				}
			}
		})
	}
}

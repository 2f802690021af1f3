//go:build linux

package ssh

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/taoflow/taoflow/internal/testrig"
	"github.com/taoflow/taoflow/platform"
)

// dribble writes b to the pipe w in pieces of the given sizes (cycling),
// each a write of its own that the reader has drained (the pipe holds no
// unread byte, FIONREAD) before the next, so that the reader's reads
// return short; then it closes w. It stops waiting once done is closed
// (the reader has exited and will read no more).
func dribble(w *os.File, done <-chan struct{}, b []byte, sizes ...int) {
	defer w.Close()
	for i := 0; len(b) > 0; i++ {
		n := min(sizes[i%len(sizes)], len(b))
		if _, err := w.Write(b[:n]); err != nil {
			return
		}
		b = b[n:]
		drained := testrig.Within(time.Minute, func() bool {
			select {
			case <-done:
				return true
			default:
			}
			left, err := unix.IoctlGetInt(int(w.Fd()), unix.TIOCINQ) // FIONREAD
			return err != nil || left == 0
		})
		if !drained {
			return
		}
	}
}

// pipeTo gives cmd a pipe as its stdin and returns the write end; the
// read end is closed here once cmd has started (see started).
func pipeTo(t *testing.T, cmd *exec.Cmd) (w *os.File, started func()) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = r
	return w, func() { _ = r.Close() }
}

// TestReadFramed runs the remote wrapper itself (no ssh), under dash and
// bash as the login shell, with GNU dd and with a dd that has no
// iflag=fullblock (as BSD's), with its stdin coming in pieces of odd sizes:
// it must take exactly the script's bytes, run the script, and leave the
// job every byte of stdin behind the script; when stdin ends before the
// script has come whole, it must say how much came, run nothing and leave
// no file behind.
func TestReadFramed(t *testing.T) {
	var shells []string
	for _, sh := range []string{"dash", "bash"} {
		if p, err := exec.LookPath(sh); err == nil {
			shells = append(shells, p)
		}
	}
	if len(shells) == 0 {
		t.Fatal("neither dash nor bash is installed")
	}
	// The job's stdin: binary, NULs included.
	job := make([]byte, 300<<10)
	for i := range job {
		job[i] = byte(i * 7)
	}
	script := "touch \"$HOME/ran\"; : <<'EOF'\n" + strings.Repeat("padding line\n", 20000) + "EOF\ncat; echo \"$#\" >&2"
	body := []byte(platform.ScriptBody(script))

	type run struct {
		stdout, stderr []byte
		code           int
		home           string
	}
	// bsd holds a dd that refuses iflag=, as BSD's does.
	bsd := t.TempDir()
	realDD, err := exec.LookPath("dd")
	if err != nil {
		t.Fatal(err)
	}
	fake := "#!/bin/sh\nfor a; do case $a in iflag=*) echo \"dd: unknown operand $a\" >&2; exit 1;; esac; done\nexec " + realDD + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bsd, "dd"), []byte(fake), 0o700); err != nil {
		t.Fatal(err)
	}
	dd := map[string]string{"gnu dd": os.Getenv("PATH"), "bsd dd": bsd + ":" + os.Getenv("PATH")}
	wrap := func(t *testing.T, sh, path string, in []byte, sizes ...int) run {
		home, tmp := t.TempDir(), t.TempDir()
		nonce := newNonce()
		cmd := exec.Command(sh, "-c", remoteCommand(nonce, len(body)))
		cmd.Env = []string{"PATH=" + path, "HOME=" + home, "TMPDIR=" + tmp}
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		w, started := pipeTo(t, cmd)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		started()
		done := make(chan struct{})
		go dribble(w, done, in, sizes...)
		_ = cmd.Wait()
		close(done)
		left, _ := filepath.Glob(filepath.Join(tmp, ".taoflow-*"))
		if len(left) > 0 {
			t.Errorf("the wrapper left %v behind", left)
		}
		m := markerPrefix(nonce)
		return run{out.Bytes(), []byte(strings.ReplaceAll(errb.String(), m, "<m>")), cmd.ProcessState.ExitCode(), home}
	}
	for _, sh := range shells {
		for ddName, path := range dd {
			for name, sizes := range map[string][]int{
				"whole":            {len(body) + len(job)},
				"odd pieces":       {1, 7, 4093, 65536 + 3, 131072},
				"split at the end": {len(body) - 1, 2, 1000},
			} {
				t.Run(filepath.Base(sh)+"/"+ddName+"/"+name, func(t *testing.T) {
					r := wrap(t, sh, path, append(append([]byte(nil), body...), job...), sizes...)
					if r.code != 0 || !bytes.Equal(r.stdout, job) {
						t.Errorf("exit %d, the job's stdin came back %v (%d bytes of %d); stderr %q", r.code, bytes.Equal(r.stdout, job), len(r.stdout), len(job), r.stderr)
					}
					if !bytes.HasSuffix(r.stderr, []byte("0\n<m>rc=0\n")) {
						t.Errorf("stderr %q, want the script's \"0\" (no arguments) and rc=0", r.stderr)
					}
				})
			}
			t.Run(filepath.Base(sh)+"/"+ddName+"/short", func(t *testing.T) {
				r := wrap(t, sh, path, body[:len(body)/2], 1000)
				want := "<m>short=" + strconv.Itoa(len(body)/2) + "\n"
				if r.code != 1 || !strings.HasSuffix(string(r.stderr), want) {
					t.Errorf("exit %d, stderr %q; want exit 1 and %q", r.code, r.stderr, want)
				}
				if _, err := os.Stat(filepath.Join(r.home, "ran")); err == nil {
					t.Error("the script ran although it came in part")
				}
			})
		}
	}
	// While the script comes, it waits in a file of its own: 0600, not a
	// link, named after the nonce; it is gone once the script runs.
	t.Run("private file", func(t *testing.T) {
		home, tmp := t.TempDir(), t.TempDir()
		nonce := newNonce()
		cmd := exec.Command("/bin/sh", "-c", remoteCommand(nonce, len(body)))
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TMPDIR=" + tmp}
		w, started := pipeTo(t, cmd)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		started()
		if _, err := w.Write(body[:100]); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(tmp, ".taoflow-"+nonce+".sh")
		var fi os.FileInfo
		var err error
		testrig.Within(time.Minute, func() bool { fi, err = os.Lstat(path); return err == nil })
		if err != nil || fi.Mode() != 0o600 {
			t.Errorf("the script waits in %s: %v, %v; want a regular file of mode 0600", path, fi, err)
		}
		done := make(chan struct{})
		go dribble(w, done, append(append([]byte(nil), body[100:]...), job...), 65536)
		if err := cmd.Wait(); err != nil {
			t.Errorf("wrapper: %v", err)
		}
		close(done)
		if _, err := os.Lstat(path); err == nil {
			t.Errorf("%s is still there", path)
		}
	})
}

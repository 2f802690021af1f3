package ssh

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/taoflow/taoflow/internal/shellquote"
	"github.com/taoflow/taoflow/platform"
)

// waitDelay bounds how long Exec waits, after the script has ended or the
// ssh client has been killed, for the output to be closed: a process the
// script left running in the background keeps the session's output open,
// and ssh would wait for it.
const waitDelay = 2 * time.Second

// killTimeout bounds the command that kills a cancelled remote command,
// beyond the connect timeout.
const killTimeout = 5 * time.Second

// Exec runs script with /bin/sh on the machine inst.Ref names (the script
// travels ahead of stdin; see the package documentation), with stdin (nil
// is empty) as its stdin, through the instance's master
// connection. At most Config.MaxSessions commands run at once per instance;
// Exec waits for a slot.
//
// The result's exit code is the script's, 128+N when a signal killed it. A
// failure of ssh itself before the script started (connection refused,
// timeout, authentication) is an *platform.ExecError with Transient set;
// the script did not run. With an error the Result's ExitCode is -1, as
// platform.Result says (ssh's own status is in the error). A connection
// lost while the script ran is an ExecError without Transient: the script
// may have run, in part or whole.
//
// When ctx is done, Exec kills the ssh client, kills the remote command's
// whole session (see the package documentation), and returns the output so
// far with an error wrapping context.Cause(ctx). Exec does not wait for
// stdin to reach EOF once the command has ended.
func (s *SSH) Exec(ctx context.Context, inst platform.Instance, script string, stdin io.Reader) (platform.Result, error) {
	return s.exec(ctx, inst, script, stdin, nil)
}

// ExecStream is Exec writing the script's stdout to stdout as it comes,
// uncapped; the Result's Stdout is empty (platform.Streamer). The wrapper's
// markers travel on stderr, so stdout is the script's bytes alone.
func (s *SSH) ExecStream(ctx context.Context, inst platform.Instance, script string, stdin io.Reader, stdout io.Writer) (platform.Result, error) {
	return s.exec(ctx, inst, script, stdin, stdout)
}

func (s *SSH) exec(ctx context.Context, inst platform.Instance, script string, stdin io.Reader, out io.Writer) (platform.Result, error) {
	fail := platform.Result{ExitCode: -1}
	if ctx.Err() != nil {
		return fail, fmt.Errorf("exec on %s: %w", inst.Name, context.Cause(ctx))
	}
	if err := platform.CheckScript(script); err != nil {
		return fail, &platform.ExecError{Instance: inst.Name, Err: err}
	}
	nonce := newNonce()
	// The script is no argument (the kernel caps one at 128 KiB): it goes
	// ahead of stdin, and the remote wrapper reads exactly its length.
	size := len(platform.ScriptPrologue) + len(script) // platform.ScriptBody, not copied
	remote := remoteCommand(nonce, size)
	h, err := s.host(inst.Ref)
	if err != nil {
		return fail, &platform.ExecError{Instance: inst.Name, Err: err}
	}

	select {
	case h.sem <- struct{}{}:
	case <-ctx.Done():
		return fail, fmt.Errorf("exec on %s: %w", inst.Name, context.Cause(ctx))
	}
	defer func() { <-h.sem }()
	if !s.cfg.NoMultiplex {
		if err := s.connect(ctx, inst.Name, h); err != nil {
			var ee *platform.ExecError
			if errors.As(err, &ee) && ee.Transient {
				return fail, err // ssh's own failure: the script did not run
			}
			return fail, err
		}
	}

	stdout := platform.NewTail(s.maxOutput)
	errTail := platform.NewTail(s.maxOutput)
	stderr := newMarkers(markerPrefix(nonce), errTail)
	// Not bound to ctx: watch kills it, then the remote command.
	cmd := s.command(context.Background(), h, []string{"-T"}, remote)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if out != nil {
		cmd.Stdout = out
	}
	// ssh's stdin is the script, then stdin (nil is empty). Exec feeds a
	// pipe itself, so that a reader that never reaches EOF cannot keep
	// Wait from returning.
	r, stdinW, err := os.Pipe()
	if err != nil {
		return fail, &platform.ExecError{Instance: inst.Name, Err: fmt.Errorf("stdin pipe: %w", err), Transient: true}
	}
	defer r.Close()
	defer stdinW.Close()
	cmd.Stdin = r
	if err := cmd.Start(); err != nil {
		return fail, &platform.ExecError{
			Instance:  inst.Name,
			Err:       fmt.Errorf("start %s: %w", s.cfg.Binary, err),
			Transient: errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.ENOMEM),
		}
	}
	_ = r.Close() // ssh has its own copy
	go func() {
		// EPIPE when the script does not read all its stdin.
		_, err := io.WriteString(stdinW, platform.ScriptPrologue)
		if err == nil {
			_, err = io.WriteString(stdinW, script)
		}
		if err == nil && stdin != nil {
			_, _ = io.Copy(stdinW, stdin)
		}
		_ = stdinW.Close()
	}()

	exited := make(chan struct{})
	watched := make(chan bool, 1) // true: the command was cancelled
	go func() { watched <- s.watch(ctx, h, cmd.Process.Pid, nonce, stderr, exited) }()
	waitErr := cmd.Wait()
	close(exited)
	cancelled := <-watched
	_ = stdinW.Close() // stop a copy still writing into a pipe nobody reads
	stderr.flush()
	if !stderr.hasStarted() {
		h.fresh.Store(0) // whatever failed, check the master next time
	}

	res := platform.Result{Stdout: stdout.Bytes(), Stderr: errTail.Bytes(), ExitCode: -1}
	if out != nil {
		res.Stdout = nil
	}
	if cancelled {
		return res, fmt.Errorf("exec on %s: %w", inst.Name, context.Cause(ctx))
	}
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.Is(waitErr, exec.ErrWaitDelay) && !errors.As(waitErr, &exitErr) {
		return res, &platform.ExecError{Instance: inst.Name, Err: waitErr}
	}
	if got, ok := stderr.short(); ok {
		// The wrapper's word: the script came in part, and did not run.
		return res, &platform.ExecError{Instance: inst.Name, Transient: true, Err: fmt.Errorf(
			"ssh %s: %w (%d of %d bytes came before stdin ended)", h.dest.host, platform.ErrScriptShort, got, size)}
	}
	if rc, ok := stderr.exit(); ok {
		// The wrapper's word is final, even when ssh was killed afterwards
		// because something the script left behind kept the output open.
		res.ExitCode = rc
		if !s.cfg.NoMultiplex {
			s.markFresh(h)
		}
		return res, nil
	}
	sshCode := exitCode(cmd.ProcessState)
	switch {
	case !stderr.hasStarted() && sshCode == 255:
		return res, &platform.ExecError{Instance: inst.Name, Transient: true,
			Err: fmt.Errorf("ssh %s: %s", h.dest.host, lastLine(res.Stderr, "exit status 255"))}
	case !stderr.hasStarted():
		return res, &platform.ExecError{Instance: inst.Name, Err: fmt.Errorf(
			"ssh %s: the remote shell exited %d without starting the command (is the login shell a POSIX shell?): %s",
			h.dest.host, sshCode, lastLine(res.Stderr, "no message"))}
	default:
		return res, &platform.ExecError{Instance: inst.Name, Err: fmt.Errorf(
			"ssh %s: the connection ended (ssh exit %d) before the command reported its exit status; it may have run in part, or still run",
			h.dest.host, sshCode)}
	}
}

// watch waits for the ssh client (process group pid) to exit. When ctx is
// done first, it kills the client and then the remote command, and returns
// true. When the script has ended but the client still waits, after
// waitDelay it kills the client, which waits only for output that things
// the script left running in the background still hold open.
func (s *SSH) watch(ctx context.Context, h *host, pid int, nonce string, stderr *markers, exited <-chan struct{}) bool {
	ended := stderr.ended
	var linger <-chan time.Time
	for {
		select {
		case <-exited:
			return false
		case <-ended:
			ended = nil
			t := time.NewTimer(waitDelay)
			defer t.Stop()
			linger = t.C
		case <-linger:
			killUnlessExited(pid, exited)
			return false
		case <-ctx.Done():
			if _, ok := stderr.exit(); ok {
				// The script has ended; only leftovers hold the session.
				killUnlessExited(pid, exited)
				return false
			}
			if !killUnlessExited(pid, exited) {
				return false
			}
			s.killRemote(h, killTarget{nonce: nonce, pid: stderr.startedPID()})
			return true
		}
	}
}

// killUnlessExited kills the process group pid leads, unless Wait has
// already seen pid exit (and so may have let the kernel reuse it).
func killUnlessExited(pid int, exited <-chan struct{}) bool {
	select {
	case <-exited:
		return false
	default:
		_ = platform.KillGroup(pid)
		return true
	}
}

// killTarget is one cancelled remote command: its nonce, and the session
// id its wrapper reported (0 if it had not yet).
type killTarget struct {
	nonce string
	pid   int
}

// killRemote kills the remote sessions of t and of every other command on
// h cancelled meanwhile, with one ssh command for all of them, so that a
// mass cancel costs one session and, on an unreachable host, one timeout.
// It returns when a kill command that included t has finished or timed out.
func (s *SSH) killRemote(h *host, t killTarget) {
	h.pendMu.Lock()
	h.pending = append(h.pending, t)
	h.pendMu.Unlock()

	// A round that started after t was queued includes it: when this lock
	// is ours, either an earlier round took t, or t is still pending.
	h.killMu.Lock()
	defer h.killMu.Unlock()
	h.pendMu.Lock()
	batch := h.pending
	h.pending = nil
	h.pendMu.Unlock()
	if len(batch) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ConnectTimeout+killTimeout)
	defer cancel()
	_ = s.command(ctx, h, []string{"-T"}, killCommand(batch)).Run()
}

// newNonce returns 16 random hex digits.
func newNonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func markerPrefix(nonce string) string { return "__taoflow_" + nonce + ":" }

// wrapper runs the script in the remote session. It registers its
// process id (the session id) in $TMPDIR/.taoflow-<nonce> with O_EXCL
// (set -C); if that file already exists, a kill command came first, and it
// exits without running the script. It reports its start and the script's
// exit status on stderr, through fd 4: its own fd 2 is /dev/null, so that
// the "Terminated" a shell prints about a child killed by a signal is not
// mistaken for the script's output. A script killed by signal N is
// reported as 128+N, where ssh would report 255.
//
// The script is no argument: it comes first on stdin, $1 bytes of it.
// The wrapper copies exactly that many into a new private file (O_EXCL,
// mode 0600, named after the nonce) with dd, never asking read(2) for
// more than the bytes still missing, so that not one byte of the job's
// stdin behind it is taken: with iflag=fullblock (GNU, busybox) in blocks
// of 64 KiB and one of the rest, whole when dd says it read only whole
// blocks; where dd refuses that (BSD) or stops short, from where it
// stopped one read at a time, the file's size checked after each; it opens the file as fd 3, removes it, and sources
// it from there (platform.ScriptCommand). When stdin ends first, it
// reports "short=" and the bytes it got, and runs nothing.
const wrapper = `f="${TMPDIR:-/tmp}/.taoflow-NONCE"
set -C
if ! { echo "$$" >"$f"; } 2>/dev/null; then
	if [ -e "$f" ]; then rm -f "$f"; exit 137; fi
	f=
fi
set +C
exec 4>&2 2>/dev/null
printf '%spid=%s\n' 'PREFIX' "$$" >&4
n=$1 h=0 s=
for d in "${TMPDIR:-/tmp}" /tmp "$HOME"; do
	if (set -C; umask 077; : >"$d/.taoflow-NONCE.sh"); then s="$d/.taoflow-NONCE.sh"; break; fi
done
if [ -n "$s" ]; then
	q=$((n / 65536)) r=$((n % 65536))
	if { [ "$q" -eq 0 ] || case $(LC_ALL=C dd bs=65536 count="$q" iflag=fullblock 2>&1 >>"$s") in "$q+0 records in"*) ;; *) false ;; esac; } &&
		{ [ "$r" -eq 0 ] || case $(LC_ALL=C dd bs="$r" count=1 iflag=fullblock 2>&1 >>"$s") in "1+0 records in"*) ;; *) false ;; esac; }; then
		h=$n
	else
		h=$(($(wc -c <"$s")))
	fi
	while [ "$h" -lt "$n" ]; do
		b=$((n - h)); [ "$b" -le 1048576 ] || b=1048576
		dd bs="$b" count=1 >>"$s" || break
		g=$(($(wc -c <"$s")))
		[ "$g" -gt "$h" ] || break
		h=$g
	done
fi
if [ -n "$s" ]; then
	exec 3<"$s"
	rm -f "$s"
fi
if [ "$h" -ne "$n" ]; then
	[ -z "$f" ] || rm -f "$f"
	printf '%sshort=%s\n' 'PREFIX' "$h" >&4
	exit 1
fi
(exec 2>&4 4>&-; exec /bin/sh -c 'SCRIPTCOMMAND')
rc=$?
[ -z "$f" ] || rm -f "$f"
printf '%src=%s\n' 'PREFIX' "$rc" >&4
exit "$rc"`

// remoteCommand is what ssh asks the remote login shell to run: the
// wrapper, told the script's length (size bytes, on stdin).
func remoteCommand(nonce string, size int) string {
	w := strings.NewReplacer("NONCE", nonce, "PREFIX", markerPrefix(nonce), "SCRIPTCOMMAND", platform.ScriptCommand).Replace(wrapper)
	return "exec /bin/sh -c " + shellquote.Quote(w) + " sh " + strconv.Itoa(size)
}

// killLoop kills each "nonce:pid" session: it takes the wrapper's file
// with O_EXCL — then the wrapper has not started, and when it does it finds
// the file, removes it and exits; a minute later the file is removed in
// case it never starts — or else reads the session id from the file.
const killLoop = `d="${TMPDIR:-/tmp}"
for t in TARGETS; do
	p=${t#*:} f="$d/.taoflow-${t%%:*}"
	if (set -C; echo cancelled >"$f") 2>/dev/null; then
		(sleep 60; rm -f "$f") </dev/null >/dev/null 2>&1 &
	else
		q=$(cat "$f" 2>/dev/null)
		case $q in ''|*[!0-9]*) ;; *) p=$q ;; esac
		rm -f "$f"
	fi
	case $p in ''|0|1|*[!0-9]*) rm -f "$f.sh"; continue ;; esac
	pkill -KILL -s "$p" 2>/dev/null
	kill -9 "-$p" 2>/dev/null
	rm -f "$f.sh"
done
exit 0`

// killCommand is the remote command that kills the sessions of targets.
func killCommand(targets []killTarget) string {
	words := make([]string, len(targets))
	for i, t := range targets {
		words[i] = t.nonce + ":" + strconv.Itoa(t.pid)
	}
	k := strings.Replace(killLoop, "TARGETS", strings.Join(words, " "), 1)
	return "exec /bin/sh -c " + shellquote.Quote(k)
}

// exitCode reports a process's status as a shell would: the exit status, or
// 128+N for a process killed by signal N.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

var _ platform.Streamer = (*SSH)(nil)

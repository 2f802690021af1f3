package brev

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"syscall"

	"github.com/taoflow/taoflow/internal/shellquote"
	"github.com/taoflow/taoflow/platform"
)

// maxExecArg bounds the command of one brev exec. The kernel caps one
// argument at 128 KiB (MAX_ARG_STRLEN), and the command is one argument
// of brev, then part of the one of `bash -c` (brev quotes it there, each single quote
// growing to four bytes, next to its ssh options), then of ssh and of the
// remote $SHELL -c. A wrapped script longer than this, so quoted, is sent
// in pieces (stagedExec).
const maxExecArg = 96 << 10

// pieceSize is the base64 text one piece of a staged script carries.
const pieceSize = 64 << 10

// Exec runs script under sh on the instance inst.Ref names. A non-zero
// exit is Result.ExitCode, not an error. No transport puts a long script
// on a command line (the kernel caps one argument at 128 KiB).
//
// With TransportSSH (the default), Exec goes through OpenSSH (see package
// platform/ssh) to the alias `brev refresh` wrote for the instance: stdin
// (secrets) reaches the script, the exit code is the real one, and the
// commands of an instance share one connection.
//
// With TransportExec, Exec runs `brev exec -- NAME COMMAND`, where COMMAND
// runs the script and then prints its exit code after a marker with a
// fresh random nonce, so that ssh always exits 0: brev, which runs a
// command a second time after any non-zero exit, never runs it twice, and
// the real exit code comes back although brev's own is only ever 0 or 1.
// Stdout is the script's output alone: the marker line and the instance
// name that brev prints after it are taken off. A script whose command
// would be over maxExecArg goes in pieces: gzipped, base64-encoded, each
// piece one brev exec that writes it to a private directory on the
// instance, then one more that joins, checks and runs it (stagedExec).
// brev exec cannot pass
// stdin, so a non-empty stdin is refused: secrets must then be Brev
// secrets, listed under platform.instance_env. When brev fails before the
// marker comes, the error is a *platform.ExecError, Transient when brev
// says the connection failed (the command did not run).
func (b *Brev) Exec(ctx context.Context, inst platform.Instance, script string, stdin io.Reader) (platform.Result, error) {
	if b.cfg.Transport == TransportExec {
		return b.brevExec(ctx, inst, script, stdin)
	}
	if inst.Ref == "" {
		return platform.Result{ExitCode: -1}, &platform.ExecError{Instance: inst.Name, Err: errors.New("no brev instance name (Ref)")}
	}
	s, err := b.transport()
	if err != nil {
		return platform.Result{ExitCode: -1}, &platform.ExecError{Instance: inst.Name, Err: err}
	}
	return s.Exec(ctx, inst, script, stdin)
}

// ExecStream is Exec writing the script's stdout to stdout as it comes
// (platform.Streamer), over the ssh transport only: brev exec echoes the
// instance name into stdout and replays a command that exits non-zero, so
// its stdout is no clean byte stream.
func (b *Brev) ExecStream(ctx context.Context, inst platform.Instance, script string, stdin io.Reader, stdout io.Writer) (platform.Result, error) {
	fail := platform.Result{ExitCode: -1}
	if b.cfg.Transport == TransportExec {
		return fail, &platform.ExecError{Instance: inst.Name, Err: fmt.Errorf("%w: streaming needs transport: ssh (brev exec has no stdin and mixes its own output into stdout)", platform.ErrNoStream)}
	}
	if inst.Ref == "" {
		return fail, &platform.ExecError{Instance: inst.Name, Err: errors.New("no brev instance name (Ref)")}
	}
	s, err := b.transport()
	if err != nil {
		return fail, &platform.ExecError{Instance: inst.Name, Err: err}
	}
	return s.ExecStream(ctx, inst, script, stdin, stdout)
}

// CanStream reports whether ExecStream can work: not over brev exec
// (platform.StreamChecker).
func (b *Brev) CanStream() bool { return b.cfg.Transport != TransportExec }

// brevExec is Exec with TransportExec.
func (b *Brev) brevExec(ctx context.Context, inst platform.Instance, script string, stdin io.Reader) (platform.Result, error) {
	fail := platform.Result{ExitCode: -1}
	refuse := func(err error) (platform.Result, error) {
		return fail, &platform.ExecError{Instance: inst.Name, Err: err}
	}
	if ctx.Err() != nil {
		return fail, fmt.Errorf("exec on %s: %w", inst.Name, context.Cause(ctx))
	}
	if b.closed.Load() {
		return refuse(errors.New("the brev platform is closed"))
	}
	if !safeName(inst.Ref) {
		return refuse(fmt.Errorf("%q is not a brev instance name", inst.Ref))
	}
	if err := platform.CheckScript(script); err != nil {
		return refuse(err)
	}
	if empty, err := isEmpty(ctx, stdin); err != nil {
		return fail, fmt.Errorf("exec on %s: %w", inst.Name, err)
	} else if !empty {
		return refuse(errors.New("brev exec cannot pass stdin to a command (brev reads its stdin as instance names): " +
			"make secrets Brev secrets and list them under platform.instance_env, or use transport: ssh"))
	}
	if _, err := b.Check(ctx); err != nil {
		return refuse(err)
	}
	if !inst.Created {
		// brev exec starts a STOPPED instance itself (billing): one that
		// taoflow did not create is looked at first, and never started.
		if err := b.Find(ctx, inst); errors.Is(err, platform.ErrStopped) {
			return refuse(fmt.Errorf("not running brev exec: %w; brev exec would start it, and taoflow never starts an instance it did not create (start it yourself, or stop the run)", err))
		}
	}
	bin, err := b.binary()
	if err != nil {
		return refuse(err)
	}
	nonce := newNonce()
	b.execUse(inst.Ref)
	if command := wrapScript(script, nonce); brevArgLen(command) <= maxExecArg {
		return b.execOnce(ctx, inst, bin, command, nonce)
	}
	return b.stagedExec(ctx, inst, bin, script, nonce)
}

// execOnce runs one brev exec of command (made by wrapScript or a
// staging command, with nonce's marker) and takes its output apart.
func (b *Brev) execOnce(ctx context.Context, inst platform.Instance, bin, command, nonce string) (platform.Result, error) {
	stdout, stderr := platform.NewTail(b.maxOutput), platform.NewTail(b.maxOutput)
	cmd := b.command(ctx, bin, "exec", "--", inst.Ref, command)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	waitErr := cmd.Run()
	res := platform.Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: -1}
	if ctx.Err() != nil {
		return res, fmt.Errorf("exec on %s: %w", inst.Name, context.Cause(ctx))
	}
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.Is(waitErr, exec.ErrWaitDelay) && !errors.As(waitErr, &exitErr) {
		return res, &platform.ExecError{
			Instance:  inst.Name,
			Err:       fmt.Errorf("brev exec: %w", waitErr),
			Transient: errors.Is(waitErr, syscall.EAGAIN) || errors.Is(waitErr, syscall.ENOMEM),
		}
	}
	if out, rc, ok := parseExecOutput(res.Stdout, nonce, inst.Ref); ok {
		// The marker is the script's own word, whatever brev did after.
		res.Stdout, res.ExitCode = out, rc
		if rest, ok := bytes.CutPrefix(res.Stdout, []byte(startingLine(inst.Ref))); ok {
			// brev found the instance STOPPED and started it before it
			// ran the command: it bills again.
			res.Stdout = rest
			b.progress(inst.Name, fmt.Sprintf("brev exec found %s STOPPED and started it again (it bills again)", inst.Ref))
		}
		return res, nil
	}
	code := cmd.ProcessState.ExitCode()
	transient := execTransient(res.Stderr)
	why := "the command did not run"
	if !transient {
		why = "the command may not have run"
	}
	return res, &platform.ExecError{
		Instance:  inst.Name,
		Transient: transient,
		Err:       fmt.Errorf("brev exec -- %s exited %d without the command's exit status (%s): %s", inst.Ref, code, why, summary(b.cfg.Redactor, res.Stderr, nil)),
	}
}

// startingLine is what brev exec prints on stdout, before the command's
// output, when it starts a STOPPED instance to run the command.
func startingLine(ref string) string { return "Instance " + ref + " is starting. \n\n" }

// execTransient reports whether brev exec's stderr says the connection
// failed — the wrapped command always exits 0, so a failing ssh is ssh's
// own failure (255) and the command did not run.
func execTransient(stderr []byte) bool {
	for _, s := range []string{"Connection failed", "could not connect", "exit status 255"} {
		if bytes.Contains(stderr, []byte(s)) {
			return true
		}
	}
	return false
}

// isEmpty reports whether r has nothing to read. A nil r is empty; a
// reader with a Len (strings.Reader, bytes.Reader, bytes.Buffer) is asked;
// any other is read one byte from, bounded by ctx.
func isEmpty(ctx context.Context, r io.Reader) (bool, error) {
	if r == nil {
		return true, nil
	}
	if l, ok := r.(interface{ Len() int }); ok {
		return l.Len() == 0, nil
	}
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		var one [1]byte
		n, err := io.ReadFull(r, one[:])
		done <- result{n, err}
	}()
	select {
	case res := <-done:
		if res.n > 0 {
			return false, nil
		}
		if res.err != nil && !errors.Is(res.err, io.EOF) {
			return false, fmt.Errorf("reading stdin: %w", res.err)
		}
		return true, nil
	case <-ctx.Done():
		return false, context.Cause(ctx)
	}
}

// newNonce returns 16 random hex digits.
func newNonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// marker is what precedes the exit code on the line the wrapper prints
// after the script.
func marker(nonce string) string { return "__TAOFLOW_RC_" + nonce + "=" }

// wrapScript is the one command brev exec is given: the script under sh -c,
// then a newline, the marker and its exit code on a line of their own. The
// remote shell then exits 0 (printf's status), whatever the script did.
func wrapScript(script, nonce string) string {
	return "sh -c " + shellquote.Quote(script) + `; rc=$?; printf '\n` + marker(nonce) + `%d\n' "$rc"`
}

// parseExecOutput takes the script's output and exit code out of what brev
// exec printed: everything before the newline that precedes the last
// marker of nonce, and the number after it. What follows the number — a
// newline and the instance name, which brev prints when its stdout is not
// a terminal, or the name glued to the number — is dropped. ok is false
// when there is no marker of nonce with a number.
func parseExecOutput(out []byte, nonce, name string) (stdout []byte, rc int, ok bool) {
	m := []byte("\n" + marker(nonce))
	i := bytes.LastIndex(out, m)
	if i < 0 {
		return nil, 0, false
	}
	rest := out[i+len(m):]
	digits := bytes.TrimSuffix(rest, []byte("\n"))
	if name != "" && bytes.HasSuffix(digits, []byte(name)) {
		digits = bytes.TrimSuffix(digits[:len(digits)-len(name)], []byte("\n"))
	}
	if !allDigits(digits) {
		// Something else came after the marker (output of a process the
		// script left running): the number ends at the first non-digit.
		n := 0
		for n < len(rest) && '0' <= rest[n] && rest[n] <= '9' {
			n++
		}
		digits = rest[:n]
	}
	if len(digits) == 0 || len(digits) > 3 {
		return nil, 0, false
	}
	rc, err := strconv.Atoi(string(digits))
	if err != nil || rc > 255 {
		return nil, 0, false
	}
	return out[:i], rc, true
}

func allDigits(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

var _ platform.Streamer = (*Brev)(nil)

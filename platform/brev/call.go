package brev

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/taoflow/taoflow/platform"
	"github.com/taoflow/taoflow/secret"
)

// waitDelay bounds how long a brev command's output is waited for after
// brev has exited or been killed: the ssh master that brev exec may leave
// behind (ControlPersist) can hold a copy of it.
const waitDelay = 2 * time.Second

// maxCallOutput caps what is kept of each stream of a lifecycle call. The
// spinner writes ten frames a second to stderr for as long as a call runs.
const maxCallOutput = 4 << 20

// command returns the brev command with args, in its own process group,
// killed as a group when ctx is done. Its stdin stays nil, which is
// /dev/null: a character device, so brev reads no instance names from it
// and never waits for an EOF that does not come.
func (b *Brev) command(ctx context.Context, bin string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = b.env
	platform.InGroup(cmd, waitDelay)
	return cmd
}

// callError is a brev lifecycle command that failed. brev exits 1 on every
// error, so what failed is told by the text it printed, which says() finds.
type callError struct {
	cmd    string // "brev delete -- tf-x"; never holds a secret
	code   int    // exit status; -1 when killed
	stdout []byte
	stderr []byte
	cause  error // set when the call was killed for taking too long
	red    *secret.Redactor
}

func (e *callError) Error() string {
	if e.cause != nil {
		return fmt.Sprintf("%s: %v", e.cmd, e.cause)
	}
	return fmt.Sprintf("%s: exit status %d: %s", e.cmd, e.code, summary(e.red, e.stderr, e.stdout))
}

func (e *callError) Unwrap() error { return e.cause }

// says reports whether brev printed text.
func (e *callError) says(text string) bool {
	return bytes.Contains(e.stderr, []byte(text)) || bytes.Contains(e.stdout, []byte(text))
}

// says reports whether err is a brev command failure whose output holds
// text.
func says(err error, text string) bool {
	var ce *callError
	return errors.As(err, &ce) && ce.says(text)
}

// call runs one brev lifecycle command, bounded by Config.CallTimeout, and
// returns its stdout. A failure is a *callError; a ctx that is done is an
// error wrapping context.Cause(ctx).
func (b *Brev) call(ctx context.Context, args ...string) ([]byte, error) {
	bin, err := b.binary()
	if err != nil {
		return nil, err
	}
	return b.callWith(ctx, bin, args...)
}

func (b *Brev) callWith(ctx context.Context, bin string, args ...string) ([]byte, error) {
	name := "brev " + strings.Join(args, " ")
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%s: %w", name, context.Cause(ctx))
	}
	timeout := fmt.Errorf("did not finish within %v (call timeout) and was killed", b.cfg.CallTimeout)
	cctx, cancel := context.WithTimeoutCause(ctx, b.cfg.CallTimeout, timeout)
	defer cancel()
	stdout, stderr := platform.NewTail(maxCallOutput), platform.NewTail(maxCallOutput)
	cmd := b.command(cctx, bin, args...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	runErr := cmd.Run()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%s: %w", name, context.Cause(ctx))
	}
	ce := &callError{cmd: name, code: -1, stdout: stdout.Bytes(), stderr: stderr.Bytes(), red: b.cfg.Redactor}
	if cctx.Err() != nil {
		ce.cause = context.Cause(cctx)
		return nil, ce
	}
	var exitErr *exec.ExitError
	switch {
	case runErr == nil, errors.Is(runErr, exec.ErrWaitDelay):
		// ErrWaitDelay: brev exited 0, and something it left running kept
		// its output open.
		return ce.stdout, nil
	case errors.As(runErr, &exitErr):
		ce.code = exitErr.ExitCode()
		return nil, ce
	default:
		ce.cause = runErr
		return nil, ce
	}
}

// splitLines splits what brev printed into lines. Its spinner redraws itself
// with "\r" even when stderr is not a terminal, so "\r" ends a line as "\n"
// does; terminal escape sequences are dropped, surrounding space trimmed and
// empty lines left out.
func splitLines(b []byte) []string {
	b = ansi.ReplaceAll(b, nil)
	var lines []string
	for _, l := range strings.FieldsFunc(string(b), func(r rune) bool { return r == '\n' || r == '\r' }) {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// ansi matches a terminal control sequence (colours, erase-line).
var ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)

// summary is the end of what a failed brev command printed, for an error
// message: its last three lines (of stderr, else of stdout), each at most
// 300 bytes (redacted by red first), without the stack-frame lines brev's
// errors carry.
func summary(red *secret.Redactor, stderr, stdout []byte) string {
	lines := splitLines(stderr)
	if len(lines) == 0 {
		lines = splitLines(stdout)
	}
	var keep []string
	for i := len(lines) - 1; i >= 0 && len(keep) < 3; i-- {
		l := lines[i]
		if isFrame(l) {
			continue
		}
		if c := red.Clip(l, 300); len(keep) == 0 || keep[0] != c {
			keep = append([]string{c}, keep...)
		}
	}
	if len(keep) == 0 {
		return "no message"
	}
	// The cause often comes before the last lines (brev create's
	// "unexpected EOF", then its "Only created 0/1" and a next type's
	// failure): the first line that names a failure leads.
	for _, l := range lines {
		if c := red.Clip(l, 300); !isFrame(l) && causeLine.MatchString(l) && !slices.Contains(keep, c) {
			keep = append([]string{c}, keep...)
			break
		}
	}
	return strings.Join(keep, " | ")
}

// causeLine matches a line that says what failed.
var causeLine = regexp.MustCompile(`(?i)unexpected EOF|\bfailed\b|\berror\b|timeout|refused`)

// frame matches a line of the Go stack traces that brev's pkg/errors
// messages embed ("[error]", "github.com/brevdev/…", "/home/…/x.go:12").
var frame = regexp.MustCompile(`^([*:]?\s*\[error\]$|github\.com/\S+$|\S+\.go:\d+$)`)

func isFrame(l string) bool { return frame.MatchString(l) }

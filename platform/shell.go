package platform

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// shellWaitDelay bounds how long Shell waits, after the shell has exited or
// been killed, for processes it left behind to close its output pipes.
const shellWaitDelay = 2 * time.Second

// Shell runs script with /bin/sh on this machine, for a platform whose
// instances are (or whose commands run on) this machine: the local
// sandboxes and Slurm without a login node. The shell reads the script on
// descriptor 3 (ScriptFD), never as an argument; it runs in dir with env
// (nil: this process's environment) and stdin (nil is empty), in its own
// process group. Shell does not wait for stdin to reach EOF once the script
// has ended; a reader that blocks may then still be read from after Shell
// returns.
//
// When ctx is done, the whole group is killed with SIGKILL and Shell returns
// the output so far with an error wrapping context.Cause(ctx). Output beyond
// maxOutput per stream keeps its tail behind a marker line; with out non-nil
// stdout goes there as it comes, uncapped, and the Result's Stdout is empty.
// name is the instance's name, for errors.
func Shell(ctx context.Context, name, dir string, env []string, script string, stdin io.Reader, out io.Writer, maxOutput int) (Result, error) {
	fail := Result{ExitCode: -1}
	if ctx.Err() != nil {
		return fail, fmt.Errorf("exec on %s: %w", name, context.Cause(ctx))
	}
	if err := CheckScript(script); err != nil {
		return fail, &ExecError{Instance: name, Err: err}
	}

	stdout, stderr := NewTail(maxOutput), NewTail(maxOutput)
	// The script is no argument (the kernel caps one at 128 KiB): the
	// shell reads it on descriptor 3, so stdin stays the job's.
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", ScriptCommand)
	startScript, scriptDone, err := ScriptFD(cmd, script)
	if err != nil {
		return fail, &ExecError{Instance: name, Err: err, Transient: true}
	}
	defer scriptDone()
	cmd.Dir = dir
	cmd.Env = env
	// A nil Stdin reads /dev/null. An *os.File (a pipe the caller writes
	// an archive into, say) is the process's stdin itself: no copy in
	// between, and Wait does not wait for it. Otherwise Shell feeds a pipe
	// itself, so that a reader that never reaches EOF cannot keep Wait
	// from returning.
	var stdinW *os.File
	if f, ok := stdin.(*os.File); ok && f != nil {
		cmd.Stdin = f
	} else if stdin != nil {
		r, w, err := os.Pipe()
		if err != nil {
			return fail, &ExecError{Instance: name, Err: fmt.Errorf("stdin pipe: %w", err), Transient: true}
		}
		defer r.Close()
		defer w.Close()
		cmd.Stdin, stdinW = r, w
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if out != nil {
		cmd.Stdout = out
	}
	InGroup(cmd, shellWaitDelay)

	if err := cmd.Start(); err != nil {
		if ctx.Err() != nil {
			return fail, fmt.Errorf("exec on %s: %w", name, context.Cause(ctx))
		}
		return fail, &ExecError{
			Instance:  name,
			Err:       fmt.Errorf("start /bin/sh: %w", err),
			Transient: errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.ENOMEM),
		}
	}
	startScript()
	if stdinW != nil {
		_ = cmd.Stdin.(*os.File).Close() // the shell has its own copy
		go func() {
			_, _ = io.Copy(stdinW, stdin) // EPIPE when the script does not read it all
			_ = stdinW.Close()
		}()
	}
	waitErr := cmd.Wait()
	scriptDone()
	if stdinW != nil {
		_ = stdinW.Close() // stop a copy still writing into a pipe nobody reads
	}
	res := Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: -1}
	if out != nil {
		res.Stdout = nil
	}
	if ctx.Err() != nil {
		return res, fmt.Errorf("exec on %s: %w", name, context.Cause(ctx))
	}
	var exitErr *exec.ExitError
	switch {
	case waitErr == nil, errors.Is(waitErr, exec.ErrWaitDelay), errors.As(waitErr, &exitErr):
		// ErrWaitDelay: the shell exited 0 but something it started in the
		// background kept the output pipes open; that is still an exit 0.
		res.ExitCode = shellExitCode(cmd.ProcessState)
		return res, nil
	default:
		return res, &ExecError{Instance: name, Err: waitErr}
	}
}

// shellExitCode reports a process's status as a shell would: the exit
// status, or 128+N for a process killed by signal N.
func shellExitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

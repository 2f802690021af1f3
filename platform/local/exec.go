package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/taoflow/taoflow/platform"
)

// waitDelay bounds how long Exec waits, after the shell has exited or been
// killed, for processes it left behind to close its output pipes.
const waitDelay = 2 * time.Second

// Exec runs script with /bin/sh in the sandbox inst.Ref (the shell reads it
// on descriptor 3: platform.ScriptFD), with a clean
// environment (see the package documentation) and stdin (nil is empty).
// Exec does not wait for stdin to reach EOF once the script has ended; a
// reader that blocks may then still be read from after Exec returns.
//
// The script runs in its own process group. When ctx is done, the whole group
// is killed with SIGKILL and Exec returns the output so far with an error
// wrapping context.Cause(ctx). Output beyond MaxOutput per stream keeps its
// tail behind a marker line.
func (l *Local) Exec(ctx context.Context, inst platform.Instance, script string, stdin io.Reader) (platform.Result, error) {
	return l.exec(ctx, inst, script, stdin, nil)
}

// ExecStream is Exec writing the script's stdout to stdout as it comes,
// uncapped; the Result's Stdout is empty (platform.Streamer).
func (l *Local) ExecStream(ctx context.Context, inst platform.Instance, script string, stdin io.Reader, stdout io.Writer) (platform.Result, error) {
	return l.exec(ctx, inst, script, stdin, stdout)
}

func (l *Local) exec(ctx context.Context, inst platform.Instance, script string, stdin io.Reader, out io.Writer) (platform.Result, error) {
	fail := platform.Result{ExitCode: -1}
	if ctx.Err() != nil {
		return fail, fmt.Errorf("exec on %s: %w", inst.Name, context.Cause(ctx))
	}
	if inst.Ref == "" || !filepath.IsAbs(inst.Ref) {
		return fail, &platform.ExecError{Instance: inst.Name, Err: fmt.Errorf("sandbox path %q is not absolute", inst.Ref)}
	}
	if fi, err := os.Stat(inst.Ref); errors.Is(err, fs.ErrNotExist) {
		return fail, &platform.ExecError{Instance: inst.Name, Err: fmt.Errorf("sandbox %s: %w", inst.Ref, platform.ErrNotFound)}
	} else if err != nil {
		return fail, &platform.ExecError{Instance: inst.Name, Err: err}
	} else if !fi.IsDir() {
		return fail, &platform.ExecError{Instance: inst.Name, Err: fmt.Errorf("sandbox %s is not a directory", inst.Ref)}
	}

	if err := platform.CheckScript(script); err != nil {
		return fail, &platform.ExecError{Instance: inst.Name, Err: err}
	}

	stdout, stderr := platform.NewTail(l.maxOutput), platform.NewTail(l.maxOutput)
	// The script is no argument (the kernel caps one at 128 KiB): the
	// shell reads it on descriptor 3, so stdin stays the job's.
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", platform.ScriptCommand)
	startScript, scriptDone, err := platform.ScriptFD(cmd, script)
	if err != nil {
		return fail, &platform.ExecError{Instance: inst.Name, Err: err, Transient: true}
	}
	defer scriptDone()
	cmd.Dir = inst.Ref
	cmd.Env = environ(inst.Ref)
	// A nil Stdin reads /dev/null. An *os.File (a pipe the caller writes
	// an archive into, say) is the process's stdin itself: no copy in
	// between, and Wait does not wait for it. Otherwise Exec feeds a pipe
	// itself, so that a reader that never reaches EOF cannot keep Wait
	// from returning.
	var stdinW *os.File
	if f, ok := stdin.(*os.File); ok && f != nil {
		cmd.Stdin = f
	} else if stdin != nil {
		r, w, err := os.Pipe()
		if err != nil {
			return fail, &platform.ExecError{Instance: inst.Name, Err: fmt.Errorf("stdin pipe: %w", err), Transient: true}
		}
		defer r.Close()
		defer w.Close()
		cmd.Stdin, stdinW = r, w
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if out != nil {
		cmd.Stdout = out
	}
	platform.InGroup(cmd, waitDelay)

	if err := cmd.Start(); err != nil {
		if ctx.Err() != nil {
			return fail, fmt.Errorf("exec on %s: %w", inst.Name, context.Cause(ctx))
		}
		return fail, &platform.ExecError{
			Instance:  inst.Name,
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
	res := platform.Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: -1}
	if out != nil {
		res.Stdout = nil
	}
	if ctx.Err() != nil {
		return res, fmt.Errorf("exec on %s: %w", inst.Name, context.Cause(ctx))
	}
	var exitErr *exec.ExitError
	switch {
	case waitErr == nil, errors.Is(waitErr, exec.ErrWaitDelay), errors.As(waitErr, &exitErr):
		// ErrWaitDelay: the shell exited 0 but something it started in the
		// background kept the output pipes open; that is still an exit 0.
		res.ExitCode = exitCode(cmd.ProcessState)
		return res, nil
	default:
		return res, &platform.ExecError{Instance: inst.Name, Err: waitErr}
	}
}

// exitCode reports a process's status as a shell would: the exit status, or
// 128+N for a process killed by signal N.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// environ is the whole environment of a command in sandbox dir. Nothing else
// of taoflow's environment is passed on: it holds secret values.
func environ(dir string) []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	env := []string{
		"HOME=" + dir,
		"TMPDIR=" + filepath.Join(dir, "tmp"),
		"PATH=" + path,
		"LANG=C.UTF-8",
	}
	for _, name := range []string{"USER", "LOGNAME", "DOCKER_HOST"} {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return env
}

var _ platform.Streamer = (*Local)(nil)

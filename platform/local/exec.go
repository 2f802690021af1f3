package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/taoflow/taoflow/platform"
)

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

	return platform.Shell(ctx, inst.Name, inst.Ref, environ(inst.Ref), script, stdin, out, l.maxOutput)
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

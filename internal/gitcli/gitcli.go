// Package gitcli runs the git command line for taoflow's own questions
// about the repository on this machine (provenance, what send copies): with
// a minimal environment (no credential prompt, no pager, no optional
// locks, no fsmonitor), no stdin, in its own process group, killed with
// that group when its context ends. Standard library only.
package gitcli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// ErrNoGit is what an error wraps when git is not installed.
var ErrNoGit = errors.New("git is not installed")

// Command is git run in dir with args: PATH and HOME from taoflow's
// environment and nothing else of it, stdin /dev/null, in a process group
// of its own that is killed (SIGKILL) when ctx ends, so that a git that
// hangs, or a helper it started, cannot hold the caller. Its output pipes
// are closed 2 s after that at the latest.
func Command(ctx context.Context, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir, "-c", "core.fsmonitor=false", "-c", "core.quotepath=false"}, args...)...)
	env := []string{"GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0", "GIT_PAGER=cat", "LC_ALL=C"}
	for _, k := range []string{"PATH", "HOME"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	cmd.Env = env
	cmd.Stdin = nil // /dev/null
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	return cmd
}

// Output runs git in dir and returns its stdout. A failure names the git
// subcommand and carries git's own message (its first line); a git that
// ctx stopped is ctx's cause; a missing git wraps ErrNoGit.
func Output(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := Command(ctx, dir, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, Explain(ctx, args[0], err, stderr.Bytes())
	}
	return out, nil
}

// Explain turns the error of a git run into one a person can read: a
// missing git (ErrNoGit), a git ctx stopped (ctx's cause), or git's
// message.
func Explain(ctx context.Context, sub string, err error, stderr []byte) error {
	var ee *exec.Error
	switch {
	case errors.As(err, &ee):
		return fmt.Errorf("%w (%w)", ErrNoGit, ee.Err)
	case ctx.Err() != nil:
		return fmt.Errorf("git %s: %w", sub, context.Cause(ctx))
	}
	msg := firstLine(strings.TrimSpace(string(stderr)))
	if msg == "" {
		msg = err.Error()
	}
	return fmt.Errorf("git %s: %s", sub, msg)
}

// Files returns the files git would put in a commit of the work tree at
// dir: tracked ones (`git ls-files --cached`) and untracked ones no
// .gitignore, .git/info/exclude or core.excludesFile rule ignores
// (`--others --exclude-standard`), as slash-separated paths relative to
// dir, each once. A submodule is one entry, its directory (a nested
// repository git does not track, its directory and a '/'). repo is false,
// with no error, when dir is not in a git work tree, is itself ignored by
// the repository's rules (a data directory the repository leaves out), or
// git is not installed: the caller then copies the directory as it is. A
// git that fails otherwise (a repository it refuses to read, a timeout)
// is an error: what the repository ignores is then unknown.
func Files(ctx context.Context, dir string) (files []string, repo bool, err error) {
	out, err := Output(ctx, dir, "rev-parse", "--is-inside-work-tree")
	switch {
	case errors.Is(err, ErrNoGit), err != nil && strings.Contains(err.Error(), "not a git repository"):
		return nil, false, nil
	case err != nil:
		return nil, false, err // a repository git cannot read: its rules are unknown
	case strings.TrimSpace(string(out)) != "true":
		return nil, false, nil // inside a .git
	}
	// check-ignore exits 0 when dir is ignored, 1 when it is not.
	cmd := Command(ctx, dir, "check-ignore", "-q", ".")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		return nil, false, nil
	} else if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 1 {
		return nil, false, Explain(ctx, "check-ignore", err, stderr.Bytes())
	}
	out, err = Output(ctx, dir, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	if err != nil {
		return nil, false, err
	}
	seen := map[string]bool{}
	for _, p := range bytes.Split(out, []byte{0}) {
		if len(p) == 0 || seen[string(p)] {
			continue
		}
		seen[string(p)] = true
		files = append(files, string(p))
	}
	return files, true, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

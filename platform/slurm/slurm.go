package slurm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/taoflow/taoflow/platform"
	"github.com/taoflow/taoflow/platform/ssh"
)

// Kind is the platform's kind, as plans name it.
const Kind = "slurm"

// Config says where Slurm's commands run.
type Config struct {
	// Host is the login node's ssh destination; "" runs Slurm's commands
	// on this machine.
	Host string
	// SSH configures the connection to Host.
	SSH ssh.Config
	// Env is the environment of commands run on this machine; nil is
	// taoflow's own.
	Env []string
	// Workdir is the plan's platform.workdir ("" is the default): destroy,
	// which has no plan, finds the run's job directories by it.
	Workdir string
}

// Slurm is the slurm platform. Its zero value is not usable; call New.
type Slurm struct {
	cfg       Config
	ssh       *ssh.SSH // nil without a host
	maxOutput int
}

var (
	_ platform.Platform = (*Slurm)(nil)
	_ platform.Streamer = (*Slurm)(nil)
	_ platform.Closer   = (*Slurm)(nil)
	_ platform.Checker  = (*Slurm)(nil)
)

// MaxOutput is the most bytes of each of stdout and stderr that Exec keeps
// of a command run on this machine (the tail, behind a marker line).
const MaxOutput = 16 << 20

// New returns the slurm platform cfg describes. It starts nothing.
func New(cfg Config) *Slurm {
	s := &Slurm{cfg: cfg, maxOutput: MaxOutput}
	if cfg.Host != "" {
		s.ssh = ssh.New(cfg.SSH)
	}
	return s
}

// Kind returns "slurm".
func (s *Slurm) Kind() string { return Kind }

// Workdir returns the directory of the runs' job directories as the plan
// gave it ("" for the default).
func (s *Slurm) Workdir() string { return s.cfg.Workdir }

// Host returns the login node's destination, "" for this machine.
func (s *Slurm) Host() string { return s.cfg.Host }

// Exec runs script where Slurm's commands run (the login node, or this
// machine), whatever pool inst is: every pool shares the one cluster.
func (s *Slurm) Exec(ctx context.Context, inst platform.Instance, script string, stdin io.Reader) (platform.Result, error) {
	return s.exec(ctx, inst, script, stdin, nil)
}

// ExecStream is Exec writing stdout to stdout as it comes (platform.Streamer).
func (s *Slurm) ExecStream(ctx context.Context, inst platform.Instance, script string, stdin io.Reader, stdout io.Writer) (platform.Result, error) {
	return s.exec(ctx, inst, script, stdin, stdout)
}

func (s *Slurm) exec(ctx context.Context, inst platform.Instance, script string, stdin io.Reader, out io.Writer) (platform.Result, error) {
	if s.ssh != nil {
		login := platform.Instance{Name: inst.Name, Ref: s.cfg.Host, Attrs: inst.Attrs}
		if out != nil {
			return s.ssh.ExecStream(ctx, login, script, stdin, out)
		}
		return s.ssh.Exec(ctx, login, script, stdin)
	}
	return s.execHere(ctx, inst, script, stdin, out)
}

// waitDelay bounds how long Exec waits, after the shell has ended, for
// what it left behind to close its output.
const waitDelay = 2 * time.Second

// execHere runs script under /bin/sh on this machine, in its own process
// group (killed when ctx ends), in the home directory.
func (s *Slurm) execHere(ctx context.Context, inst platform.Instance, script string, stdin io.Reader, out io.Writer) (platform.Result, error) {
	fail := platform.Result{ExitCode: -1}
	if ctx.Err() != nil {
		return fail, fmt.Errorf("exec on %s: %w", inst.Name, context.Cause(ctx))
	}
	if err := platform.CheckScript(script); err != nil {
		return fail, &platform.ExecError{Instance: inst.Name, Err: err}
	}
	stdout, stderr := platform.NewTail(s.maxOutput), platform.NewTail(s.maxOutput)
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", platform.ScriptCommand)
	startScript, scriptDone, err := platform.ScriptFD(cmd, script)
	if err != nil {
		return fail, &platform.ExecError{Instance: inst.Name, Err: err, Transient: true}
	}
	defer scriptDone()
	if home, err := os.UserHomeDir(); err == nil {
		cmd.Dir = home
	}
	cmd.Env = s.cfg.Env
	if stdin != nil {
		cmd.Stdin = stdin
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
		return fail, &platform.ExecError{Instance: inst.Name, Err: fmt.Errorf("start /bin/sh: %w", err),
			Transient: errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.ENOMEM)}
	}
	startScript()
	waitErr := cmd.Wait()
	scriptDone()
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
		res.ExitCode = exitCode(cmd.ProcessState)
		return res, nil
	default:
		return res, &platform.ExecError{Instance: inst.Name, Err: waitErr}
	}
}

// exitCode reads a status as a shell would: 128+N for signal N.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// Check runs `sbatch --version` where Slurm's commands run, and returns
// what it printed ("slurm 22.05.8").
func (s *Slurm) Check(ctx context.Context) (string, error) {
	res, err := s.Exec(ctx, platform.Instance{Name: "slurm"}, "sbatch --version", nil)
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		where := "this machine"
		if s.cfg.Host != "" {
			where = s.cfg.Host
		}
		return "", fmt.Errorf("sbatch --version on %s exited %d (is Slurm's client installed there?): %s", where, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	return strings.TrimSpace(string(res.Stdout)), nil
}

// Close closes the connection to the login node, if any.
func (s *Slurm) Close() error {
	if s.ssh != nil {
		return s.ssh.Close()
	}
	return nil
}

package slurm

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

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

// execHere runs script under /bin/sh on this machine (platform.Shell), in
// the home directory.
func (s *Slurm) execHere(ctx context.Context, inst platform.Instance, script string, stdin io.Reader, out io.Writer) (platform.Result, error) {
	dir := ""
	if home, err := os.UserHomeDir(); err == nil {
		dir = home
	}
	return platform.Shell(ctx, inst.Name, dir, s.cfg.Env, script, stdin, out, s.maxOutput)
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

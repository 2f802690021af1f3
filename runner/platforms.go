package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
	"github.com/taoflow/taoflow/platform/brev"
	"github.com/taoflow/taoflow/platform/local"
	"github.com/taoflow/taoflow/platform/slurm"
	"github.com/taoflow/taoflow/platform/ssh"
	"github.com/taoflow/taoflow/secret"
)

// Keys of the platform settings recorded with every resource, so that
// destroy and cancel can reach the resource again without the plan file.
const (
	dataSSHConfig      = "pf.ssh_config"
	dataConnectTimeout = "pf.connect_timeout"
	dataMaxSessions    = "pf.max_sessions"
	dataBinary         = "pf.binary"
	dataTransport      = "pf.transport"
	// dataSecrets names the plan's secrets (names only, comma-separated),
	// so that destroy and cancel keep their values out of brev's
	// environment as apply does.
	dataSecrets = "pf.secrets"
	// dataSlurmHost and dataSlurmWorkdir are the slurm platform's login
	// node and workdir.
	dataSlurmHost    = "pf.slurm_host"
	dataSlurmWorkdir = "pf.slurm_workdir"
)

// PlatformData returns the plan's platform settings as resource data. A
// relative ssh_config is resolved against the plan file's directory (a
// checked-in plan names a file beside it) and ~/ against the home
// directory.
func PlatformData(p *plan.Plan) map[string]string {
	pl := p.Platform
	d := map[string]string{}
	if pl.SSHConfig != "" {
		d[dataSSHConfig] = resolvePath(pl.SSHConfig, filepath.Dir(p.File))
	}
	if pl.ConnectTimeout > 0 {
		d[dataConnectTimeout] = pl.ConnectTimeout.String()
	}
	if pl.MaxSessions > 0 {
		d[dataMaxSessions] = strconv.Itoa(pl.MaxSessions)
	}
	if pl.Binary != "" {
		d[dataBinary] = resolveBinary(pl.Binary, filepath.Dir(p.File))
	}
	if pl.Transport != "" {
		d[dataTransport] = pl.Transport
	}
	if names := p.SecretNames(); len(names) > 0 {
		d[dataSecrets] = strings.Join(names, ",")
	}
	if pl.Slurm.Host != "" {
		d[dataSlurmHost] = pl.Slurm.Host
	}
	if pl.Slurm.Workdir != "" {
		d[dataSlurmWorkdir] = pl.Slurm.Workdir
	}
	return d
}

// resolvePath makes path absolute: ~/ is the home directory, a relative
// path is relative to base.
func resolvePath(path, base string) string {
	if rest, ok := strings.CutPrefix(path, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	if !filepath.IsAbs(path) {
		if abs, err := filepath.Abs(filepath.Join(base, path)); err == nil {
			return abs
		}
	}
	return path
}

// resolveBinary is resolvePath for a program: a bare name is looked up in
// PATH when it runs, so it is kept as it is.
func resolveBinary(bin, base string) string {
	if !strings.ContainsRune(bin, '/') {
		return bin
	}
	return resolvePath(bin, base)
}

// NewPlatform builds the platform of a plan for run; progress, when not
// nil, hears what it says while it prepares instances.
func NewPlatform(p *plan.Plan, run, stateDir string, progress func(instance, msg string)) (platform.Platform, error) {
	return platformFrom(p, PlatformData(p), run, stateDir, progress, nil)
}

// platformFrom is NewPlatform with the platform's settings given as data.
// red, when not nil, redacts the plan's secrets from what the platform's
// CLI printed before an error quotes a clipped part of it.
func platformFrom(p *plan.Plan, data map[string]string, run, stateDir string, progress func(instance, msg string), red *secret.Redactor) (platform.Platform, error) {
	return BuildPlatform(p.Platform.Kind, data, run, stateDir, PlatformOptions{
		Progress: progress,
		Redactor: red,
		// A platform CLI (brev) runs with taoflow's environment, less the
		// plan's secrets: their values are for the instances, on stdin.
		Env: environWithout(os.Environ(), p.SecretNames()),
	})
}

// PlatformOptions are what a platform gets besides its recorded settings.
type PlatformOptions struct {
	Progress func(instance, msg string) // hears what it says while it prepares instances; nil for none
	Env      []string                   // the environment of the CLIs it runs; nil for taoflow's
	Redactor *secret.Redactor           // redacts what its CLI printed before an error clips it; nil for none
}

// environWithout returns env without the variables named in names.
func environWithout(env, names []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, k) {
			out = append(out, kv)
		}
	}
	return out
}

// progressRelay passes a platform's progress lines about instances on as
// events, once there is somewhere to send them: at most one line per
// instance every progressEvery unless what it says changes (the state word
// before any parenthesis), so a long DEPLOYING is a line now and then, not
// one per poll.
type progressRelay struct {
	mu   sync.Mutex
	to   func(engine.Event)
	last map[string]progressLine
}

type progressLine struct {
	word string
	at   time.Time
}

const progressEvery = 30 * time.Second

func (r *progressRelay) set(to func(engine.Event)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.to, r.last = to, map[string]progressLine{}
}

func (r *progressRelay) send(instance, msg string) {
	if r == nil {
		return
	}
	now := time.Now()
	word, _, _ := strings.Cut(msg, " (")
	r.mu.Lock()
	to, prev := r.to, r.last[instance]
	quiet := to == nil || (prev.word == word && now.Sub(prev.at) < progressEvery)
	if !quiet {
		r.last[instance] = progressLine{word, now}
	}
	r.mu.Unlock()
	if !quiet {
		to(engine.Event{Time: now, Type: engine.InstanceProgress, Instance: instance, Message: msg})
	}
}

// BuildPlatform builds a platform of kind from its recorded settings.
func BuildPlatform(kind string, data map[string]string, run, stateDir string, opts PlatformOptions) (platform.Platform, error) {
	switch kind {
	case plan.PlatformLocal:
		root, err := filepath.Abs(filepath.Join(stateDir, "sandboxes"))
		if err != nil {
			return nil, err
		}
		return local.New(root), nil
	case plan.PlatformSSH:
		return ssh.New(sshConfig(data, run)), nil
	case plan.PlatformBrev:
		cfg := brevConfig(data, run)
		cfg.Progress, cfg.Env, cfg.Redactor = opts.Progress, opts.Env, opts.Redactor
		return brev.New(cfg)
	case plan.PlatformSlurm:
		return slurm.New(slurm.Config{Host: data[dataSlurmHost], Workdir: data[dataSlurmWorkdir], SSH: sshConfig(data, run), Env: opts.Env}), nil
	}
	return nil, fmt.Errorf("unknown platform %q", kind)
}

// brevConfig is the brev platform configuration recorded in data.
func brevConfig(data map[string]string, run string) brev.Config {
	return brev.Config{Binary: data[dataBinary], Run: run, Transport: data[dataTransport], SSH: sshConfig(data, run)}
}

// sshConfig is the ssh client configuration recorded in data.
func sshConfig(data map[string]string, run string) ssh.Config {
	cfg := ssh.Config{Run: run, ConfigFile: data[dataSSHConfig]}
	if d, err := time.ParseDuration(data[dataConnectTimeout]); err == nil {
		cfg.ConnectTimeout = d
	}
	if n, err := strconv.Atoi(data[dataMaxSessions]); err == nil {
		cfg.MaxSessions = n
	}
	return cfg
}

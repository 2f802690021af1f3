package plan

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// PlatformSlurm is the Slurm platform: each run node is an sbatch job,
// each instance a pool of jobs of one shape (docs/design.md §6.3).
const PlatformSlurm = "slurm"

// SlurmPlatform is the slurm platform's settings.
type SlurmPlatform struct {
	// Host is the login node's ssh destination; "" runs Slurm's commands
	// on this machine.
	Host string
	// Workdir is the directory on the cluster's shared filesystem that
	// holds each run's files ("" is the default, ~/.taoflow/slurm).
	Workdir string
	// Pos is the position of the first of the two keys written.
	Pos Pos
}

// DefaultSlurmWorkdir is SlurmPlatform.Workdir when the plan gives none.
const DefaultSlurmWorkdir = "~/.taoflow/slurm"

// Pool is the shape of the jobs of a Slurm instance (a pool): zero fields
// are Slurm's defaults. The pool's GPUs per job are Instance.GPUs.
type Pool struct {
	Partition  string
	Account    string
	QOS        string
	CPUs       int
	Mem        string
	Constraint string
	// Time is the job's time limit as written; Minutes is it in whole
	// minutes (rounded up), 0 when not given.
	Time    string
	Minutes int
	TimePos Pos
	// Pos is the position of the first slurm key, for diagnostics about
	// the pool as a whole.
	Pos Pos
}

// IsZero reports whether no slurm key is set.
func (p Pool) IsZero() bool { return p == Pool{} }

// slurmPoolKeys are the instance keys only the slurm platform reads.
var slurmPoolKeys = []string{"partition", "account", "qos", "cpus", "mem", "time", "constraint"}

func buildSlurmPlatform(pl *Platform, v *Value) {
	for _, k := range []string{"host", "workdir"} {
		if f := v.Field(k); f != nil {
			pl.Slurm.Pos = f.KeyPos
			break
		}
	}
	pl.Slurm.Host = scalar(v.Get("host"))
	pl.Slurm.Workdir = scalar(v.Get("workdir"))
}

func buildPool(in *Instance, v *Value) {
	for _, k := range slurmPoolKeys {
		if f := v.Field(k); f != nil {
			in.Pool.Pos = f.KeyPos
			break
		}
	}
	p := &in.Pool
	p.Partition = scalar(v.Get("partition"))
	p.Account = scalar(v.Get("account"))
	p.QOS = scalar(v.Get("qos"))
	p.CPUs, _ = intOf(v.Get("cpus"))
	p.Mem = scalar(v.Get("mem"))
	p.Constraint = scalar(v.Get("constraint"))
	if f := v.Field("time"); f != nil {
		p.Time, p.TimePos = scalar(f.Value), f.Value.Pos
		p.Minutes, _ = SlurmMinutes(p.Time)
	}
}

// SlurmMinutes reads a Slurm time limit in whole minutes, rounded up: Slurm's
// forms MINUTES, MINUTES:SECONDS, HOURS:MINUTES:SECONDS, DAYS-HOURS,
// DAYS-HOURS:MINUTES and DAYS-HOURS:MINUTES:SECONDS, or a Go duration
// (4h, 90m, 1h30m). "UNLIMITED" and "INFINITE" (as sinfo prints them) are
// math.MaxInt.
func SlurmMinutes(s string) (int, error) {
	if s == "UNLIMITED" || s == "INFINITE" {
		return math.MaxInt, nil
	}
	if strings.ContainsAny(s, "hms") {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("%q is not a time limit", s)
		}
		return int((d + time.Minute - 1) / time.Minute), nil
	}
	bad := fmt.Errorf("%q is not a Slurm time (MINUTES, HH:MM:SS or D-HH:MM:SS)", s)
	days := 0
	rest := s
	if d, r, ok := strings.Cut(s, "-"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 {
			return 0, bad
		}
		days, rest = n, r
	}
	var f []int
	for _, p := range strings.Split(rest, ":") {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > math.MaxInt32 {
			return 0, bad
		}
		f = append(f, n)
	}
	var secs int
	switch {
	case days > 0 || strings.Contains(s, "-"):
		// D-H, D-H:M, D-H:M:S
		if len(f) > 3 {
			return 0, bad
		}
		mul := []int{3600, 60, 1}
		for i, n := range f {
			secs += n * mul[i]
		}
		secs += days * 86400
	case len(f) == 1: // M
		secs = f[0] * 60
	case len(f) == 2: // M:S
		secs = f[0]*60 + f[1]
	case len(f) == 3: // H:M:S
		secs = f[0]*3600 + f[1]*60 + f[2]
	default:
		return 0, bad
	}
	if secs <= 0 {
		return 0, fmt.Errorf("%q: a time limit must be more than 0", s)
	}
	return (secs + 59) / 60, nil
}

// slurm checks what only the slurm platform reads, and what it does not
// offer.
func (c *checker) slurm() {
	pl := c.p.Platform
	if pl.Kind != PlatformSlurm {
		if pl.Slurm.Host != "" || pl.Slurm.Workdir != "" {
			c.d.errorf(pl.Slurm.Pos, "platform %s: host: and workdir: are slurm settings (the login node and the shared directory); remove them or use kind: slurm", pl.Kind)
		}
		for _, in := range c.p.Instances {
			if !in.Pool.IsZero() {
				c.d.errorf(in.Pool.Pos, "instance %q: partition, account, qos, cpus, mem, time and constraint are for the slurm platform (platform: slurm); remove them for platform %s", in.Name, pl.Kind)
			}
		}
		if c.p.Budget.MaxGPUHours > 0 {
			c.d.warnf(c.p.Budget.Pos, "budget: max_gpu_hours counts Slurm jobs' GPU-hours; platform %s does not count them (use max_cost)", pl.Kind)
		}
		return
	}
	for _, in := range c.p.Instances {
		if in.Create || in.Existing != "" || in.Host != "" {
			c.d.errorf(in.Pos, "instance %q: on slurm an instance is a pool of jobs (partition, gpus, time, ...), not a machine: remove create, existing and host (the login node is platform: {kind: slurm, host: USER@HOST})", in.Name)
		}
		if in.Pool.Time != "" && in.Pool.Minutes == 0 {
			if _, err := SlurmMinutes(in.Pool.Time); err != nil {
				c.d.errorf(in.Pool.TimePos, "instance %q: time: %v", in.Name, err)
			}
		}
	}
	for _, s := range c.p.AllSteps() {
		if s.Uses == KindNGCAuth {
			c.d.errorf(s.UsesPos, "step %q: uses: %s runs docker, which a Slurm login node need not have; on slurm, pyxis pulls a run step's image when its job starts, or a pull step imports it with enroot (remove the step)", s.ID, s.Uses)
		}
		if s.Uses != KindRun {
			continue
		}
		if g := s.With.Field("gpus"); g != nil {
			c.d.errorf(g.KeyPos, "step %q: with.gpus is not used on slurm: a job gets the GPUs of its pool (the instance's gpus: N, sbatch --gpus)", s.ID)
		}
	}
}

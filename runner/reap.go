package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
	"github.com/taoflow/taoflow/platform/brev"
	"github.com/taoflow/taoflow/platform/local"
	"github.com/taoflow/taoflow/platform/ssh"
	"github.com/taoflow/taoflow/state"
	"github.com/taoflow/taoflow/steps"
)

// ReapConfig says where Reap looks besides the brev CLI and this machine's
// Docker engine.
type ReapConfig struct {
	StateDir string // what its state records is left alone
	// Plans are plan files whose ssh hosts and existing brev instances are
	// looked at too.
	Plans []string
	// BrevBinary is the brev CLI; "" for brev on PATH, and no brev
	// instances are looked at when there is none.
	BrevBinary string
	// Only limits where Reap looks: ReapBrev or ReapContainers; "" for
	// both.
	Only string
	// TransientBackoff is steps.Config.TransientBackoff for the commands
	// Reap runs on hosts (0: the default).
	TransientBackoff time.Duration
}

// Values of ReapConfig.Only.
const (
	ReapBrev       = "brev"
	ReapContainers = "containers"
)

// Orphan is one leftover Reap found.
type Orphan struct {
	Kind   string `json:"kind"` // "brev instance" or "container"
	Name   string `json:"name"`
	Detail string `json:"detail"`
	// Removed is set by Remove: whether it is gone; Error says why not.
	Removed *bool  `json:"removed,omitempty"`
	Error   string `json:"error,omitempty"`
	host    *dockerHost
}

// Reaper holds what Reap found.
type Reaper struct {
	// Found are the leftovers: taoflow-named brev instances and
	// taoflow-labelled containers that no state accounts for and no live
	// run owns.
	Found []Orphan
	// Spared says, a line each, what looked like a leftover but belongs to
	// a run that is recorded or alive, and why it was left.
	Spared []string
	// Problems are the places Reap could not look.
	Problems []error
	// NotMine are tf-* brev instances that no state or live run accounts
	// for, but that Ledger does not say this user's taoflow created here:
	// a teammate's (an API key lists the whole org; instances shared with
	// the user are listed too), or this user's from another machine. Reap
	// never deletes them.
	NotMine []Orphan
	// Ledger is the file that says which brev instances this user's
	// taoflow created on this machine (brev.LedgerFile).
	Ledger string

	bv      *brev.Brev
	hosts   []*dockerHost
	closers []func()
}

// Reap finds what taoflow runs made and no state accounts for. Brev
// instances are named tf-*; containers carry taoflow.run, taoflow.owner
// labels. Left alone: what the state in cfg.StateDir records, the brev
// instances of runs whose apply runs on this machine (Announce), the
// containers of runs whose apply process is alive here, and containers of
// runs driven from another machine. Close the Reaper when done.
func Reap(ctx context.Context, cfg ReapConfig) (*Reaper, error) {
	known, live, err := knownResources(ctx, cfg.StateDir)
	if err != nil {
		return nil, err
	}
	liveHere := LiveNames()
	r := &Reaper{}
	// The ssh control directories dead runs left, long untouched.
	ssh.Sweep("")

	// Brev instances named by taoflow.
	if bin := cfg.BrevBinary; cfg.Only != ReapContainers && (bin != "" || haveProgram("brev")) {
		if r.bv, err = brev.New(brev.Config{Binary: bin, Run: "reap"}); err != nil {
			return nil, refused(err)
		}
		r.closers = append(r.closers, func() { _ = r.bv.Close() })
		insts, err := r.bv.List(ctx)
		if err != nil {
			r.Problems = append(r.Problems, fmt.Errorf("listing brev instances: %w", err))
		}
		ledger := r.bv.Ledger()
		mine, err := brev.Recorded(ledger)
		if err != nil {
			r.Problems = append(r.Problems, fmt.Errorf("reading the record of the brev instances taoflow created here (%s): %w", ledger, err))
		}
		r.Ledger = ledger
		for _, in := range insts {
			if !strings.HasPrefix(in.Ref, brev.Prefix) {
				continue
			}
			if run, ok := known["brev:"+in.Ref]; ok {
				r.Spared = append(r.Spared, fmt.Sprintf("brev instance %s belongs to run %s in the state; not reaped (taoflow destroy %s)", in.Ref, run, run))
				continue
			}
			if run, ok := liveHere[in.Ref]; ok {
				r.Spared = append(r.Spared, fmt.Sprintf("brev instance %s belongs to run %s, whose apply is running on this machine; not reaped", in.Ref, run))
				continue
			}
			if !mine[in.Ref] {
				// An API key lists the whole org, and a user also sees what
				// is shared with them: a tf- name may be a teammate's run.
				r.NotMine = append(r.NotMine, Orphan{Kind: "brev instance", Name: in.Ref, Detail: strings.TrimSpace(in.Attrs["status"] + " " + in.Attrs["type"])})
				continue
			}
			r.Found = append(r.Found, Orphan{Kind: "brev instance", Name: in.Ref, Detail: strings.TrimSpace(in.Attrs["status"] + " " + in.Attrs["type"])})
		}
	}

	// Containers on this machine's Docker engine, and on the instances of
	// the plans given (ssh hosts, existing brev instances).
	if cfg.Only == ReapBrev {
		if r.bv == nil {
			r.Problems = append(r.Problems, errors.New("no brev CLI on PATH to list brev instances with (give it with --brev-binary)"))
		}
		return r, nil
	}
	hosts, closeHosts, err := dockerHosts(ctx, cfg)
	if err != nil {
		r.Close()
		return nil, err
	}
	r.hosts = hosts
	r.closers = append(r.closers, closeHosts)
	me, _ := os.Hostname()
	seen := map[string]bool{}
	for _, h := range hosts {
		cs, err := h.steps.LabelledContainers(ctx, h.inst)
		if err != nil {
			r.Problems = append(r.Problems, fmt.Errorf("%s: %w", h.label, err))
			continue
		}
		for _, c := range cs {
			if seen[c.Name] {
				continue // the same engine, reached another way
			}
			seen[c.Name] = true
			if live[c.Run] || ownerAlive(c.Owner) {
				continue // a run going on, here or in another state directory
			}
			if run, ok := known["job:"+c.Name]; ok {
				r.Spared = append(r.Spared, fmt.Sprintf("container %s on %s belongs to run %s in the state; not reaped (taoflow destroy %s)", c.Name, h.label, run, run))
				continue
			}
			if owner, _, _ := strings.Cut(c.Owner, ":"); owner != "" && owner != me {
				r.Spared = append(r.Spared, fmt.Sprintf("container %s on %s belongs to a run driven from %s; not reaped from here", c.Name, h.label, owner))
				continue
			}
			r.Found = append(r.Found, Orphan{Kind: "container", Name: c.Name, Detail: c.State + ", run " + c.Run + ", on " + h.label, host: h})
			h.names = append(h.names, c.Name)
		}
	}
	return r, nil
}

// Remove deletes what Reap found, recording in each Orphan whether it is
// gone, and returns how many remain.
func (r *Reaper) Remove(ctx context.Context) int {
	left := 0
	for i := range r.Found {
		o := &r.Found[i]
		if o.Kind != "brev instance" {
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
		err := r.bv.Delete(dctx, platform.Instance{Name: o.Name, Ref: o.Name, Created: true})
		cancel()
		o.done(err)
		if err != nil {
			left++
		}
	}
	for _, h := range r.hosts {
		if len(h.names) == 0 {
			continue
		}
		err := h.steps.RemoveContainers(ctx, h.inst, h.names)
		for i := range r.Found {
			if r.Found[i].host == h {
				r.Found[i].done(err)
				if err != nil {
					left++
				}
			}
		}
	}
	return left
}

// Close lets go of the connections Reap opened.
func (r *Reaper) Close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
	r.closers = nil
}

// done records what removing o did.
func (o *Orphan) done(err error) {
	removed := err == nil
	o.Removed = &removed
	if err != nil {
		o.Error = err.Error()
	}
}

// dockerHost is a Docker engine reap looks at.
type dockerHost struct {
	label string // "this machine", or "INSTANCE (plan FILE)"
	steps *steps.Steps
	inst  platform.Instance
	names []string // the containers to remove there
}

// dockerHosts returns this machine's Docker engine (when docker is
// installed) and the instances the plans name that exist without taoflow
// (ssh hosts, existing brev instances); created ones are reaped whole. The
// returned func releases the connections.
func dockerHosts(ctx context.Context, cfg ReapConfig) ([]*dockerHost, func(), error) {
	plans, stateDir := cfg.Plans, cfg.StateDir
	var hosts []*dockerHost
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	for _, file := range plans {
		p, diags := plan.Load(file, plan.Options{})
		if diags.HasErrors() || p == nil {
			closeAll()
			return nil, func() {}, refused(fmt.Errorf("%s: not a valid plan (taoflow validate %s)", file, file))
		}
		if p.Platform.Kind == plan.PlatformLocal {
			continue // its sandboxes share this machine's engine
		}
		pf, err := NewPlatform(p, "reap", stateDir, nil)
		if err != nil {
			closeAll()
			return nil, func() {}, refused(fmt.Errorf("%s: %w", file, err))
		}
		if c, ok := pf.(platform.Closer); ok {
			closers = append(closers, func() { _ = c.Close() })
		}
		st := steps.New(steps.Config{Platform: pf, RunID: "reap", TransientBackoff: cfg.TransientBackoff})
		for _, in := range p.Instances {
			ref := in.Host
			if in.Existing != "" {
				ref = in.Existing
			}
			if ref == "" {
				continue
			}
			hosts = append(hosts, &dockerHost{label: fmt.Sprintf("%s (%s)", in.Name, file), steps: st, inst: platform.Instance{Name: in.Name, Ref: ref}})
		}
	}
	// This machine last: when a plan's instance is this machine too, its
	// containers are shown once, on the instance.
	if haveProgram("docker") {
		tmp, err := os.MkdirTemp("", "taoflow-reap-")
		if err != nil {
			return nil, closeAll, err
		}
		closers = append(closers, func() { _ = os.RemoveAll(tmp) })
		lp := local.New(tmp)
		inst, err := lp.Create(ctx, "reap", platform.Spec{Name: "docker"})
		if err != nil {
			return nil, closeAll, err
		}
		hosts = append(hosts, &dockerHost{label: "this machine", steps: steps.New(steps.Config{Platform: lp, RunID: "reap", TransientBackoff: cfg.TransientBackoff}), inst: inst})
	}
	return hosts, closeAll, nil
}

// knownResources reads what the state in dir accounts for: "brev:NAME" and
// "job:NAME" of every resource that may still exist, mapped to its run, and
// the runs whose apply is alive. A missing state knows nothing.
func knownResources(ctx context.Context, dir string) (map[string]string, map[string]bool, error) {
	known, live := map[string]string{}, map[string]bool{}
	if _, err := os.Stat(filepath.Join(dir, "state.db")); errors.Is(err, os.ErrNotExist) {
		return known, live, nil
	}
	store, err := state.OpenReadOnly(dir)
	if err != nil {
		return nil, nil, err
	}
	defer store.Close()
	runs, err := store.Runs(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range runs {
		if ApplyAlive(r) {
			live[r.ID] = true
		}
	}
	alive, err := store.AliveAll(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, res := range alive {
		switch {
		case res.Kind == state.KindInstance && res.Platform == plan.PlatformBrev:
			name := res.Data["ref"]
			if name == "" {
				name = brev.InstanceName(res.RunID, res.Instance)
			}
			known["brev:"+name] = res.RunID
		case res.Kind == state.KindJob:
			known["job:"+res.Name] = res.RunID
		}
	}
	return known, live, nil
}

// ownerAlive reports whether owner ("HOST:PID", a container's
// taoflow.owner label) is a process alive on this host.
func ownerAlive(owner string) bool {
	host, pid, ok := strings.Cut(owner, ":")
	if !ok {
		return false
	}
	me, _ := os.Hostname()
	n, err := strconv.Atoi(pid)
	if host != me || err != nil || n <= 0 {
		return false
	}
	return syscall.Kill(n, 0) == nil
}

func haveProgram(name string) bool {
	_, err := exec.LookPath(name)
	return err == nil
}

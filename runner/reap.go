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

	"github.com/taoflow/taoflow/internal/shellquote"
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
	// OtherStates are other state directories of this user (the index of
	// states, state.Indexed): what their runs record is left too, and said
	// to belong to that run there (ReasonOtherState).
	OtherStates []string
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
	// Names, when not empty, are the tf-* brev instances to reap, and the
	// only ones (no containers): each must be listed by brev and accounted
	// for by no state or live run, but need not be in the ledger — the
	// user says they are theirs. A name that is not so is refused.
	Names []string
	// Unrecorded reaps the tf-* brev instances that are not in the ledger
	// too, allowed only when brev is logged in as a user (whose `brev ls`
	// shows only the user's own and shared instances).
	Unrecorded bool
}

// Values of ReapConfig.Only.
const (
	ReapBrev       = "brev"
	ReapContainers = "containers"
)

// Orphan is one leftover Reap found, or one it leaves (Reaper.NotReaped).
type Orphan struct {
	Kind   string `json:"kind"` // "brev instance" or "container"
	Name   string `json:"name"`
	Detail string `json:"detail"`
	// Reason says why a NotReaped one is left: one of the Reason…
	// constants; Why says it in words, and Command is what removes it,
	// if it should go ("" when none is for reap's user to run).
	Reason  string `json:"reason,omitempty"`
	Why     string `json:"why,omitempty"`
	Command string `json:"command,omitempty"`
	// Removed is set by Remove: whether it is gone; Error says why not.
	Removed *bool  `json:"removed,omitempty"`
	Error   string `json:"error,omitempty"`
	host    *dockerHost
	status  string // a brev instance's status in brev ls
}

// Why Reap leaves something (Orphan.Reason).
const (
	// ReasonUnrecorded: a tf-* brev instance that no state or live run
	// accounts for, and that the ledger does not say this user's taoflow
	// created on this machine. Reaper.Unaccounted counts these.
	ReasonUnrecorded = "unrecorded"
	// ReasonInState: the state in --state records it (taoflow destroy).
	ReasonInState = "in-state"
	// ReasonOtherState: another state directory of this user (the index
	// of states) records it: resume or destroy the run there.
	ReasonOtherState = "other-state"
	// ReasonLiveRun: a run whose apply is alive on this machine owns it.
	ReasonLiveRun = "live-run"
	// ReasonOtherHost: a container of a run driven from another machine.
	ReasonOtherHost = "other-host"
	// ReasonNotNamed: a leftover of this user's that --name did not name.
	ReasonNotNamed = "not-named"
)

// Reaper holds what Reap found.
type Reaper struct {
	// Found are the leftovers: taoflow-named brev instances and
	// taoflow-labelled containers that no state accounts for and no live
	// run owns.
	Found []Orphan
	// NotReaped are what looked like leftovers and are left, each with
	// its Reason, Why and Command: what a state or a live run accounts for
	// (theirs to remove), containers driven from another machine, and the
	// tf-* brev instances that the Ledger does not say this user's taoflow
	// created here (ReasonUnrecorded: a teammate's, or this user's from
	// another machine), which reap deletes only when named (--name).
	NotReaped []Orphan
	// Problems are the places Reap could not look.
	Problems []error
	// NotSearched says, a line each, where Reap did not look because there
	// is nothing to look with (no brev CLI, no docker) and no sign that
	// this user needs it.
	NotSearched []string
	// Ledger is the file that says which brev instances this user's
	// taoflow created on this machine (brev.LedgerFile).
	Ledger string
	// Login is how brev is logged in: brev.LoginUser, brev.LoginAPIKey, or
	// "" when it cannot tell (or brev was not asked).
	Login string

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
	known, live, _, err := knownResources(ctx, cfg.StateDir)
	if err != nil {
		return nil, err
	}
	liveHere := LiveNames()
	r := &Reaper{}
	elsewhere := map[string]elsewhereRun{}
	for _, dir := range cfg.OtherStates {
		k, l, flags, err := knownResources(ctx, dir)
		if err != nil {
			r.Problems = append(r.Problems, fmt.Errorf("the state in %s (in the index of states) could not be read, so what its runs made may be listed as leftovers: %w", dir, err))
			continue
		}
		for name, run := range k {
			if _, ok := elsewhere[name]; !ok {
				elsewhere[name] = elsewhereRun{run: run, dir: dir, flags: flags[run]}
			}
		}
		for run := range l {
			live[run] = true
		}
	}
	// The ssh control directories dead runs left, long untouched.
	ssh.Sweep("")

	// Brev instances named by taoflow.
	if bin := cfg.BrevBinary; cfg.Only != ReapContainers && (bin != "" || haveProgram("brev")) {
		if err := r.reapBrev(ctx, cfg, known, elsewhere, liveHere); err != nil {
			r.Close()
			return nil, err
		}
	} else if cfg.Only != ReapContainers {
		switch mine, _ := brev.Recorded(brev.LedgerFile(os.Environ())); {
		case len(cfg.Names) > 0 || cfg.Only == ReapBrev || len(mine) > 0:
			// Asked for, or this user's taoflow has created brev
			// instances here: not looking is a failure, not a choice.
			r.Problems = append(r.Problems, errors.New("no brev CLI on PATH to list brev instances with (give it with --brev-binary)"))
		default:
			r.NotSearched = append(r.NotSearched, "brev instances: there is no brev CLI on PATH (give it with --brev-binary)")
		}
	}

	// Containers on this machine's Docker engine, and on the instances of
	// the plans given (ssh hosts, existing brev instances).
	if cfg.Only == ReapBrev || len(cfg.Names) > 0 {
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
			detail := c.State + ", run " + c.Run + ", on " + h.label
			if run, ok := known["job:"+c.Name]; ok {
				r.NotReaped = append(r.NotReaped, Orphan{Kind: "container", Name: c.Name, Detail: detail, Reason: ReasonInState,
					Why: "it belongs to run " + run + " in the state", Command: "taoflow destroy " + run})
				continue
			}
			if e, ok := elsewhere["job:"+c.Name]; ok {
				r.NotReaped = append(r.NotReaped, e.orphan(Orphan{Kind: "container", Name: c.Name, Detail: detail}))
				continue
			}
			if owner, _, _ := strings.Cut(c.Owner, ":"); owner != "" && owner != me {
				r.NotReaped = append(r.NotReaped, Orphan{Kind: "container", Name: c.Name, Detail: detail, Reason: ReasonOtherHost,
					Why: "it belongs to a run driven from " + owner + "; reap it there"})
				continue
			}
			r.Found = append(r.Found, Orphan{Kind: "container", Name: c.Name, Detail: detail, host: h})
			h.names = append(h.names, c.Name)
		}
	}
	return r, nil
}

// reapBrev lists the tf-* brev instances and sorts them into Found and
// NotReaped (see ReapConfig.Names, Unrecorded). A request that cannot be
// met as given (--name of an instance that is not a leftover, --unrecorded
// under an API key) is a *RefusedError; a listing that fails is a Problem.
func (r *Reaper) reapBrev(ctx context.Context, cfg ReapConfig, known map[string]string, elsewhere map[string]elsewhereRun, liveHere map[string]string) error {
	var err error
	named := map[string]bool{}
	for _, n := range cfg.Names {
		if !strings.HasPrefix(n, brev.Prefix) || !brev.ValidName(n) {
			return refused(fmt.Errorf("--name %q: reap deletes only the instances taoflow names, %s… (delete another with brev delete)", n, brev.Prefix))
		}
		named[n] = false
	}
	if r.bv, err = brev.New(brev.Config{Binary: cfg.BrevBinary, Run: "reap"}); err != nil {
		return refused(err)
	}
	r.closers = append(r.closers, func() { _ = r.bv.Close() })
	insts, err := r.bv.List(ctx)
	if err != nil {
		r.Problems = append(r.Problems, fmt.Errorf("listing brev instances: %w", err))
		return nil
	}
	r.Login = r.bv.Login()
	if cfg.Unrecorded && r.Login != brev.LoginUser {
		how := "brev is logged in with an API key, whose `brev ls` lists every instance of the organisation, teammates' runs included"
		if r.Login == "" {
			how = "taoflow cannot tell how brev is logged in (~/.brev/credentials.json), so it cannot tell whether `brev ls` lists only your instances"
		}
		return refused(fmt.Errorf("--unrecorded: %s; name the instances that are yours with --name", how))
	}
	ledger := r.bv.Ledger()
	r.Ledger = ledger
	mine, err := brev.Recorded(ledger)
	if err != nil {
		r.Problems = append(r.Problems, fmt.Errorf("reading the record of the brev instances taoflow created here (%s): %w", ledger, err))
	}
	again := ""
	if cfg.BrevBinary != "" {
		again = " --brev-binary " + shellquote.Quote(cfg.BrevBinary)
	}
	for _, in := range insts {
		if !strings.HasPrefix(in.Ref, brev.Prefix) {
			continue
		}
		status := in.Attrs["status"]
		o := Orphan{Kind: "brev instance", Name: in.Ref, Detail: strings.TrimSpace(status + " " + in.Attrs["type"]), status: status}
		_, isNamed := named[in.Ref]
		if isNamed {
			named[in.Ref] = true
		}
		if run, ok := known["brev:"+in.Ref]; ok {
			if isNamed {
				return refused(fmt.Errorf("--name %s: it belongs to run %s in the state; remove it with: taoflow destroy %s", in.Ref, run, run))
			}
			o.Reason, o.Why, o.Command = ReasonInState, "it belongs to run "+run+" in the state", "taoflow destroy "+run
			if _, armed := known["autostop:"+in.Ref]; armed && (status == "STOPPED" || status == "STOPPING") {
				o.Why += "; it stopped itself (its autostop fired while taoflow was away): its disk bills until it is destroyed"
			}
			r.NotReaped = append(r.NotReaped, o)
			continue
		}
		if e, ok := elsewhere["brev:"+in.Ref]; ok {
			if isNamed {
				return refused(fmt.Errorf("--name %s: it belongs to run %s in %s: resume or destroy it there (%s)", in.Ref, e.run, e.dir, e.destroy()))
			}
			r.NotReaped = append(r.NotReaped, e.orphan(o))
			continue
		}
		if run, ok := liveHere[in.Ref]; ok {
			if isNamed {
				return refused(fmt.Errorf("--name %s: it belongs to run %s, whose apply is running on this machine; stop that with taoflow cancel %s", in.Ref, run, run))
			}
			o.Reason, o.Why = ReasonLiveRun, "it belongs to run "+run+", whose apply is running on this machine"
			r.NotReaped = append(r.NotReaped, o)
			continue
		}
		switch {
		case isNamed, len(named) == 0 && mine[in.Ref], len(named) == 0 && cfg.Unrecorded:
			r.Found = append(r.Found, o)
		case mine[in.Ref]:
			o.Reason, o.Why, o.Command = ReasonNotNamed, "this user's taoflow created it on this machine, but --name does not name it", "taoflow reap --name "+in.Ref+again+" --yes"
			r.NotReaped = append(r.NotReaped, o)
		default:
			o.Reason, o.Why, o.Command = ReasonUnrecorded, unrecordedWhy(ledger, r.Login), "taoflow reap --name "+in.Ref+again+" --yes"
			r.NotReaped = append(r.NotReaped, o)
		}
	}
	for _, n := range cfg.Names {
		if !named[n] {
			return refused(fmt.Errorf("--name %s: brev ls does not list it (deleted already, a typo, or not visible to this brev login)", n))
		}
	}
	return nil
}

// elsewhereRun is the run, in another state directory of this user, that
// accounts for a leftover; flags confirm the brev program and ssh config
// its resources name (confirmFlags), as status's advice does.
type elsewhereRun struct{ run, dir, flags string }

// destroy is the command that removes the run's resources from its state.
func (e elsewhereRun) destroy() string {
	return "taoflow destroy " + e.run + " --state " + shellquote.Quote(e.dir) + e.flags
}

// orphan is o, left because it belongs to e.
func (e elsewhereRun) orphan(o Orphan) Orphan {
	o.Reason, o.Why, o.Command = ReasonOtherState, "it belongs to run "+e.run+" in "+e.dir+": resume or destroy it there", e.destroy()
	return o
}

// unrecordedWhy says why a tf-* brev instance no state accounts for and
// the ledger does not record is left, and whose it likely is, by how brev
// is logged in.
func unrecordedWhy(ledger, login string) string {
	why := ledger + " does not say this user's taoflow created it on this machine"
	switch login {
	case brev.LoginUser:
		return why + "; brev is logged in as a user, whose `brev ls` lists only your own instances and those shared with you, so it is most likely yours, made from another machine (a CI runner, another HOME) or before this record existed"
	case brev.LoginAPIKey:
		return why + "; brev is logged in with an API key, whose `brev ls` lists the whole organisation's instances: a teammate's run, or yours from another machine"
	}
	return why + ": a teammate's (listed by an API key, or shared with you), or yours from another machine"
}

// Unaccounted are the tf-* brev instances that no state, live run or
// ledger accounts for (ReasonUnrecorded) and that still exist: not
// DELETING, whatever else they are (a STOPPED one bills for its disk).
func (r *Reaper) Unaccounted() []Orphan {
	var out []Orphan
	for _, o := range r.NotReaped {
		if o.Reason == ReasonUnrecorded && o.status != "DELETING" {
			out = append(out, o)
		}
	}
	return out
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
// "job:NAME" of every resource that may still exist, mapped to its run, the
// runs whose apply is alive, and for each run the destroy flags that
// confirm the brev program and ssh config its resources name
// (confirmFlags). A missing state knows nothing.
func knownResources(ctx context.Context, dir string) (known map[string]string, live map[string]bool, flags map[string]string, err error) {
	known, live, flags = map[string]string{}, map[string]bool{}, map[string]string{}
	if _, err := os.Stat(filepath.Join(dir, "state.db")); errors.Is(err, os.ErrNotExist) {
		return known, live, flags, nil
	}
	store, err := state.OpenReadOnly(dir)
	if err != nil {
		return nil, nil, nil, err
	}
	defer store.Close()
	runs, err := store.Runs(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, r := range runs {
		if ApplyAlive(r) {
			live[r.ID] = true
		}
	}
	alive, err := store.AliveAll(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	datas := map[string][]map[string]string{}
	for _, res := range alive {
		datas[res.RunID] = append(datas[res.RunID], res.Data)
		switch {
		case res.Kind == state.KindInstance && res.Platform == plan.PlatformBrev:
			name := res.Data["ref"]
			if name == "" {
				name = brev.InstanceName(res.RunID, res.Instance)
			}
			known["brev:"+name] = res.RunID
			if nodes, err := store.Nodes(ctx, res.RunID); err == nil && autostopArmed(nodes, res.Instance) {
				known["autostop:"+name] = res.RunID
			}
		case res.Kind == state.KindJob:
			known["job:"+res.Name] = res.RunID
		}
	}
	for run, d := range datas {
		flags[run] = confirmFlags(d...)
	}
	return known, live, flags, nil
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

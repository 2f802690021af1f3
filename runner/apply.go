package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/internal/provenance"
	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
	"github.com/taoflow/taoflow/platform/ssh"
	"github.com/taoflow/taoflow/pricing"
	"github.com/taoflow/taoflow/secret"
	"github.com/taoflow/taoflow/state"
	"github.com/taoflow/taoflow/steps"
)

// ApplyConfig is what an apply needs besides its context.
type ApplyConfig struct {
	Plan *plan.Plan
	// Graph is the plan expanded for this run (Expand): its RunID is the
	// run's id. The plan is expanded once, before Start, so the budget is
	// checked on the graph that runs.
	Graph    *engine.Graph
	PlanPath string // as the user gave it; recorded with the run
	Secrets  *secret.Set
	StateDir string
	// Resume, when not nil, continues that run instead of starting one.
	Resume *Resumed
	// Selection is the types of the instances the run creates (Select):
	// their chains replace create:'s type, and Create learns their prices.
	Selection      *pricing.Selection
	Parallel       int           // most nodes running at once (0: no limit beyond slots)
	FinallyTimeout time.Duration // deadline of finalizers and instance teardown
	// RunName (apply --name, unique in the state) and Tags (--tag, over
	// the plan's tags:) are recorded with a new run.
	RunName string
	Tags    map[string]string
	// RequireClean refuses a plan whose git repository has uncommitted
	// changes (or that is in none).
	RequireClean bool
	Version      string // taoflow's, for the provenance
	// TransientBackoff is steps.Config.TransientBackoff (0: the default).
	TransientBackoff time.Duration
	// StopTimeout is steps.Config.StopTimeout (0: the default).
	StopTimeout time.Duration
	// OnBudget hears why the run went over the plan's budget, when it
	// does (the run is then cancelled and torn down). It must not block.
	OnBudget func(why string)
	// BudgetPoll is how often max_cost is checked (DefaultBudgetPoll).
	BudgetPoll time.Duration
}

// Apply is one apply of a plan: a new run, or a resumed one. Start prepares
// it (nothing is created yet); Run runs it, records how it ended and
// returns the Outcome; Notify tells the plan's notifiers; Close lets go of
// the platform and the state.
type Apply struct {
	ID    string
	Graph *engine.Graph
	// Done are the nodes an earlier attempt of a resumed run finished, with
	// the instance each ran on; empty for a new run.
	Done map[string]string
	// slots are the slots the nodes of a resumed run's cells held
	// (engine.Config.Slots).
	slots map[string]int

	cfg      ApplyConfig
	pf       platform.Platform
	store    *state.Store
	steps    *steps.Steps
	insts    *instances
	progress *progressRelay
	rec      *recorder
	prov     *provenance.Info
	closers  []func()
	// started is when the run began (a resumed one: its first start), for
	// budget.max_duration.
	started       time.Time
	budgetMu      sync.Mutex
	overBudgetWhy string // the limit the run crossed, once it did
	// skipSalvage is closed by SkipSalvage (engine.Config.SkipSalvage).
	skipSalvage chan struct{}
	skipOnce    sync.Once
}

// Expand expands p for an apply: the graph of a new run, under a new run
// id, or of the resumed run, under its id. Its error is the plan's
// (*RefusedError).
func Expand(p *plan.Plan, resume *Resumed) (*engine.Graph, error) {
	return ExpandAs(p, resume, "")
}

// ExpandAs is Expand with the new run's id given: apply --detach picks
// the id in the foreground and the detached process runs the plan under
// it. An empty id is Expand's; a resumed run keeps its own id.
func ExpandAs(p *plan.Plan, resume *Resumed, id string) (*engine.Graph, error) {
	if id == "" {
		id = NewRunID(p.Name)
	}
	if resume != nil {
		id = resume.Run.ID
	}
	g, err := engine.Expand(p, engine.Options{RunID: id})
	if err != nil {
		return nil, refused(err)
	}
	return g, nil
}

// Start prepares an apply of cfg.Graph (Expand): it builds the plan's platform (a platform CLI
// that is missing or too old refuses it here), announces the instances it
// may create, opens the state and records the run (or claims the resumed
// one). Errors that are the request's are *RefusedError.
func Start(ctx context.Context, cfg ApplyConfig) (*Apply, error) {
	p := cfg.Plan
	if r := cfg.Resume; r != nil && p.Hash != r.Run.PlanHash {
		return nil, refused(fmt.Errorf("%s has changed since run %s started (its sha256 was %.12s, now %.12s): resume needs the same plan", cfg.PlanPath, r.Run.ID, r.Run.PlanHash, p.Hash))
	}
	if cfg.Graph == nil || cfg.Graph.Plan != p {
		return nil, errors.New("runner.Start: ApplyConfig.Graph must be Expand's graph of ApplyConfig.Plan")
	}
	a := &Apply{cfg: cfg, ID: cfg.Graph.RunID, Graph: cfg.Graph, progress: &progressRelay{}, Done: map[string]string{}, started: time.Now(),
		skipSalvage: make(chan struct{})}
	if cfg.Resume != nil {
		a.started = cfg.Resume.Run.StartedAt
	}
	if err := a.start(ctx); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// start does Start's work on a, which Start closes on an error.
func (a *Apply) start(ctx context.Context) (err error) {
	cfg, p := a.cfg, a.cfg.Plan
	if cfg.Resume == nil {
		if err := a.collectProvenance(ctx); err != nil {
			return err
		}
	}
	if a.pf, err = platformFrom(p, PlatformData(p), a.ID, cfg.StateDir, a.progress.send, cfg.Secrets.Redactor()); err != nil {
		return refused(fmt.Errorf("%s: %w", p.File, err))
	}
	if c, ok := a.pf.(platform.Closer); ok {
		// Masters and connections go when the run ends, not before: an
		// instance released early does not close the others'.
		a.closers = append(a.closers, func() { _ = c.Close() })
	}
	if n, ok := a.pf.(platform.Namer); ok {
		var names []string
		for _, in := range p.Instances {
			if in.Create {
				names = append(names, n.InstanceRef(a.ID, platform.Spec{Name: in.Name, Type: in.CreateType}))
			}
		}
		if len(names) > 0 {
			a.closers = append(a.closers, Announce(a.ID, names))
		}
	}
	if c, ok := a.pf.(platform.Checker); ok {
		// A missing or too old brev CLI is found before anything starts.
		if _, err := c.Check(ctx); err != nil {
			return refused(fmt.Errorf("%s: %w", p.File, err))
		}
	}
	red := cfg.Secrets.Redactor()
	if a.store, err = state.Open(cfg.StateDir, state.WithRedactor(red.Redact)); err != nil {
		return err
	}
	a.closers = append(a.closers, func() { _ = a.store.Close() })
	host, _ := os.Hostname()
	ctx = context.WithoutCancel(ctx)
	if err := a.checkName(ctx); err != nil {
		return err
	}
	var record steps.RunRecord
	if cfg.Resume == nil {
		vars := map[string]string{}
		for _, v := range p.Vars {
			vars[v.Name] = v.Value
		}
		err = a.store.CreateRun(ctx, state.Run{ID: a.ID, Name: p.Name, PlanFile: cfg.PlanPath, PlanHash: p.Hash, Vars: vars,
			State: state.RunRunning, PID: os.Getpid(), Host: host, Proc: selfIdentity(), StartedAt: time.Now()})
	} else {
		err = cfg.Resume.claim(ctx, a.store, host)
	}
	if err != nil {
		return err
	}
	if cfg.Resume == nil {
		record, err = a.recordRun(ctx)
	} else {
		record, err = a.restoreRecord(ctx)
	}
	if err != nil {
		return err
	}
	// Manifests carry the view the plan's provenance: asks for.
	record.Provenance = record.Provenance.Shared(p.Provenance)
	cwd, _ := os.Getwd()
	a.steps = steps.New(steps.Config{Platform: a.pf, Plan: p, Secrets: cfg.Secrets, RunID: a.ID, BaseDir: cwd, StateDir: cfg.StateDir, Record: record,
		TransientBackoff: cfg.TransientBackoff, StopTimeout: cfg.StopTimeout,
		OnAutostop: func(instance string, d steps.AutostopDecision) {
			recordAutostopFired(context.WithoutCancel(ctx), a.store, a.ID, instance, d)
			if a.insts != nil {
				a.insts.note(instance, autostopLine(d))
			}
		}})
	// The watchers go before the connections they stream over.
	a.closers = append(a.closers, a.steps.Close)
	a.insts = newInstances(a.ID, p, a.pf, a.store, a.steps)
	a.insts.sel = cfg.Selection
	a.insts.notify = a.progress.send
	if cfg.Resume != nil {
		// What ssh left of the run's dead apply: its control directory.
		ssh.Sweep(a.ID)
		a.Done = cfg.Resume.done()
		a.slots = cfg.Resume.slots()
		cfg.Resume.restore(a.steps, a.insts)
	}
	return nil
}

// Run runs the graph until every node and finalizer has ended or ctx is
// canceled (then it cancels the running nodes and tears down), and
// records how the run ended: the Outcome the views show, with the exit
// code apply ends with. view hears every event after the state has
// recorded it. The error is one that kept the run from starting; a state
// that could not record the end is Outcome.RecordErr.
func (a *Apply) Run(ctx context.Context, view engine.Observer) (Outcome, error) {
	rec, err := newRecorder(context.WithoutCancel(ctx), a.ID, a.Graph, a.store, view, a.Done)
	if err != nil {
		return Outcome{}, err
	}
	a.rec = rec
	a.progress.set(rec.Event)
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopWatching := a.watchBudget(runCtx, cancel)
	sum := engine.Run(runCtx, a.Graph, engine.Config{
		RunID: a.ID, Parallel: a.cfg.Parallel, Executor: &executor{run: a.ID, g: a.Graph, insts: a.insts, steps: a.steps, store: a.store},
		Instances: a.insts, Observer: rec, FinallyTimeout: a.cfg.FinallyTimeout, Done: a.Done,
		Slots: a.slots, GPUs: a.steps.GPUs, SkipSalvage: a.skipSalvage,
	})
	stopWatching()
	return a.finish(context.WithoutCancel(ctx), sum), nil
}

// Verdict sums up how a run ended: the run state to record and a line
// with the node counts.
func Verdict(s engine.Summary) (runState, message string) {
	counts := fmt.Sprintf("%d succeeded, %d failed, %d skipped, %d canceled, %d timed out",
		s.Count(engine.Succeeded), s.Count(engine.Failed), s.Count(engine.Skipped), s.Count(engine.Canceled), s.Count(engine.TimedOut))
	if len(s.Salvaged) > 0 {
		// Counted among the succeeded; what they copied may be partial.
		counts += fmt.Sprintf(", %d salvaged", len(s.Salvaged))
	}
	switch {
	case len(s.Left) > 0 || len(s.Stopped) > 0:
		// A stopped instance still exists (and bills for its disk): it
		// needs a decision, as one whose delete failed does.
		return state.RunTeardownIncomplete, "teardown incomplete (" + counts + ")"
	case s.Interrupted:
		return state.RunInterrupted, "interrupted; teardown completed (" + counts + ")"
	case s.Failed():
		return state.RunFailed, "failed; teardown completed (" + counts + ")"
	}
	return state.RunSucceeded, "succeeded (" + counts + ")"
}

// finish records the end of the run that ended as sum says: its state,
// the exit code apply ends with and the verdict (also kept as the RunEnded
// event of the state). It returns the Outcome the views show.
func (a *Apply) finish(ctx context.Context, sum engine.Summary) Outcome {
	why := a.budgetCrossed()
	if why != "" {
		// Cancelled by the budget, not by the user: a failure (exit 1).
		sum.Interrupted = false
	}
	runState, verdict := Verdict(sum)
	if why != "" {
		verdict = "over budget (" + why + "): " + verdict
	}
	exitCode := ExitCode(runState)
	now := time.Now()
	a.rec.record(engine.Event{Time: now, Type: engine.RunEnded, ExitCode: &exitCode, Message: verdict})
	err := a.store.UpdateRun(ctx, a.ID, state.RunUpdate{State: runState, EndedAt: now, ExitCode: exitCode, Message: verdict})
	// The logs the failures show end where the nodes ended.
	for _, n := range a.Graph.Nodes {
		_ = a.store.FlushLog(a.ID, n.ID)
	}
	o := a.outcome(sum, runState, exitCode, verdict)
	o.RecordErr = err
	if c, cerr := pricing.Costs(ctx, a.store, a.ID, now); cerr == nil && len(c.Instances) > 0 {
		o.Cost = &c
	}
	if t, rerr := Results(ctx, a.store, a.ID); rerr == nil {
		o.Results = t
	}
	return o
}

// Abandon records that teardown was abandoned (a third interrupt): what it
// had not removed may still exist (ExitTeardown, which apply then exits
// with). It gives up after two seconds rather than wait on a busy state.
func (a *Apply) Abandon() {
	recorded := make(chan struct{})
	// A bare goroutine, not a conc.WaitGroup: the point is not to wait
	// for it past two seconds (the process exits right after).
	go func() {
		_ = a.store.UpdateRun(context.Background(), a.ID, state.RunUpdate{State: state.RunTeardownIncomplete, EndedAt: time.Now(), ExitCode: ExitTeardown, Message: "teardown abandoned by a third interrupt"})
		close(recorded)
	}()
	select {
	case <-recorded:
	case <-time.After(2 * time.Second):
	}
}

// Alive returns the run's resources that may still exist, as "kind name".
func (a *Apply) Alive(ctx context.Context) ([]string, error) {
	alive, err := a.store.Alive(ctx, a.ID)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(alive))
	for _, r := range alive {
		names = append(names, r.Kind+" "+r.Name)
	}
	return names, nil
}

// Close closes the state and the platform's connections and withdraws the
// run's announcement, last opened first.
func (a *Apply) Close() {
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i]()
	}
	a.closers = nil
}

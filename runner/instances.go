package runner

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
	"github.com/taoflow/taoflow/pricing"
	"github.com/taoflow/taoflow/state"
	"github.com/taoflow/taoflow/steps"
)

// This file gives the engine what it declares it needs (Executor,
// Instances) from the steps, the platform and the state: instances are
// recorded before they are created, and released by the run's policy —
// deleted, stopped when a results upload on them failed, left with keep:
// true, never touched when the plan only uses them.

// instances provides the run's instances: it records each one in the state
// before creating it, and releases it (stopping the run's jobs first).
type instances struct {
	run      string
	plan     *plan.Plan
	platform platform.Platform
	store    *state.Store
	steps    *steps.Steps

	mu   sync.Mutex
	live map[string]platform.Instance
	ids  map[string]int64
	kept []string // "name (ref)" of instances kept by keep: true
	// notify, when set, tells the view about an instance (a job stop that
	// failed, an instance found gone).
	notify func(instance, msg string)
	// deleteStep marks the instances whose delete step runs now: it stops
	// the jobs itself before it asks for the release.
	deleteStep map[string]bool
	// sel is the types chosen for the instances created (Select); nil:
	// create:'s type as written.
	sel *pricing.Selection
	// prior holds, when resuming, the instances an earlier attempt of the
	// run created that may still exist, by name.
	prior map[string]state.Resource
	// rearm is set on a resumed run: the autostop watchdogs an earlier
	// attempt armed on the instances it takes back are armed again.
	rearm bool
}

var _ engine.Instances = (*instances)(nil)

func newInstances(run string, p *plan.Plan, pf platform.Platform, store *state.Store, st *steps.Steps) *instances {
	return &instances{run: run, plan: p, platform: pf, store: store, steps: st,
		live: map[string]platform.Instance{}, ids: map[string]int64{}}
}

// deleteStepRuns marks name's delete step as running (Release then leaves
// the stopping of its jobs to the delete), and returns what unmarks it.
func (in *instances) deleteStepRuns(name string) (done func()) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.deleteStep == nil {
		in.deleteStep = map[string]bool{}
	}
	in.deleteStep[name] = true
	return func() {
		in.mu.Lock()
		defer in.mu.Unlock()
		delete(in.deleteStep, name)
	}
}

// keptNames returns the instances left running because the plan said
// keep: true, as "name (platform name)".
func (in *instances) keptNames() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]string(nil), in.kept...)
}

func (in *instances) get(name string) (platform.Instance, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	pi, ok := in.live[name]
	return pi, ok
}

// Acquire creates the instance when this run owns it (local sandboxes, brev
// create:), else uses it as it is.
func (in *instances) Acquire(ctx context.Context, name string) error {
	pi := in.plan.Instance(name)
	if pi == nil {
		return fmt.Errorf("unknown instance %s", name)
	}
	spec := platform.Spec{Name: name, Type: pi.CreateType, Existing: pi.Existing, Host: pi.Host}
	if c := in.sel.For(name); c != nil && len(c.Chain) > 0 {
		spec.Type, spec.Offers = strings.Join(c.Chain, ","), c.Offers
	}
	creator, canCreate := in.platform.(platform.Creator)
	owned := canCreate && pi.RunCreates(in.platform.Kind())
	if b := in.plan.Budget; owned && b.MaxCost > 0 && !b.AllowUnpriced && in.sel.For(name) != nil && !in.sel.For(name).Priced() {
		// CheckBudget refuses such a plan before the run starts; this
		// holds the promise for any way around it.
		return fmt.Errorf("instance %s: not created: budget.max_cost is %s and its type has no known list price, so the budget could not count it (budget.unpriced: allow creates it all the same)", name, platform.Dollars(b.MaxCost))
	}
	if !owned {
		inst := platform.Instance{Name: name, Ref: pi.Host}
		if canCreate && pi.Existing != "" {
			// Adopted, never created: the platform checks it exists and is
			// ready, and it is not recorded as this run's to delete.
			var err error
			if inst, err = creator.Create(ctx, in.run, spec); err != nil {
				return err
			}
			inst.Created = false
		}
		in.mu.Lock()
		in.live[name] = inst
		in.mu.Unlock()
		in.armAgain(ctx, inst)
		return nil
	}
	if res, ok := in.prior[name]; ok && in.exists(ctx, res) {
		if a, ok := in.platform.(platform.Adopter); ok {
			return in.adopt(ctx, a, spec, res)
		}
	}
	intent := PlatformData(in.plan)
	// Billing is counted from here: brev create comes next.
	billedFrom := time.Now().UTC().Format(time.RFC3339Nano)
	intent[pricing.DataBilledFrom] = billedFrom
	if n, ok := in.platform.(platform.Namer); ok {
		// The name it will have, so that a crash during Create leaves
		// something destroy and reap can find.
		intent["ref"] = n.InstanceRef(in.run, spec)
	}
	id, err := in.store.RecordIntent(ctx, state.Resource{RunID: in.run, Kind: state.KindInstance, Name: name, Instance: name,
		Platform: in.platform.Kind(), Data: intent})
	if err != nil {
		return fmt.Errorf("recording instance %s before creating it: %w", name, err)
	}
	in.mu.Lock()
	in.ids[name] = id
	in.mu.Unlock()
	inst, err := creator.Create(ctx, in.run, spec)
	if err != nil {
		return err
	}
	if inst.Attrs == nil {
		inst.Attrs = map[string]string{}
	}
	inst.Attrs[pricing.DataBilledFrom] = billedFrom
	data := map[string]string{"ref": inst.Ref}
	for k, v := range inst.Attrs {
		data[k] = v
	}
	if err := in.store.MarkCreated(ctx, id, data); err != nil {
		return err
	}
	in.mu.Lock()
	in.live[name] = inst
	in.mu.Unlock()
	return nil
}

// adopt uses again an instance an earlier attempt of the run created
// (resume), under its recorded name. It stays the run's to delete.
func (in *instances) adopt(ctx context.Context, a platform.Adopter, spec platform.Spec, res state.Resource) error {
	inst, err := a.Adopt(ctx, in.run, spec, res.Data["ref"])
	if err != nil {
		return fmt.Errorf("using %s again (created by an earlier attempt of this run): %w", spec.Name, err)
	}
	if from := res.Data[pricing.DataBilledFrom]; from != "" {
		if inst.Attrs == nil {
			inst.Attrs = map[string]string{}
		}
		inst.Attrs[pricing.DataBilledFrom] = from
	}
	in.mu.Lock()
	in.ids[spec.Name] = res.ID
	in.live[spec.Name] = inst
	in.mu.Unlock()
	in.armAgain(ctx, inst)
	return nil
}

// armAgain arms again, on a resumed run, the autostop of an instance an
// earlier attempt may have armed: its watchdog went on counting while no
// taoflow renewed its lease. A preflight that runs again arms it too.
func (in *instances) armAgain(ctx context.Context, inst platform.Instance) {
	if !in.rearm || !in.steps.Armed(inst.Name) {
		return
	}
	if _, err := in.steps.Arm(ctx, inst, nil); err != nil {
		in.note(inst.Name, fmt.Sprintf("could not arm its autostop again: %v", err))
	}
}

// foundStopped reports an instance found stopped (where wraps
// platform.ErrStopped) that had an autostop armed: it stopped itself.
func (in *instances) foundStopped(ctx context.Context, name string, where error) {
	if !errors.Is(where, platform.ErrStopped) {
		return
	}
	if line := foundStopped(ctx, in.store, in.run, name); line != "" {
		in.note(name, "autostop: "+line)
	}
}

// exists says whether the instance of resource res (from an earlier attempt
// of the run) is there to be used again under its recorded name: created,
// or being created when that attempt died and found in the platform's
// list. When in doubt it is not, and a new create meets it.
func (in *instances) exists(ctx context.Context, res state.Resource) bool {
	if res.Data["ref"] == "" {
		return false
	}
	if res.State == state.ResourceCreated {
		return true
	}
	l, ok := in.platform.(platform.Lister)
	if !ok {
		return false
	}
	all, err := l.List(ctx)
	if err != nil {
		return false
	}
	for _, i := range all {
		if i.Ref == res.Data["ref"] {
			return true
		}
	}
	return false
}

// Release stops the run's jobs on the instance (when any were launched
// and it is there to reach), then deletes (or stops) it when the run
// created it, and says what became of it. An instance the run created is
// deleted even when its jobs could not be stopped (deleting it stops
// them); one that the platform no longer lists, or is deleting, counts as
// gone. An error means something the run made may still exist and was not
// meant to: the instance, or jobs on an instance it did not create.
func (in *instances) Release(ctx context.Context, name string, mode engine.ReleaseMode) (engine.ReleaseOutcome, error) {
	inst, ok := in.get(name)
	in.mu.Lock()
	id, owned := in.ids[name]
	in.mu.Unlock()
	pi := in.plan.Instance(name)
	keep := pi != nil && pi.Keep && ok
	if !owned {
		if !ok {
			return engine.ReleaseLeftAlone, nil
		}
		if where := in.find(ctx, inst); where != nil {
			// Gone or stopped: no job of the run runs there any more.
			in.foundStopped(ctx, name, where)
			return engine.ReleaseLeftAlone, in.markJobsGone(ctx, name)
		}
		if err := in.stopJobs(ctx, name, inst, false); err != nil {
			return engine.ReleaseLeftAlone, err
		}
		return engine.ReleaseLeftAlone, nil
	}
	if !ok {
		// Creation failed or was interrupted: delete whatever may exist under the name.
		inst = platform.Instance{Name: name, Created: true}
		if r, err := in.store.Resource(ctx, id); err == nil {
			inst.Ref = r.Data["ref"]
		}
	}
	// Is it still there? One the platform no longer lists is gone, jobs
	// and all, whoever removed it.
	where := in.find(ctx, inst)
	if errors.Is(where, platform.ErrNotFound) {
		in.note(name, "no longer exists ("+where.Error()+"); nothing to stop or delete")
		if err := in.markJobsGone(ctx, name); err != nil {
			return engine.ReleaseDeleted, err
		}
		return engine.ReleaseDeleted, in.store.MarkDeleted(ctx, id)
	}
	in.foundStopped(ctx, name, where)
	var jobsErr error
	in.mu.Lock()
	stepTried := in.deleteStep[name]
	in.mu.Unlock()
	switch {
	case !ok || errors.Is(where, platform.ErrStopped):
		// Nothing runs on a stopped instance.
	case stepTried && !keep && mode == engine.ReleaseDelete:
		// The delete step that asks for this release has just tried to
		// stop the jobs (and logged how it went); deleting stops them.
	default:
		jobsErr = in.stopJobs(ctx, name, inst, !keep)
	}
	if keep {
		// keep: true — the user asked for it to outlive the run. It stays
		// recorded (as kept), so `taoflow destroy RUN` can still remove it
		// and `taoflow reap` leaves it alone.
		in.mu.Lock()
		in.kept = append(in.kept, fmt.Sprintf("%s (%s)", name, inst.Ref))
		in.mu.Unlock()
		if err := in.store.MarkKept(ctx, id, fmt.Sprintf("kept (keep: true): %s stays and bills until taoflow destroy %s", inst.Ref, in.run)); err != nil {
			return engine.ReleaseKept, err
		}
		return engine.ReleaseKept, jobsErr
	}
	// The delete (or stop) runs on a context of its own, with the
	// platform's own bound: what the job stop used of ctx (a hung
	// instance) is never taken from it.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteBound(in.platform))
	defer cancel()
	ctx = dctx
	var err error
	switch mode {
	case engine.ReleaseStop:
		stopper, canStop := in.platform.(platform.Stopper)
		if !canStop && pi != nil && !pi.Bills(in.plan.Platform.Kind) {
			// A local sandbox costs nothing while it waits: it is held,
			// recorded so that taoflow destroy removes it, and the run
			// ends as failed (exit 1), not as a teardown that left
			// something billing (exit 3).
			return engine.ReleaseHeld, in.store.MarkKept(ctx, id, fmt.Sprintf("held: a results upload or fetch on %s failed, so it keeps them (%s); copy them, then taoflow destroy %s --yes", name, inst.Ref, in.run))
		}
		if !canStop {
			err = fmt.Errorf("a results upload on %s failed, so it was not deleted, and %s instances can't be stopped; it is left as it is (%s)", name, in.platform.Kind(), inst.Ref)
			break
		}
		if errors.Is(where, platform.ErrStopped) {
			return engine.ReleaseStopped, in.store.MarkStopped(ctx, id, "stopped (found stopped): a results upload or fetch on it failed; its disk is kept")
		}
		err = stopper.Stop(ctx, inst)
		if err == nil {
			return engine.ReleaseStopped, in.store.MarkStopped(ctx, id, "stopped: a results upload or fetch on it failed; its disk is kept")
		}
		if errors.Is(err, platform.ErrNotFound) {
			return engine.ReleaseDeleted, in.store.MarkDeleted(ctx, id)
		}
		if errors.Is(err, platform.ErrNotStoppable) {
			// Deleting would lose the results; stopping is not possible.
			err = fmt.Errorf("LEFT RUNNING: %s (%s) still holds the results of an upload that failed, so it was not deleted, and its type %s cannot be stopped; it bills %s until you fetch the results and run taoflow destroy %s --yes",
				name, inst.Ref, orDash(inst.Attrs["type"]), perHour(inst.Attrs["price_per_hour"]), in.run)
		}
	default:
		deleter, canDelete := in.platform.(platform.Deleter)
		if !canDelete {
			return engine.ReleaseDeleted, nil
		}
		if err = deleter.Delete(ctx, inst); err == nil {
			// Its jobs went with it.
			_ = in.markJobsGone(ctx, name)
			return engine.ReleaseDeleted, in.store.MarkDeleted(ctx, id)
		}
	}
	_ = in.store.MarkFailed(context.WithoutCancel(ctx), id, err.Error())
	return engine.ReleaseUnknown, err
}

// deleteBound is the time the Delete or Stop of an instance on pf gets.
func deleteBound(pf platform.Platform) time.Duration {
	if b, ok := pf.(platform.DeleteBounder); ok {
		return b.DeleteBound()
	}
	return platform.DefaultDeleteBound
}

// find asks the platform whether inst is there (platform.Finder); nil when
// it cannot tell.
func (in *instances) find(ctx context.Context, inst platform.Instance) error {
	f, ok := in.platform.(platform.Finder)
	if !ok || inst.Ref == "" {
		return nil
	}
	err := f.Find(ctx, inst)
	if errors.Is(err, platform.ErrNotFound) || errors.Is(err, platform.ErrStopped) {
		return err
	}
	return nil
}

// stopJobs stops the run's jobs on instance name, when any were launched
// there. deleting says the instance is deleted next (which stops them):
// then a failure is only reported.
func (in *instances) stopJobs(ctx context.Context, name string, inst platform.Instance, deleting bool) error {
	if !in.jobsLaunched(ctx, name) && !in.steps.Armed(name) {
		// An armed autostop is disarmed with the jobs' stop, jobs or not.
		return nil
	}
	// Bounded (steps.Config.StopTimeout): a hung instance must not take
	// the time of its delete, nor the whole teardown.
	if err := in.steps.CleanupBefore(ctx, inst); err != nil {
		switch {
		case deleting && errors.Is(err, steps.ErrStopTimedOut):
			in.note(name, fmt.Sprintf("could not stop the jobs (%v); deleting it", err))
		case deleting:
			in.note(name, fmt.Sprintf("could not stop its jobs (%v); deleting it stops them", err))
		}
		return fmt.Errorf("stopping this run's jobs on %s: %w", name, err)
	}
	return in.markJobsGone(ctx, name)
}

// jobsLaunched reports whether a job of the run may still run on
// instance name: one recorded and not yet known to be gone. When the state
// cannot say, it assumes one may.
func (in *instances) jobsLaunched(ctx context.Context, name string) bool {
	jobs, err := in.aliveJobs(ctx, name)
	return err != nil || len(jobs) > 0
}

// aliveJobs returns the run's jobs on instance name that the state does
// not know to be gone.
func (in *instances) aliveJobs(ctx context.Context, name string) ([]state.Resource, error) {
	alive, err := in.store.Alive(ctx, in.run)
	if err != nil {
		return nil, err
	}
	var jobs []state.Resource
	for _, r := range alive {
		if r.Kind == state.KindJob && r.Instance == name {
			jobs = append(jobs, r)
		}
	}
	return jobs, nil
}

// note tells the view about an instance, if anyone listens.
func (in *instances) note(name, msg string) {
	if in.notify != nil {
		in.notify(name, msg)
	}
}

// markJobsGone records that the run's jobs on an instance were stopped.
func (in *instances) markJobsGone(ctx context.Context, name string) error {
	jobs, err := in.aliveJobs(ctx, name)
	if err != nil {
		return err
	}
	for _, r := range jobs {
		if err := in.store.MarkDeleted(ctx, r.ID); err != nil {
			return err
		}
	}
	return nil
}

// executor runs a node's attempt through the steps.
type executor struct {
	run   string
	g     *engine.Graph
	insts *instances
	steps *steps.Steps
	store *state.Store
}

var _ engine.Executor = (*executor)(nil)

func (e *executor) Execute(ctx context.Context, t *engine.Task) error {
	inst, ok := e.insts.get(t.Instance)
	if !ok {
		return fmt.Errorf("instance %s is not available", t.Instance)
	}
	n := t.Node
	req := StepRequest(e.g, e.run, n, inst, t.With, t.Upstream, t.Slot)
	req.Attempt, req.Log, req.Progress, req.Release = t.Attempt, t.Log, t.Progress, t.Release
	if t.Slot != nil {
		// A resumed run gives the cell the same slot, and so the same
		// GPUs its job may still be using.
		if err := e.store.SetNodeFact(context.WithoutCancel(ctx), e.run, n.ID, factSlot, strconv.Itoa(t.Slot.Index)); err != nil {
			return fmt.Errorf("recording the slot of %s: %w", n.ID, err)
		}
	}
	if n.Step.Uses == plan.KindDelete {
		// No job to stop where none was launched, nor on an instance that
		// is gone or stopped (Release deletes it all the same).
		req.NoJobs = (!e.insts.jobsLaunched(ctx, t.Instance) && !e.steps.Armed(t.Instance)) || e.insts.find(ctx, inst) != nil
		defer e.insts.deleteStepRuns(t.Instance)()
	}
	if prior, err := e.store.Node(ctx, e.run, n.ID); err == nil {
		req.Facts = prior.Facts
		if prior.Facts[pricing.FactUses] == "" {
			// What ran when, for the GPU-idle time (Costs).
			_ = e.store.SetNodeFact(context.WithoutCancel(ctx), e.run, n.ID, pricing.FactUses, n.Step.Uses)
		}
	}
	req.Record = func(key, value string) {
		if err := e.store.SetNodeFact(context.WithoutCancel(ctx), e.run, n.ID, key, value); err != nil && t.Log != nil {
			fmt.Fprintf(t.Log, "could not record the %s in the state: %v\n", key, err)
		}
	}
	if n.Step.Uses == plan.KindRun {
		data := PlatformData(e.insts.plan)
		data["instance_ref"] = inst.Ref
		id, err := e.store.RecordIntent(ctx, state.Resource{RunID: e.run, Kind: state.KindJob, Name: n.JobID, Instance: t.Instance,
			Platform: e.insts.platform.Kind(), Data: data})
		if err != nil {
			return fmt.Errorf("recording job %s before launching it: %w", n.JobID, err)
		}
		e.recordRunFacts(ctx, req)
		if err := e.steps.Do(ctx, req); err != nil {
			return err
		}
		return e.store.MarkCreated(ctx, id, nil)
	}
	if err := e.salvageCheck(ctx, t, inst, &req); err != nil {
		return err
	}
	err := e.steps.Do(ctx, req)
	if err == nil && n.Step.Uses == plan.KindUploadS3 && req.Record != nil {
		recordUpload(req)
	}
	if err == nil {
		recordPartial(t, req)
	}
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// perHour says what a price attribute ("3.29") costs: "~$3.29/h (list
// price)", or "by the hour" when it is not known.
func perHour(price string) string {
	v, err := strconv.ParseFloat(price, 64)
	if err != nil {
		return "by the hour"
	}
	return "~" + platform.Dollars(v) + "/h (list price)"
}

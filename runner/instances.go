package runner

import (
	"context"
	"fmt"
	"sync"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
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
	// prior holds, when resuming, the instances an earlier attempt of the
	// run created that may still exist, by name.
	prior map[string]state.Resource
}

var _ engine.Instances = (*instances)(nil)

func newInstances(run string, p *plan.Plan, pf platform.Platform, store *state.Store, st *steps.Steps) *instances {
	return &instances{run: run, plan: p, platform: pf, store: store, steps: st,
		live: map[string]platform.Instance{}, ids: map[string]int64{}}
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
	creator, canCreate := in.platform.(platform.Creator)
	owned := canCreate && (in.platform.Kind() == plan.PlatformLocal || pi.Create)
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
		return nil
	}
	if res, ok := in.prior[name]; ok && in.exists(ctx, res) {
		if a, ok := in.platform.(platform.Adopter); ok {
			return in.adopt(ctx, a, spec, res)
		}
	}
	intent := PlatformData(in.plan)
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
	in.mu.Lock()
	in.ids[spec.Name] = res.ID
	in.live[spec.Name] = inst
	in.mu.Unlock()
	return nil
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

// Release stops the run's jobs on the instance, then deletes (or stops) it
// when the run created it. An error means it may still exist.
func (in *instances) Release(ctx context.Context, name string, mode engine.ReleaseMode) error {
	inst, ok := in.get(name)
	in.mu.Lock()
	id, owned := in.ids[name]
	in.mu.Unlock()
	if ok {
		if err := in.steps.Cleanup(ctx, inst); err != nil {
			return fmt.Errorf("stopping this run's jobs on %s: %w", name, err)
		}
		if err := in.markJobsGone(ctx, name); err != nil {
			return err
		}
	}
	if !owned {
		return nil
	}
	if !ok {
		// Creation failed or was interrupted: delete whatever may exist under the name.
		inst = platform.Instance{Name: name, Created: true}
		if r, err := in.store.Resource(ctx, id); err == nil {
			inst.Ref = r.Data["ref"]
		}
	}
	if pi := in.plan.Instance(name); pi != nil && pi.Keep && ok {
		// keep: true — the user asked for it to outlive the run. It stays
		// recorded (not deleted), so `taoflow destroy RUN` can still remove it
		// and `taoflow reap` leaves it alone.
		in.mu.Lock()
		in.kept = append(in.kept, fmt.Sprintf("%s (%s)", name, inst.Ref))
		in.mu.Unlock()
		return in.store.MarkFailed(ctx, id, fmt.Sprintf("kept (keep: true): %s stays and bills until taoflow destroy %s", inst.Ref, in.run))
	}
	var err error
	switch mode {
	case engine.ReleaseStop:
		stopper, canStop := in.platform.(platform.Stopper)
		if !canStop {
			err = fmt.Errorf("a results upload on %s failed, so it was not deleted, and %s instances can't be stopped; it is left as it is (%s)", name, in.platform.Kind(), inst.Ref)
			break
		}
		err = stopper.Stop(ctx, inst)
		if err == nil {
			return in.store.MarkFailed(ctx, id, "stopped: a results upload on it failed; its disk is kept")
		}
	default:
		deleter, canDelete := in.platform.(platform.Deleter)
		if !canDelete {
			return nil
		}
		if err = deleter.Delete(ctx, inst); err == nil {
			return in.store.MarkDeleted(ctx, id)
		}
	}
	_ = in.store.MarkFailed(context.WithoutCancel(ctx), id, err.Error())
	return err
}

// markJobsGone records that the run's jobs on an instance were stopped.
func (in *instances) markJobsGone(ctx context.Context, name string) error {
	alive, err := in.store.Alive(ctx, in.run)
	if err != nil {
		return err
	}
	for _, r := range alive {
		if r.Kind == state.KindJob && r.Instance == name {
			if err := in.store.MarkDeleted(ctx, r.ID); err != nil {
				return err
			}
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
	req := steps.Request{
		NodeID: n.ID, Step: n.Step, Instance: inst, With: t.With, JobID: n.JobID,
		Attempt: t.Attempt, Log: t.Log, Progress: t.Progress, Release: t.Release,
	}
	if prior, err := e.store.Node(ctx, e.run, n.ID); err == nil {
		req.Facts = prior.Facts
	}
	req.Record = func(key, value string) {
		if err := e.store.SetNodeFact(context.WithoutCancel(ctx), e.run, n.ID, key, value); err != nil && t.Log != nil {
			fmt.Fprintf(t.Log, "could not record the %s in the state: %v\n", key, err)
		}
	}
	if n.Cell != nil {
		c := &steps.Cell{ID: n.Cell.ID, Index: n.Cell.Index}
		for _, v := range n.Cell.Values {
			c.Values = append(c.Values, steps.KV{Key: v.Key, Value: v.Value})
		}
		req.Cell = c
	}
	for _, up := range t.Upstream {
		if up.Node.Step.Uses != plan.KindRun {
			continue
		}
		w := e.g.With(up.Node, engine.Scope{RunID: e.run, Instance: up.Instance})
		job := steps.Job{ID: up.Node.JobID}
		if v := w.Get("results"); v != nil {
			job.Results = v.Text
		}
		if v := w.Get("image"); v != nil {
			job.Image = v.Text
		}
		req.Jobs = append(req.Jobs, job)
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
	err := e.steps.Do(ctx, req)
	if err == nil && n.Step.Uses == plan.KindUploadS3 && req.Record != nil {
		recordUpload(req)
	}
	return err
}

package runner

import (
	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
	"github.com/taoflow/taoflow/steps"
)

// StepRequest translates node n of run, on inst with its with: values,
// into the request its step gets: the one translation for apply's
// executor and plan's preview. upstream is what engine.Graph.Upstream
// resolved: a wait follows the jobs of the run nodes among them, each
// with the with: of the instance it ran on. The caller adds what only a
// live run has (attempt, log, progress, release, facts).
func StepRequest(g *engine.Graph, run string, n *engine.Node, inst platform.Instance, with *plan.Value, upstream []engine.Upstream, slot *engine.Slot) steps.Request {
	req := steps.Request{NodeID: n.ID, Step: n.Step, Instance: inst, With: with, JobID: n.JobID}
	if slot != nil {
		req.Slot = &steps.Slot{Index: slot.Index, GPUs: slot.GPUs}
	}
	if n.Cell != nil {
		c := &steps.Cell{ID: n.Cell.ID, Index: n.Cell.Index}
		for _, v := range n.Cell.Values {
			c.Values = append(c.Values, steps.KV{Key: v.Key, Value: v.Value})
		}
		req.Cell = c
	}
	for _, up := range upstream {
		if up.Node == nil || up.Node.Step.Uses != plan.KindRun {
			continue
		}
		w := g.With(up.Node, engine.Scope{RunID: run, Instance: up.Instance})
		job := steps.Job{ID: up.Node.JobID}
		if v := w.Get("results"); v != nil {
			job.Results = v.Text
		}
		if v := w.Get("image"); v != nil {
			job.Image = v.Text
		}
		req.Jobs = append(req.Jobs, job)
	}
	return req
}

// PreviewRequest is StepRequest for the plan preview, before any
// placement: a cell, and a cell's run upstream, are on INSTANCE.
func PreviewRequest(g *engine.Graph, run string, n *engine.Node) steps.Request {
	placed := func(t *engine.Node) string {
		if t.Instance == "" {
			return "INSTANCE"
		}
		return t.Instance
	}
	inst := placed(n)
	var slot *engine.Slot
	if n.Cell != nil {
		// Which slot a cell holds is known when it runs: show slot 0, with
		// the GPUs it has when the instance declares them, else one GPU
		// per slot (the least preflight lets through).
		name := inst
		if g.Plan.Instance(name) == nil && len(n.Pool) > 0 {
			name = n.Pool[0]
		}
		if in := g.Plan.Instance(name); in != nil {
			slot = &engine.Slot{Index: 0, GPUs: plan.SlotGPUs(max(in.GPUs, in.Slots), in.Slots, 0)}
		}
	}
	return StepRequest(g, run, n, platform.Instance{Name: inst}, g.With(n, engine.Scope{RunID: run, Instance: inst, Slot: slot}), g.Upstream(n, n.Instance, placed), slot)
}

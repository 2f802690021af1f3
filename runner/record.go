package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/state"
)

// recorder writes the engine's events to the state (runs, nodes, events,
// node logs) and hands them on to the view. Events come from the engine and
// from the platform (its progress while it prepares instances), so Event
// takes one event at a time, whoever sends it.
type recorder struct {
	run   string
	g     *engine.Graph
	store *state.Store
	view  engine.Observer

	events sync.Mutex // held through one Event

	mu    sync.Mutex
	nodes map[string]*state.Node
	errs  int
}

// newRecorder records every node of g as pending, except those in done
// (resume), which keep what the state says.
func newRecorder(ctx context.Context, run string, g *engine.Graph, store *state.Store, view engine.Observer, done map[string]string) (*recorder, error) {
	r := &recorder{run: run, g: g, store: store, view: view, nodes: map[string]*state.Node{}}
	for _, n := range g.Nodes {
		if _, ok := done[n.ID]; ok {
			if sn, err := store.Node(ctx, run, n.ID); err == nil {
				r.nodes[n.ID] = &sn
				continue
			}
		}
		sn := &state.Node{RunID: run, ID: n.ID, Step: n.Step.ID, Instance: n.Instance, Finally: n.Finally, State: string(engine.Pending)}
		if n.Cell != nil {
			sn.Cell = n.Cell.ID
		}
		r.nodes[n.ID] = sn
		if err := store.PutNode(ctx, *sn); err != nil {
			return nil, err
		}
		if n.Cell != nil && n.Cell.Group == n.Step.ID {
			// A cell's values, once per cell (on its matrix's own step).
			vals := map[string]string{}
			for _, v := range n.Cell.Values {
				vals[v.Key] = v.Value
			}
			b, _ := json.Marshal(vals)
			if err := store.SetNodeFact(ctx, run, n.ID, FactCellValues, string(b)); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

func (r *recorder) Event(e engine.Event) {
	r.events.Lock()
	defer r.events.Unlock()
	r.view.Event(e)
	r.write(e)
}

// record writes e to the state without showing it: the end of the run,
// which the views show as the run's Outcome.
func (r *recorder) record(e engine.Event) {
	r.events.Lock()
	defer r.events.Unlock()
	r.write(e)
}

func (r *recorder) write(e engine.Event) {
	ctx := context.Background()
	if e.Type != engine.NodeLog && e.Type != engine.NodeMetrics {
		data := map[string]string{}
		if e.State != "" {
			data["state"] = string(e.State)
		}
		if e.ExitCode != nil {
			data["exit_code"] = fmt.Sprint(*e.ExitCode)
		}
		if e.Attempt > 0 {
			data["attempt"] = fmt.Sprint(e.Attempt)
		}
		if e.Instance != "" {
			// taoflow attach shows the instance of an event read back.
			data["instance"] = e.Instance
		}
		_, err := r.store.AppendEvent(ctx, state.Event{RunID: r.run, Time: e.Time, Type: string(e.Type), Node: e.Node, Message: e.Message, Data: data})
		r.check(err)
	}
	if e.Node == "" {
		return
	}
	r.mu.Lock()
	n := r.nodes[e.Node]
	r.mu.Unlock()
	if n == nil {
		return
	}
	switch e.Type {
	case engine.NodeLog:
		r.check(r.store.AppendLog(r.run, e.Node, []byte(e.Message+"\n")))
		return
	case engine.NodeMetrics:
		r.check(r.store.AppendPoints(ctx, r.run, points(n, e)))
		return
	case engine.NodePlaced:
		n.Instance = e.Instance
	case engine.NodeStarted:
		n.State, n.Attempts, n.Instance = string(engine.Running), e.Attempt, e.Instance
		if n.StartedAt.IsZero() {
			n.StartedAt = e.Time
		}
	case engine.NodeRetrying, engine.NodeSalvage:
		n.Message = e.Message
	case engine.NodeProgress:
		n.Progress, n.ProgressFigures = e.Message, e.Progress
	case engine.NodeEnded:
		n.State, n.Message, n.ExitCode, n.EndedAt = string(e.State), e.Message, e.ExitCode, e.Time
		if e.Instance != "" {
			n.Instance = e.Instance
		}
		r.check(r.store.FlushLog(r.run, e.Node))
		if e.State == engine.Failed || e.State == engine.TimedOut {
			if job := Culprit(r.g, e.Node, e.Message); job != "" {
				r.check(r.store.PutNode(ctx, *n))
				r.check(r.store.SetNodeFact(ctx, r.run, e.Node, FactFailedJob, job))
				return
			}
		}
	default:
		return
	}
	r.check(r.store.PutNode(ctx, *n))
}

// points are e's points as the state keeps them: in the series of node
// n's cell, or, for a node without one, of the job that reported them (a
// run step's job on one instance), else of the node itself. A point
// without a time gets the event's.
func points(n *state.Node, e engine.Event) []state.Point {
	out := make([]state.Point, 0, len(e.Points))
	for _, p := range e.Points {
		sp := state.Point{Cell: SeriesKey(n.Cell, p.Job, n.ID), Node: n.ID, Epoch: p.Epoch, Step: p.Step, Time: p.Time, Metric: p.Metric, Value: p.Value}
		if sp.Time.IsZero() {
			sp.Time = e.Time
		}
		out = append(out, sp)
	}
	return out
}

// SeriesKey is the key of a series in the state (state.Point.Cell): the
// matrix cell's id, else the job's id, else the node's id. A results row
// finds its series by SeriesKey(row.Cell, row.Job, "").
func SeriesKey(cell, job, node string) string {
	switch {
	case cell != "":
		return cell
	case job != "":
		return job
	}
	return node
}

// errors is how many writes to the state failed so far.
func (r *recorder) errors() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.errs
}

// check counts state write failures; apply reports them at the end rather
// than stopping a run that is spending money.
func (r *recorder) check(err error) {
	if err != nil {
		r.mu.Lock()
		r.errs++
		r.mu.Unlock()
	}
}

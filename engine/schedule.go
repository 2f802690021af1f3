package engine

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/sourcegraph/conc/panics"
	"github.com/taoflow/taoflow/plan"
)

type nodeRun struct {
	n        *Node
	state    NodeState
	msg      string
	instance string
	group    *groupRun
	finally  bool
	started  bool
	// settings: it failed on its step's own settings before touching
	// its instance (nodeResult.settings).
	settings bool
	// startSeq orders the starts of nodes (execution.starts when it
	// started).
	startSeq int
	// salvage: it runs as a salvage node (salvage.go), instead of ending
	// as salvageWhy says; partial says why what it copies may be partial
	// ("" when every node before it succeeded).
	salvage             bool
	salvageWhy, partial string
}

// groupRun is one matrix cell across the steps that share it: it holds one
// slot of its instance from the placement of its root node until its last
// node ends.
type groupRun struct {
	instance string
	open     int
	placed   bool
	pool     []string
	poolKey  string
	members  []*nodeRun
	slot     int // the slot of instance it holds once placed; -1 before
}

// finish records a node's end and what it means for others.
func (x *execution) finish(nr *nodeRun, st NodeState, msg string, code *int) {
	x.addMay(nr, -1)
	nr.state, nr.msg = st, msg
	if waiting, ok := x.parked[nr]; ok {
		x.ready = append(x.ready, waiting...)
		delete(x.parked, nr)
	}
	if g := nr.group; g != nil {
		g.open--
		if g.open == 0 && g.placed {
			x.insts[g.instance].free(g)
			x.wakeSlots(g.instance)
		}
	}
	// An upload or fetch that ran and did not succeed leaves results only
	// on the instance's disk: it must not be deleted (one that never
	// started, because its training failed, has nothing to lose, and
	// neither has one that failed on its own settings before copying
	// anything). A verified copy of the same directory (or one above it)
	// by a node that started later (a fetch after a failed upload-s3), or
	// that waited for the same nodes (a fetch beside it after the same
	// wait), saves them all the same: it saw at least what the failed one
	// would have.
	if plan.SavesResults(nr.n.Step.Uses) && nr.instance != "" {
		in := x.insts[nr.instance]
		switch from, verified := x.savesFrom(nr); {
		case st == Succeeded && verified:
			in.saved = append(in.saved, copied{from, nr.startSeq, needsKey(nr.n)})
		case st != Succeeded && nr.started && !nr.settings:
			in.unsaved = append(in.unsaved, copied{from, nr.startSeq, needsKey(nr.n)})
		}
	}
	x.emit(Event{Type: NodeEnded, Node: nr.n.ID, Step: nr.n.Step.ID, Instance: nr.instance, State: st, Message: msg, ExitCode: code})
	if st != Succeeded && !nr.finally && !nr.n.Step.ContinueOnError && x.g.Plan.FailFast && st != Skipped && st != Canceled {
		x.cancel(fmt.Errorf("fail_fast: %s %s", nr.n.ID, st))
	}
}

// schedule starts every node that can start now, parks the ones waiting
// for one node to end, and settles nodes that never will run.
func (x *execution) schedule() {
	for {
		// A node settled in this pass (skipped, failed to start) may be what
		// a node scanned before it waits for without being parked on it (a
		// cell waiting for an instance's upstream): then scan again.
		settledAny := false
		kept := x.pending[:0]
		for _, nr := range x.pending {
			var res startResult
			var on *nodeRun
			if x.canceled && !nr.finally {
				why := "not started: " + causeText(context.Cause(x.stepsCtx))
				var salvage bool
				if res, on, salvage = x.trySalvage(nr, why); !salvage {
					x.finish(nr, Canceled, why, nil)
					settledAny = true
					continue
				}
			} else {
				res, on = x.tryStart(nr)
			}
			switch {
			case res == settled:
				settledAny = true
			case res != waiting:
			case on != nil:
				x.parked[on] = append(x.parked[on], nr)
			default:
				kept = append(kept, nr)
			}
		}
		clear(x.pending[len(kept):])
		x.pending = kept
		if len(x.ready) == 0 && !settledAny {
			return
		}
		x.pending = append(x.pending, x.ready...)
		x.ready = nil
	}
}

// unstick fails every node that still waits when nothing is in flight, a
// state the scheduler should never reach; it keeps a bug from hanging a run
// (and its teardown) forever. Each node's message says what it waited on,
// for the bug report.
func (x *execution) unstick() {
	type stuckNode struct {
		nr  *nodeRun
		why string
	}
	var stuck []stuckNode
	for _, nr := range x.pending {
		stuck = append(stuck, stuckNode{nr, x.waitingOn(nr)})
	}
	for on, nodes := range x.parked {
		for _, nr := range nodes {
			stuck = append(stuck, stuckNode{nr, fmt.Sprintf("node %s to end (it is %s)", on.n.ID, on.state)})
		}
		delete(x.parked, on)
	}
	for key, w := range x.slotWait {
		for _, nr := range w.nodes {
			stuck = append(stuck, stuckNode{nr, fmt.Sprintf("a free slot on %s", strings.Join(w.pool, ", "))})
		}
		delete(x.slotWait, key)
	}
	x.pending = nil
	for _, s := range stuck {
		if !s.nr.state.Terminal() {
			x.finish(s.nr, Failed, "internal error: the scheduler could not start this node; it waited on "+s.why+" (please report it)", nil)
		}
	}
	x.pending = append(x.pending, x.ready...)
	x.ready = nil
}

// waitingOn says what a pending node waits for, as far as the scheduler
// can tell.
func (x *execution) waitingOn(nr *nodeRun) string {
	inst := nr.instance
	if nr.group != nil && nr.group.placed {
		inst = nr.group.instance
	}
	if inst == "" {
		return "a place on " + strings.Join(nr.n.Pool, ", ")
	}
	if _, _, on := x.depsOf(nr, inst); on != nil {
		return fmt.Sprintf("node %s to end (it is %s)", on.n.ID, on.state)
	}
	if in := x.insts[inst]; in != nil && in.phase != instReady {
		return fmt.Sprintf("instance %s (it is %s)", inst, in.phase)
	}
	if nr.finally {
		return fmt.Sprintf("the %d step node(s) that may still run on %s", x.mayStep[inst], inst)
	}
	return "its upstream nodes on " + inst
}

// addMay counts nr (delta 1) or stops counting it (-1) on the instances it
// runs or may run on.
func (x *execution) addMay(nr *nodeRun, delta int) {
	add := func(inst string) {
		x.may[inst] += delta
		if !nr.finally {
			x.mayStep[inst] += delta
		}
	}
	switch g := nr.group; {
	case nr.instance != "":
		add(nr.instance)
	case g != nil && g.placed:
		add(g.instance)
	case g != nil:
		for _, p := range g.pool {
			add(p)
		}
	}
}

type startResult int

const (
	waiting startResult = iota
	started
	settled
	parkedOnSlot // waits in slotWait for a free slot in its pool
)

// poolWait is the queue of cells waiting for a slot in one pool.
type poolWait struct {
	pool  []string
	nodes []*nodeRun
}

// wakeSlots moves cells waiting for a slot back to the scheduler: as many
// as inst has free slots, from each queue whose pool holds inst, or every
// waiting cell when inst is "" (an instance came or went).
func (x *execution) wakeSlots(inst string) {
	for key, w := range x.slotWait {
		if inst != "" && !slices.Contains(w.pool, inst) {
			continue
		}
		n := len(w.nodes)
		if in := x.insts[inst]; in != nil {
			n = min(n, in.slots-in.used)
		}
		x.ready = append(x.ready, w.nodes[:n]...)
		w.nodes = w.nodes[n:]
		if len(w.nodes) == 0 {
			delete(x.slotWait, key)
		}
	}
}

func (x *execution) succeeded(nr *nodeRun) bool {
	if nr.salvage {
		return false // what it copied may be partial (salvage.go)
	}
	return nr.state == Succeeded || (nr.n.Step.ContinueOnError && (nr.state == Failed || nr.state == TimedOut))
}

// depsOf checks a node's dependencies on instance inst ("" for a cell not
// yet placed: instance-dependent deps are then checked at placement).
// It returns ok, or the reason the node can never run.
func (x *execution) depsOf(nr *nodeRun, inst string) (ok bool, blocked string, on *nodeRun) {
	for _, d := range nr.n.Needs {
		switch d.Kind {
		case DepNode:
			t := x.byID[d.Node]
			if !t.state.Terminal() {
				return false, "", t
			}
			if !x.succeeded(t) {
				return false, fmt.Sprintf("upstream %s %s", t.n.ID, x.endText(t)), nil
			}
		case DepPlaced:
			for _, t := range x.g.StepNodes(d.Step) {
				tr := x.byID[t.ID]
				if tr.group != nil && !tr.group.placed && !tr.state.Terminal() {
					return false, "", nil // cells still to be placed
				}
				if tr.instance != inst {
					continue
				}
				if !tr.state.Terminal() {
					return false, "", nil
				}
				if !x.succeeded(tr) {
					return false, fmt.Sprintf("upstream %s %s", tr.n.ID, x.endText(tr)), nil
				}
			}
		case DepInstance:
			if inst == "" {
				continue
			}
			if ok, blocked := x.instanceDep(d.Step, inst); !ok {
				return false, blocked, nil
			}
		}
	}
	return true, "", nil
}

// instanceDep checks a cell's need of per-instance step on inst.
func (x *execution) instanceDep(step, inst string) (bool, string) {
	if t := x.stepInst[step][inst]; t != nil {
		if !t.state.Terminal() {
			return false, ""
		}
		if !x.succeeded(t) {
			return false, fmt.Sprintf("upstream %s %s", t.n.ID, x.endText(t))
		}
		return true, ""
	}
	for _, t := range x.g.StepNodes(step) {
		tr := x.byID[t.ID]
		if !tr.state.Terminal() {
			return false, ""
		}
		if !x.succeeded(tr) {
			return false, fmt.Sprintf("upstream %s %s", tr.n.ID, x.endText(tr))
		}
	}
	return true, ""
}

// tryStart starts nr if it can. A node that waits for one node to end
// comes back with that node, so it can be parked until then.
func (x *execution) tryStart(nr *nodeRun) (startResult, *nodeRun) {
	n := nr.n
	if x.cfg.Parallel > 0 && x.running >= x.cfg.Parallel {
		return waiting, nil
	}
	switch {
	case n.Cell != nil && n.Root == "":
		return x.tryPlace(nr)
	case n.Cell != nil:
		if !nr.group.placed {
			ok, blocked, on := x.depsOf(nr, "")
			if !ok && blocked != "" {
				x.finish(nr, Skipped, blocked, nil)
				return settled, nil
			}
			if on == nil {
				on = x.byID[n.Root]
			}
			return waiting, on
		}
		nr.instance = nr.group.instance
	}
	inst := x.insts[nr.instance]
	ok, blocked, on := x.depsOf(nr, nr.instance)
	if blocked != "" {
		if res, on, salvage := x.trySalvage(nr, blocked); salvage {
			return res, on
		}
		x.finish(nr, Skipped, blocked, nil)
		return settled, nil
	}
	if !ok {
		return waiting, on
	}
	if inst.acquireErr != nil {
		st := Failed
		if nr.finally {
			st = Skipped
		}
		x.finish(nr, st, fmt.Sprintf("instance %s is not available: %v", inst.name, inst.acquireErr), nil)
		return settled, nil
	}
	if !inst.acquired() {
		return waiting, nil
	}
	if inst.phase == instReleased {
		x.finish(nr, Skipped, fmt.Sprintf("instance %s was already released", inst.name), nil)
		return settled, nil
	}
	if nr.finally && x.mayStep[nr.instance] > 0 {
		return waiting, nil // finalizers wait for every step node that is or may be on the instance
	}
	x.start(nr)
	return started, nil
}

// tryPlace places a cell's first node on the instance of its pool with the
// most free slots whose per-instance upstream nodes succeeded.
func (x *execution) tryPlace(nr *nodeRun) (startResult, *nodeRun) {
	ok, blocked, on := x.depsOf(nr, "")
	if blocked != "" {
		x.finish(nr, Skipped, blocked, nil)
		return settled, nil
	}
	if !ok {
		return waiting, on
	}
	if mp := nr.n.Step.MaxParallel; mp > 0 && x.perStep[nr.n.Step.ID] >= mp {
		return waiting, nil
	}
	var best *instRun
	var reasons []string
	possible, onlyFull := false, true
	for _, name := range nr.n.Pool {
		in := x.insts[name]
		switch {
		case in.acquireErr != nil:
			reasons = append(reasons, fmt.Sprintf("%s is not available", name))
			continue
		case in.phase >= instReleasing:
			reasons = append(reasons, fmt.Sprintf("%s was released", name))
			continue
		}
		if in.phase == instReady && in.used >= in.slots {
			possible = true
			continue
		}
		ok, blocked, _ := x.depsOf(nr, name)
		if blocked != "" {
			reasons = append(reasons, blocked)
			continue
		}
		possible = true
		if !ok || in.phase != instReady {
			onlyFull = false
			continue
		}
		if best == nil || in.slots-in.used > best.slots-best.used {
			best = in
		}
	}
	if best == nil {
		if !possible {
			x.finish(nr, Skipped, "no instance of its pool can run it: "+strings.Join(reasons, "; "), nil)
			return settled, nil
		}
		if onlyFull && len(reasons) == 0 {
			w := x.slotWait[nr.group.poolKey]
			if w == nil {
				w = &poolWait{pool: nr.group.pool}
				x.slotWait[nr.group.poolKey] = w
			}
			w.nodes = append(w.nodes, nr)
			return parkedOnSlot, nil
		}
		return waiting, nil
	}
	x.place(nr.group, best)
	x.emit(Event{Type: NodePlaced, Node: nr.n.ID, Step: nr.n.Step.ID, Instance: best.name})
	x.start(nr)
	return started, nil
}

// place puts a cell on an instance: it takes a slot there until its last
// node ends, and its nodes no longer count on the rest of the pool.
func (x *execution) place(g *groupRun, in *instRun) {
	in.take(g, -1)
	for _, m := range g.members {
		if !m.state.Terminal() {
			x.addMay(m, -1)
		}
	}
	g.placed, g.instance = true, in.name
	for _, m := range g.members {
		if !m.state.Terminal() {
			if m.n.Root == "" {
				m.instance = in.name
			}
			x.addMay(m, 1)
		}
	}
}

func (x *execution) start(nr *nodeRun) {
	x.starts++
	nr.state, nr.started, nr.startSeq = Running, true, x.starts
	x.running++
	x.perStep[nr.n.Step.ID]++
	ctx, cancel := x.stepsCtx, context.CancelFunc(func() {})
	switch {
	case nr.salvage:
		ctx, cancel = x.salvageContext()
	case nr.finally:
		ctx = x.finalContext(nr.instance)
	}
	inst, upstream, slot := nr.instance, x.upstream(nr), x.slotOf(nr)
	x.spawn(func() message {
		defer cancel()
		return x.attempts(ctx, nr, inst, upstream, slot)
	}, func(p *panics.Recovered) message {
		return nodeResult{nr: nr, st: Failed, msg: p.String()}
	})
}

// slotOf is the slot a node's cell holds, with its GPUs as the instance's
// count stands now; nil for a node of no cell.
func (x *execution) slotOf(nr *nodeRun) *Slot {
	g := nr.group
	if g == nil || !g.placed || g.slot < 0 {
		return nil
	}
	s := &Slot{Index: g.slot}
	if x.cfg.GPUs != nil {
		s.GPUs = plan.SlotGPUs(x.cfg.GPUs(g.instance), x.insts[g.instance].slots, g.slot)
	}
	return s
}

// upstream resolves a node's dependencies for the instance it runs on.
func (x *execution) upstream(nr *nodeRun) []Upstream {
	return x.g.Upstream(nr.n, nr.instance, func(t *Node) string { return x.byID[t.ID].instance })
}

// savesFrom returns the directory an upload-s3 or fetch node copies off its
// instance (with.from as it ran there), and whether a success of it counts
// as a verified copy (an upload-s3 with verify: false does not).
func (x *execution) savesFrom(nr *nodeRun) (string, bool) {
	w := x.g.With(nr.n, Scope{RunID: x.cfg.RunID, Instance: nr.instance})
	from := ""
	if v := w.Get("from"); v != nil {
		from = path.Clean(v.Text)
	}
	verified := true
	if v := w.Get("verify"); v != nil && strings.EqualFold(v.Text, "false") {
		verified = false
	}
	return from, verified
}

// needsKey names the nodes n waits for, sorted: two results copies with
// the same key started once the same work had ended.
func needsKey(n *Node) string {
	deps := make([]string, len(n.Needs))
	for i, d := range n.Needs {
		deps[i] = d.String()
	}
	slices.Sort(deps)
	return strings.Join(deps, "\x00")
}

package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/taoflow/taoflow/plan"
)

// Executor does the work of one node attempt. Package steps implements it;
// the engine only declares what it needs.
type Executor interface {
	Execute(ctx context.Context, t *Task) error
}

// Task is one attempt of one node on one instance.
type Task struct {
	RunID    string
	Node     *Node
	Instance string
	With     *plan.Value // with: resolved for this node and instance
	Attempt  int
	// Upstream lists the nodes this node needed, resolved for its instance,
	// with the instance each ran on (a wait step finds its jobs there).
	Upstream []Upstream
	// Log is the node's log; each line becomes a NodeLog event.
	Log io.Writer
	// Progress reports a short progress line (epoch 3/10 loss 0.2 eta 4m).
	Progress func(string)
	// Release releases the task's instance now (what a delete step ends
	// with). force deletes even if a results upload on it failed.
	Release func(ctx context.Context, force bool) error
}

// Upstream is a node a task needed, and where it ran.
type Upstream struct {
	Node     *Node
	Instance string
}

// ExitCoder is implemented by errors that carry a process exit code.
type ExitCoder interface {
	ExitCode() int
}

// ReleaseMode says how an instance is let go.
type ReleaseMode int

// Release modes.
const (
	// ReleaseDelete deletes what the run created (nothing for instances it
	// didn't create).
	ReleaseDelete ReleaseMode = iota
	// ReleaseStop stops a created instance instead of deleting it (its disk
	// holds results whose upload failed).
	ReleaseStop
)

func (m ReleaseMode) String() string {
	if m == ReleaseStop {
		return "stop"
	}
	return "delete"
}

// ReleaseOutcome says what became of an instance that was released.
type ReleaseOutcome int

// Release outcomes.
const (
	// ReleaseDeleted: the run created it, and it is deleted (or was found
	// gone).
	ReleaseDeleted ReleaseOutcome = iota
	// ReleaseStopped: the run created it and stopped it instead of
	// deleting it (its disk holds results whose upload failed). It still
	// exists, and bills for its disk.
	ReleaseStopped
	// ReleaseKept: the run created it and the plan says keep: true.
	ReleaseKept
	// ReleaseLeftAlone: the run did not create it (an ssh host, an
	// existing instance); only the run's jobs on it were stopped.
	ReleaseLeftAlone
)

func (o ReleaseOutcome) String() string {
	switch o {
	case ReleaseDeleted:
		return "deleted"
	case ReleaseStopped:
		return "stopped"
	case ReleaseKept:
		return "kept"
	case ReleaseLeftAlone:
		return "left alone"
	}
	return "deleted"
}

// Instances provides and releases the run's instances. Release must be
// idempotent; it says what became of the instance, and an error means the
// instance may still exist although it was not meant to.
type Instances interface {
	Acquire(ctx context.Context, name string) error
	Release(ctx context.Context, name string, mode ReleaseMode) (ReleaseOutcome, error)
}

// Config of a run.
type Config struct {
	RunID     string
	Parallel  int // most nodes running at once; 0 = no limit
	Executor  Executor
	Instances Instances
	Observer  Observer
	// FinallyTimeout bounds the finalizers and the release of instances,
	// counted from when they start (default 30m).
	FinallyTimeout time.Duration
	// Done lists nodes that already succeeded (resume), with the instance
	// each ran on.
	Done map[string]string
}

// Summary is the outcome of a run.
type Summary struct {
	States    map[string]NodeState
	Messages  map[string]string
	Placement map[string]string // node → instance it ran on
	// Interrupted is set when the caller's context was cancelled.
	Interrupted bool
	// Stopped lists instances stopped instead of deleted (failed upload):
	// they still exist and were not meant to.
	Stopped []string
	// Kept lists instances kept by keep: true.
	Kept []string
	// Left lists instances whose release failed or was refused: they may
	// still exist (and bill).
	Left []string
}

// Failed reports whether any node (or finalizer) did not succeed, counting
// continue_on_error failures as failures too.
func (s Summary) Failed() bool {
	for _, st := range s.States {
		if st != Succeeded {
			return true
		}
	}
	return false
}

// Count returns how many nodes ended in state st.
func (s Summary) Count(st NodeState) int {
	n := 0
	for _, v := range s.States {
		if v == st {
			n++
		}
	}
	return n
}

type nodeRun struct {
	n        *Node
	state    NodeState
	msg      string
	instance string
	group    *groupRun
	finally  bool
	started  bool
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
}

type instRun struct {
	name          string
	slots, used   int
	acquiring     bool
	acquired      bool
	acquireErr    error
	releasing     bool
	released      bool
	uploadFailed  bool
	forceDelete   bool
	waiters       []chan error
	releaseErrMsg string
	outcome       ReleaseOutcome // of the release, once released
}

type nodeResult struct {
	nr   *nodeRun
	st   NodeState
	msg  string
	code *int
}

type acquireResult struct {
	inst string
	err  error
}

type releaseResult struct {
	inst    string
	outcome ReleaseOutcome
	err     error
}

type releaseRequest struct {
	inst  string
	force bool
	reply chan error
}

type runner struct {
	g   *Graph
	cfg Config

	mu    sync.Mutex // serialises observer calls
	nodes []*nodeRun
	byID  map[string]*nodeRun
	insts map[string]*instRun

	results  chan any
	inflight int
	running  int
	perStep  map[string]int

	// parked holds nodes waiting for one specific node to end; ready
	// holds nodes to look at again on the next pass.
	parked map[*nodeRun][]*nodeRun
	ready  []*nodeRun
	// may counts, per instance, the nodes not yet ended that run or may
	// run there (mayStep: the same without finalizers): an instance nothing
	// may need is released at once.
	may, mayStep map[string]int
	// slotWait holds cells waiting for a free slot in their pool.
	slotWait map[string]*poolWait
	// stepInst finds the per-instance node of a step on an instance.
	stepInst map[string]map[string]*nodeRun

	stepsCtx    context.Context
	cancelSteps context.CancelCauseFunc
	finalCtx    context.Context
	finalCancel context.CancelFunc
	canceled    bool
	interrupted bool
	pending     []*nodeRun
}

// Run runs the graph to the end: every node ends, finalizers run after the
// steps of their instance, and every instance is released. It returns when
// all of that is done, whatever happened; a cancelled ctx stops starting
// nodes and cancels running ones, and teardown still happens on a fresh
// context bounded by FinallyTimeout.
func Run(ctx context.Context, g *Graph, cfg Config) Summary {
	if cfg.Observer == nil {
		cfg.Observer = ObserverFunc(func(Event) {})
	}
	if cfg.FinallyTimeout <= 0 {
		cfg.FinallyTimeout = 30 * time.Minute
	}
	r := &runner{g: g, cfg: cfg, byID: map[string]*nodeRun{}, insts: map[string]*instRun{},
		results: make(chan any, 64), perStep: map[string]int{}, parked: map[*nodeRun][]*nodeRun{},
		may: map[string]int{}, mayStep: map[string]int{}, stepInst: map[string]map[string]*nodeRun{},
		slotWait: map[string]*poolWait{}}
	r.stepsCtx, r.cancelSteps = context.WithCancelCause(ctx)
	defer r.cancelSteps(nil)
	groups := map[*Cell]*groupRun{}
	for _, n := range g.Nodes {
		nr := &nodeRun{n: n, state: Pending, instance: n.Instance, finally: n.Finally}
		if n.Cell != nil {
			gr := groups[n.Cell]
			if gr == nil {
				gr = &groupRun{pool: n.Pool, poolKey: strings.Join(n.Pool, "\x00")}
				groups[n.Cell] = gr
			}
			gr.open++
			gr.members = append(gr.members, nr)
			nr.group = gr
		} else {
			if r.stepInst[n.Step.ID] == nil {
				r.stepInst[n.Step.ID] = map[string]*nodeRun{}
			}
			r.stepInst[n.Step.ID][n.Instance] = nr
		}
		if inst, ok := cfg.Done[n.ID]; ok {
			nr.state, nr.msg, nr.instance = Succeeded, "succeeded in an earlier attempt of this run", inst
			if nr.group != nil {
				nr.group.instance, nr.group.placed = inst, true
				nr.group.open--
			}
		}
		r.nodes = append(r.nodes, nr)
		r.byID[n.ID] = nr
	}
	for _, in := range g.Plan.Instances {
		r.insts[in.Name] = &instRun{name: in.Name, slots: in.Slots}
	}
	// A cell resumed part way holds its slot until its last node ends, as
	// it did before.
	for _, gr := range groups {
		if gr.placed && gr.open > 0 {
			if in := r.insts[gr.instance]; in != nil {
				in.used++
			}
		}
	}
	for _, nr := range r.nodes {
		if !nr.state.Terminal() {
			r.pending = append(r.pending, nr)
			r.addMay(nr, 1)
		}
	}
	r.emit(Event{Type: RunStarted, Message: g.Plan.Name})
	r.acquireAll()
	r.loop(ctx)
	if r.finalCancel != nil {
		r.finalCancel()
	}
	return r.summary()
}

func (r *runner) emit(e Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cfg.Observer.Event(e)
}

// acquireAll starts acquiring every instance some node may run on.
func (r *runner) acquireAll() {
	needed := map[string]bool{}
	for _, nr := range r.pending {
		if nr.instance != "" {
			needed[nr.instance] = true
		}
		for _, p := range nr.n.Pool {
			needed[p] = true
		}
	}
	for _, name := range r.g.Plan.InstanceNames() {
		if !needed[name] {
			continue
		}
		in := r.insts[name]
		in.acquiring = true
		r.inflight++
		r.emit(Event{Type: InstanceAcquire, Instance: name})
		go func() {
			err := r.safeAcquire(name)
			r.results <- acquireResult{inst: name, err: err}
		}()
	}
}

func (r *runner) safeAcquire(name string) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic while acquiring %s: %v", name, p)
		}
	}()
	if r.cfg.Instances == nil {
		return nil
	}
	return r.cfg.Instances.Acquire(r.stepsCtx, name)
}

func (r *runner) loop(ctx context.Context) {
	done := ctx.Done()
	for {
		r.schedule()
		r.maybeRelease()
		if r.inflight == 0 && len(r.pending) == 0 && len(r.parked) == 0 && len(r.slotWait) == 0 {
			return
		}
		if r.inflight == 0 {
			// Nothing is running and nothing can change: whatever still
			// waits would wait forever. Fail it rather than hang.
			r.unstick()
			continue
		}
		select {
		case <-done:
			done = nil
			r.interrupted = true
			r.cancel(context.Cause(ctx))
		case msg := <-r.results:
			r.handle(msg)
		}
	}
}

// cancel stops starting step nodes and cancels running ones.
func (r *runner) cancel(cause error) {
	if r.canceled {
		return
	}
	r.canceled = true
	r.cancelSteps(cause)
	for on, nodes := range r.parked {
		r.ready = append(r.ready, nodes...)
		delete(r.parked, on)
	}
	r.wakeSlots("")
}

func (r *runner) handle(msg any) {
	switch m := msg.(type) {
	case nodeResult:
		r.inflight--
		r.running--
		nr := m.nr
		r.perStep[nr.n.Step.ID]--
		r.finish(nr, m.st, m.msg, m.code)
	case acquireResult:
		r.inflight--
		r.wakeSlots("")
		in := r.insts[m.inst]
		in.acquiring = false
		if m.err != nil {
			in.acquireErr = m.err
			r.emit(Event{Type: InstanceFailed, Instance: m.inst, Message: m.err.Error()})
		} else {
			in.acquired = true
			r.emit(Event{Type: InstanceReady, Instance: m.inst})
		}
	case releaseRequest:
		in := r.insts[m.inst]
		if m.force {
			in.forceDelete = true
		}
		if in.released {
			m.reply <- r.releaseError(in)
			return
		}
		in.waiters = append(in.waiters, m.reply)
		if !in.releasing {
			r.startRelease(in)
		}
	case releaseResult:
		r.inflight--
		r.wakeSlots("")
		in := r.insts[m.inst]
		in.releasing, in.released = false, true
		in.outcome = m.outcome
		if m.err != nil {
			in.releaseErrMsg = m.err.Error()
			r.emit(Event{Type: InstanceLeft, Instance: m.inst, Message: m.err.Error()})
		} else {
			r.emit(Event{Type: InstanceReleased, Instance: m.inst, Message: releasedMessage(m.outcome)})
		}
		for _, w := range in.waiters {
			w <- r.releaseError(in)
		}
		in.waiters = nil
	}
}

func (r *runner) releaseError(in *instRun) error {
	if in.releaseErrMsg == "" {
		return nil
	}
	return errors.New(in.releaseErrMsg)
}

// releasedMessage is what the InstanceReleased event says of outcome.
func releasedMessage(o ReleaseOutcome) string {
	switch o {
	case ReleaseDeleted:
		return "deleted"
	case ReleaseStopped:
		return "stopped instead of deleted: a results upload on it failed (its disk is kept)"
	case ReleaseKept:
		return "kept (keep: true)"
	case ReleaseLeftAlone:
		return "left as it is (not created by this run)"
	}
	return "deleted"
}

// finish records a node's end and what it means for others.
func (r *runner) finish(nr *nodeRun, st NodeState, msg string, code *int) {
	r.addMay(nr, -1)
	nr.state, nr.msg = st, msg
	if waiting, ok := r.parked[nr]; ok {
		r.ready = append(r.ready, waiting...)
		delete(r.parked, nr)
	}
	if g := nr.group; g != nil {
		g.open--
		if g.open == 0 && g.placed {
			r.insts[g.instance].used--
			r.wakeSlots(g.instance)
		}
	}
	// An upload that ran and did not succeed leaves results only on the
	// instance's disk: it must not be deleted (one that never started, because
	// its training failed, has nothing to lose).
	if nr.n.Step.Uses == plan.KindUploadS3 && nr.started && st != Succeeded && nr.instance != "" {
		r.insts[nr.instance].uploadFailed = true
	}
	r.emit(Event{Type: NodeEnded, Node: nr.n.ID, Step: nr.n.Step.ID, Instance: nr.instance, State: st, Message: msg, ExitCode: code})
	if st != Succeeded && !nr.finally && !nr.n.Step.ContinueOnError && r.g.Plan.FailFast && st != Skipped && st != Canceled {
		r.cancel(fmt.Errorf("fail_fast: %s %s", nr.n.ID, st))
	}
}

// schedule starts every node that can start now, parks the ones waiting
// for one node to end, and settles nodes that never will run.
func (r *runner) schedule() {
	for {
		// A node settled in this pass (skipped, failed to start) may be what
		// a node scanned before it waits for without being parked on it (a
		// cell waiting for an instance's upstream): then scan again.
		settledAny := false
		kept := r.pending[:0]
		for _, nr := range r.pending {
			if r.canceled && !nr.finally {
				r.finish(nr, Canceled, "not started: "+causeText(context.Cause(r.stepsCtx)), nil)
				settledAny = true
				continue
			}
			res, on := r.tryStart(nr)
			switch {
			case res == settled:
				settledAny = true
			case res != waiting:
			case on != nil:
				r.parked[on] = append(r.parked[on], nr)
			default:
				kept = append(kept, nr)
			}
		}
		clear(r.pending[len(kept):])
		r.pending = kept
		if len(r.ready) == 0 && !settledAny {
			return
		}
		r.pending = append(r.pending, r.ready...)
		r.ready = nil
	}
}

// unstick fails every node that still waits when nothing is in flight, a
// state the scheduler should never reach; it keeps a bug from hanging a run
// (and its teardown) forever.
func (r *runner) unstick() {
	var stuck []*nodeRun
	stuck = append(stuck, r.pending...)
	for on, nodes := range r.parked {
		stuck = append(stuck, nodes...)
		delete(r.parked, on)
	}
	for key, w := range r.slotWait {
		stuck = append(stuck, w.nodes...)
		delete(r.slotWait, key)
	}
	r.pending = nil
	for _, nr := range stuck {
		if !nr.state.Terminal() {
			r.finish(nr, Failed, "internal error: the scheduler could not start this node (please report it)", nil)
		}
	}
	r.pending = append(r.pending, r.ready...)
	r.ready = nil
}

// addMay counts nr (delta 1) or stops counting it (-1) on the instances it
// runs or may run on.
func (r *runner) addMay(nr *nodeRun, delta int) {
	add := func(inst string) {
		r.may[inst] += delta
		if !nr.finally {
			r.mayStep[inst] += delta
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
func (r *runner) wakeSlots(inst string) {
	for key, w := range r.slotWait {
		if inst != "" && !slices.Contains(w.pool, inst) {
			continue
		}
		n := len(w.nodes)
		if in := r.insts[inst]; in != nil {
			n = min(n, in.slots-in.used)
		}
		r.ready = append(r.ready, w.nodes[:n]...)
		w.nodes = w.nodes[n:]
		if len(w.nodes) == 0 {
			delete(r.slotWait, key)
		}
	}
}

func (r *runner) succeeded(nr *nodeRun) bool {
	return nr.state == Succeeded || (nr.n.Step.ContinueOnError && (nr.state == Failed || nr.state == TimedOut))
}

// depsOf checks a node's dependencies on instance inst ("" for a cell not
// yet placed: instance-dependent deps are then checked at placement).
// It returns ok, or the reason the node can never run.
func (r *runner) depsOf(nr *nodeRun, inst string) (ok bool, blocked string, on *nodeRun) {
	for _, d := range nr.n.Needs {
		switch d.Kind {
		case DepNode:
			t := r.byID[d.Node]
			if !t.state.Terminal() {
				return false, "", t
			}
			if !r.succeeded(t) {
				return false, fmt.Sprintf("upstream %s %s", t.n.ID, t.state), nil
			}
		case DepPlaced:
			for _, t := range r.g.StepNodes(d.Step) {
				tr := r.byID[t.ID]
				if tr.group != nil && !tr.group.placed && !tr.state.Terminal() {
					return false, "", nil // cells still to be placed
				}
				if tr.instance != inst {
					continue
				}
				if !tr.state.Terminal() {
					return false, "", nil
				}
				if !r.succeeded(tr) {
					return false, fmt.Sprintf("upstream %s %s", tr.n.ID, tr.state), nil
				}
			}
		case DepInstance:
			if inst == "" {
				continue
			}
			if ok, blocked := r.instanceDep(d.Step, inst); !ok {
				return false, blocked, nil
			}
		}
	}
	return true, "", nil
}

// instanceDep checks a cell's need of per-instance step on inst.
func (r *runner) instanceDep(step, inst string) (bool, string) {
	if t := r.stepInst[step][inst]; t != nil {
		if !t.state.Terminal() {
			return false, ""
		}
		if !r.succeeded(t) {
			return false, fmt.Sprintf("upstream %s %s", t.n.ID, t.state)
		}
		return true, ""
	}
	for _, t := range r.g.StepNodes(step) {
		tr := r.byID[t.ID]
		if !tr.state.Terminal() {
			return false, ""
		}
		if !r.succeeded(tr) {
			return false, fmt.Sprintf("upstream %s %s", tr.n.ID, tr.state)
		}
	}
	return true, ""
}

// tryStart starts nr if it can. A node that waits for one node to end
// comes back with that node, so it can be parked until then.
func (r *runner) tryStart(nr *nodeRun) (startResult, *nodeRun) {
	n := nr.n
	if r.cfg.Parallel > 0 && r.running >= r.cfg.Parallel {
		return waiting, nil
	}
	switch {
	case n.Cell != nil && n.Root == "":
		return r.tryPlace(nr)
	case n.Cell != nil:
		if !nr.group.placed {
			ok, blocked, on := r.depsOf(nr, "")
			if !ok && blocked != "" {
				r.finish(nr, Skipped, blocked, nil)
				return settled, nil
			}
			if on == nil {
				on = r.byID[n.Root]
			}
			return waiting, on
		}
		nr.instance = nr.group.instance
	}
	inst := r.insts[nr.instance]
	ok, blocked, on := r.depsOf(nr, nr.instance)
	if blocked != "" {
		r.finish(nr, Skipped, blocked, nil)
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
		r.finish(nr, st, fmt.Sprintf("instance %s is not available: %v", inst.name, inst.acquireErr), nil)
		return settled, nil
	}
	if !inst.acquired {
		return waiting, nil
	}
	if inst.released {
		r.finish(nr, Skipped, fmt.Sprintf("instance %s was already released", inst.name), nil)
		return settled, nil
	}
	if nr.finally && r.mayStep[nr.instance] > 0 {
		return waiting, nil // finalizers wait for every step node that is or may be on the instance
	}
	r.start(nr)
	return started, nil
}

// tryPlace places a cell's first node on the instance of its pool with the
// most free slots whose per-instance upstream nodes succeeded.
func (r *runner) tryPlace(nr *nodeRun) (startResult, *nodeRun) {
	ok, blocked, on := r.depsOf(nr, "")
	if blocked != "" {
		r.finish(nr, Skipped, blocked, nil)
		return settled, nil
	}
	if !ok {
		return waiting, on
	}
	if mp := nr.n.Step.MaxParallel; mp > 0 && r.perStep[nr.n.Step.ID] >= mp {
		return waiting, nil
	}
	var best *instRun
	var reasons []string
	possible, onlyFull := false, true
	for _, name := range nr.n.Pool {
		in := r.insts[name]
		switch {
		case in.acquireErr != nil:
			reasons = append(reasons, fmt.Sprintf("%s is not available", name))
			continue
		case in.released || in.releasing:
			reasons = append(reasons, fmt.Sprintf("%s was released", name))
			continue
		}
		if in.acquired && in.used >= in.slots {
			possible = true
			continue
		}
		ok, blocked, _ := r.depsOf(nr, name)
		if blocked != "" {
			reasons = append(reasons, blocked)
			continue
		}
		possible = true
		if !ok || !in.acquired {
			onlyFull = false
			continue
		}
		if best == nil || in.slots-in.used > best.slots-best.used {
			best = in
		}
	}
	if best == nil {
		if !possible {
			r.finish(nr, Skipped, "no instance of its pool can run it: "+strings.Join(reasons, "; "), nil)
			return settled, nil
		}
		if onlyFull && len(reasons) == 0 {
			w := r.slotWait[nr.group.poolKey]
			if w == nil {
				w = &poolWait{pool: nr.group.pool}
				r.slotWait[nr.group.poolKey] = w
			}
			w.nodes = append(w.nodes, nr)
			return parkedOnSlot, nil
		}
		return waiting, nil
	}
	r.place(nr.group, best)
	r.emit(Event{Type: NodePlaced, Node: nr.n.ID, Step: nr.n.Step.ID, Instance: best.name})
	r.start(nr)
	return started, nil
}

// place puts a cell on an instance: it takes a slot there until its last
// node ends, and its nodes no longer count on the rest of the pool.
func (r *runner) place(g *groupRun, in *instRun) {
	in.used++
	for _, m := range g.members {
		if !m.state.Terminal() {
			r.addMay(m, -1)
		}
	}
	g.placed, g.instance = true, in.name
	for _, m := range g.members {
		if !m.state.Terminal() {
			if m.n.Root == "" {
				m.instance = in.name
			}
			r.addMay(m, 1)
		}
	}
}

func (r *runner) start(nr *nodeRun) {
	nr.state, nr.started = Running, true
	r.running++
	r.inflight++
	r.perStep[nr.n.Step.ID]++
	ctx := r.stepsCtx
	if nr.finally {
		ctx = r.finalContext()
	}
	go r.work(ctx, nr, nr.instance, r.upstream(nr))
}

// upstream resolves a node's dependencies for the instance it runs on.
func (r *runner) upstream(nr *nodeRun) []Upstream {
	var out []Upstream
	add := func(t *nodeRun) { out = append(out, Upstream{Node: t.n, Instance: t.instance}) }
	for _, d := range nr.n.Needs {
		switch d.Kind {
		case DepNode:
			add(r.byID[d.Node])
		case DepPlaced:
			for _, t := range r.g.StepNodes(d.Step) {
				if tr := r.byID[t.ID]; tr.instance == nr.instance {
					add(tr)
				}
			}
		case DepInstance:
			if t := r.byID[d.Step+"@"+nr.instance]; t != nil {
				add(t)
				continue
			}
			for _, t := range r.g.StepNodes(d.Step) {
				add(r.byID[t.ID])
			}
		}
	}
	return out
}

func (r *runner) finalContext() context.Context {
	if r.finalCtx == nil {
		r.emit(Event{Type: FinallyStarted})
		r.finalCtx, r.finalCancel = context.WithTimeoutCause(context.WithoutCancel(r.stepsCtx), r.cfg.FinallyTimeout,
			fmt.Errorf("finalizers and teardown ran past their deadline of %s", r.cfg.FinallyTimeout))
	}
	return r.finalCtx
}

// maybeRelease is called as nodes end: an instance nothing can need any
// more is released right away (early teardown).
func (r *runner) maybeRelease() {
	for _, name := range r.g.Plan.InstanceNames() {
		in := r.insts[name]
		if in.released || in.releasing || in.acquiring || (!in.acquired && in.acquireErr == nil) {
			continue
		}
		if r.may[name] > 0 {
			continue
		}
		r.startRelease(in)
	}
}

func (r *runner) startRelease(in *instRun) {
	mode := ReleaseDelete
	if in.uploadFailed && !in.forceDelete {
		mode = ReleaseStop
	}
	in.releasing = true
	r.inflight++
	r.emit(Event{Type: InstanceRelease, Instance: in.name, Message: mode.String()})
	go func() {
		ctx, cancel := context.WithTimeoutCause(context.WithoutCancel(r.stepsCtx), r.cfg.FinallyTimeout,
			fmt.Errorf("releasing %s took longer than %s", in.name, r.cfg.FinallyTimeout))
		defer cancel()
		outcome, err := r.safeRelease(ctx, in.name, mode)
		r.results <- releaseResult{inst: in.name, outcome: outcome, err: err}
	}()
}

func (r *runner) safeRelease(ctx context.Context, name string, mode ReleaseMode) (outcome ReleaseOutcome, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic while releasing %s: %v", name, p)
		}
	}()
	if r.cfg.Instances == nil {
		return ReleaseDeleted, nil
	}
	return r.cfg.Instances.Release(ctx, name, mode)
}

// work runs a node's attempts in its own goroutine.
func (r *runner) work(ctx context.Context, nr *nodeRun, inst string, upstream []Upstream) {
	n := nr.n
	res := nodeResult{nr: nr}
	defer func() {
		if p := recover(); p != nil {
			res.st, res.msg = Failed, fmt.Sprintf("panic: %v\n%s", p, debug.Stack())
		}
		r.results <- res
	}()
	with := r.g.With(n, Scope{RunID: r.cfg.RunID, Instance: inst})
	retries := n.Step.Retries
	for attempt := 1; ; attempt++ {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if n.Step.Timeout > 0 {
			actx, cancel = context.WithTimeoutCause(ctx, n.Step.Timeout, fmt.Errorf("step %s timed out after %s", n.Step.ID, n.Step.Timeout))
		}
		log := &lineWriter{emit: func(line string) {
			r.emit(Event{Type: NodeLog, Node: n.ID, Step: n.Step.ID, Instance: inst, Message: line})
		}}
		task := &Task{
			RunID: r.cfg.RunID, Node: n, Instance: inst, With: with, Attempt: attempt, Log: log, Upstream: upstream,
			Progress: func(p string) {
				r.emit(Event{Type: NodeProgress, Node: n.ID, Step: n.Step.ID, Instance: inst, Message: p})
			},
			Release: func(ctx context.Context, force bool) error {
				reply := make(chan error, 1)
				r.results <- releaseRequest{inst: inst, force: force, reply: reply}
				select {
				case err := <-reply:
					return err
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			},
		}
		r.emit(Event{Type: NodeStarted, Node: n.ID, Step: n.Step.ID, Instance: inst, Attempt: attempt})
		err := r.cfg.Executor.Execute(actx, task)
		log.Close()
		st, msg := classify(ctx, actx, err)
		cancel()
		res.st, res.msg, res.code = st, msg, exitCode(err)
		if (st == Failed || st == TimedOut) && attempt <= retries && ctx.Err() == nil {
			wait := backoff(n.Step.Backoff, attempt)
			r.emit(Event{Type: NodeRetrying, Node: n.ID, Step: n.Step.ID, Instance: inst, Attempt: attempt,
				Message: fmt.Sprintf("%s; retry %d of %d in %s", msg, attempt, retries, wait)})
			t := time.NewTimer(wait)
			select {
			case <-t.C:
				continue
			case <-ctx.Done():
				t.Stop()
				res.st, res.msg = Canceled, "canceled while waiting to retry: "+causeText(context.Cause(ctx))
				return
			}
		}
		return
	}
}

// classify names how an attempt ended.
func classify(runCtx, attemptCtx context.Context, err error) (NodeState, string) {
	switch {
	case err == nil:
		return Succeeded, ""
	case runCtx.Err() != nil:
		return Canceled, causeText(context.Cause(runCtx))
	case attemptCtx.Err() != nil:
		return TimedOut, causeText(context.Cause(attemptCtx))
	}
	return Failed, err.Error()
}

// exitCode is the process exit code an error carries; failures that are
// not a process exiting (0) have none.
func exitCode(err error) *int {
	var ec ExitCoder
	if errors.As(err, &ec) && ec.ExitCode() != 0 {
		c := ec.ExitCode()
		return &c
	}
	return nil
}

func causeText(err error) string {
	if err == nil {
		return "canceled"
	}
	return err.Error()
}

// backoff is the wait before retry number attempt: base doubling each time,
// at most 32 times base.
func backoff(base time.Duration, attempt int) time.Duration {
	if base <= 0 {
		base = 10 * time.Second
	}
	return base << min(attempt-1, 5)
}

func (r *runner) summary() Summary {
	s := Summary{States: map[string]NodeState{}, Messages: map[string]string{}, Placement: map[string]string{}, Interrupted: r.interrupted}
	for _, nr := range r.nodes {
		s.States[nr.n.ID] = nr.state
		if nr.msg != "" {
			s.Messages[nr.n.ID] = nr.msg
		}
		if nr.instance != "" {
			s.Placement[nr.n.ID] = nr.instance
		}
	}
	for _, name := range r.g.Plan.InstanceNames() {
		in := r.insts[name]
		switch {
		case in.releaseErrMsg != "":
			s.Left = append(s.Left, name)
		case !in.released:
		case in.outcome == ReleaseStopped:
			s.Stopped = append(s.Stopped, name)
		case in.outcome == ReleaseKept:
			s.Kept = append(s.Kept, name)
		}
	}
	return s
}

// lineWriter turns written bytes into one event per line.
type lineWriter struct {
	mu   sync.Mutex
	buf  []byte
	emit func(string)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexAny(w.buf, "\n\r")
		if i < 0 {
			break
		}
		if line := string(w.buf[:i]); line != "" {
			w.emit(line)
		}
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > 64<<10 {
		w.emit(string(w.buf))
		w.buf = nil
	}
	return len(p), nil
}

// Close emits a last unterminated line.
func (w *lineWriter) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.emit(string(w.buf))
		w.buf = nil
	}
}

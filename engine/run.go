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

// Instances provides and releases the run's instances. Release must be
// idempotent; an error means the instance may still exist.
type Instances interface {
	Acquire(ctx context.Context, name string) error
	Release(ctx context.Context, name string, mode ReleaseMode) error
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
	// Stopped lists instances stopped instead of deleted (failed upload).
	Stopped []string
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
}

// groupRun is one matrix cell across the steps that share it: it holds one
// slot of its instance from the placement of its root node until its last
// node ends.
type groupRun struct {
	instance string
	open     int
	placed   bool
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
	inst string
	mode ReleaseMode
	err  error
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
		results: make(chan any, 64), perStep: map[string]int{}}
	r.stepsCtx, r.cancelSteps = context.WithCancelCause(ctx)
	defer r.cancelSteps(nil)
	groups := map[*Cell]*groupRun{}
	for _, n := range g.Nodes {
		nr := &nodeRun{n: n, state: Pending, instance: n.Instance, finally: n.Finally}
		if n.Cell != nil {
			gr := groups[n.Cell]
			if gr == nil {
				gr = &groupRun{}
				groups[n.Cell] = gr
			}
			gr.open++
			nr.group = gr
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
	for _, nr := range r.nodes {
		if !nr.state.Terminal() {
			r.pending = append(r.pending, nr)
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
		if r.inflight == 0 && len(r.pending) == 0 {
			return
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
		in := r.insts[m.inst]
		in.releasing, in.released = false, true
		if m.err != nil {
			in.releaseErrMsg = m.err.Error()
			r.emit(Event{Type: InstanceLeft, Instance: m.inst, Message: m.err.Error()})
		} else {
			msg := "deleted"
			if m.mode == ReleaseStop {
				msg = "stopped instead of deleted: a results upload on it failed (its disk is kept)"
				in.releaseErrMsg = "stopped"
			}
			r.emit(Event{Type: InstanceReleased, Instance: m.inst, Message: msg})
		}
		for _, w := range in.waiters {
			w <- r.releaseError(in)
		}
		in.waiters = nil
	}
}

func (r *runner) releaseError(in *instRun) error {
	if in.releaseErrMsg == "" || in.releaseErrMsg == "stopped" {
		return nil
	}
	return errors.New(in.releaseErrMsg)
}

// finish records a node's end and what it means for others.
func (r *runner) finish(nr *nodeRun, st NodeState, msg string, code *int) {
	nr.state, nr.msg = st, msg
	if g := nr.group; g != nil {
		g.open--
		if g.open == 0 && g.placed {
			r.insts[g.instance].used--
		}
	}
	if nr.n.Step.Uses == plan.KindUploadS3 && st != Succeeded && nr.instance != "" {
		r.insts[nr.instance].uploadFailed = true
	}
	r.emit(Event{Type: NodeEnded, Node: nr.n.ID, Step: nr.n.Step.ID, Instance: nr.instance, State: st, Message: msg, ExitCode: code})
	if st != Succeeded && !nr.finally && !nr.n.Step.ContinueOnError && r.g.Plan.FailFast && st != Skipped && st != Canceled {
		r.cancel(fmt.Errorf("fail_fast: %s %s", nr.n.ID, st))
	}
}

// schedule starts every node that can start now, and settles nodes that
// never will.
func (r *runner) schedule() {
	progress := true
	for progress {
		progress = false
		kept := r.pending[:0]
		for _, nr := range r.pending {
			if r.canceled && !nr.finally {
				r.finish(nr, Canceled, "not started: "+causeText(context.Cause(r.stepsCtx)), nil)
				progress = true
				continue
			}
			if r.tryStart(nr) != waiting {
				progress = true
				continue
			}
			kept = append(kept, nr)
		}
		clear(r.pending[len(kept):])
		r.pending = kept
	}
}

type startResult int

const (
	waiting startResult = iota
	started
	settled
)

func (r *runner) succeeded(nr *nodeRun) bool {
	return nr.state == Succeeded || (nr.n.Step.ContinueOnError && (nr.state == Failed || nr.state == TimedOut))
}

// depsOf checks a node's dependencies on instance inst ("" for a cell not
// yet placed: instance-dependent deps are then checked at placement).
// It returns ok, or the reason the node can never run.
func (r *runner) depsOf(nr *nodeRun, inst string) (ok bool, blocked string) {
	for _, d := range nr.n.Needs {
		switch d.Kind {
		case DepNode:
			t := r.byID[d.Node]
			if !t.state.Terminal() {
				return false, ""
			}
			if !r.succeeded(t) {
				return false, fmt.Sprintf("upstream %s %s", t.n.ID, t.state)
			}
		case DepPlaced:
			for _, t := range r.g.StepNodes(d.Step) {
				tr := r.byID[t.ID]
				if tr.group != nil && !tr.group.placed && !tr.state.Terminal() {
					return false, "" // cells still to be placed
				}
				if tr.instance != inst {
					continue
				}
				if !tr.state.Terminal() {
					return false, ""
				}
				if !r.succeeded(tr) {
					return false, fmt.Sprintf("upstream %s %s", tr.n.ID, tr.state)
				}
			}
		case DepInstance:
			if inst == "" {
				continue
			}
			if ok, blocked := r.instanceDep(d.Step, inst); !ok {
				return false, blocked
			}
		}
	}
	return true, ""
}

// instanceDep checks a cell's need of per-instance step on inst.
func (r *runner) instanceDep(step, inst string) (bool, string) {
	if t := r.byID[step+"@"+inst]; t != nil {
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

func (r *runner) tryStart(nr *nodeRun) startResult {
	n := nr.n
	if r.cfg.Parallel > 0 && r.running >= r.cfg.Parallel {
		return waiting
	}
	switch {
	case n.Cell != nil && n.Root == "":
		return r.tryPlace(nr)
	case n.Cell != nil:
		if !nr.group.placed {
			if ok, blocked := r.depsOf(nr, ""); !ok && blocked != "" {
				r.finish(nr, Skipped, blocked, nil)
				return settled
			}
			return waiting
		}
		nr.instance = nr.group.instance
	}
	inst := r.insts[nr.instance]
	ok, blocked := r.depsOf(nr, nr.instance)
	if blocked != "" {
		r.finish(nr, Skipped, blocked, nil)
		return settled
	}
	if !ok {
		return waiting
	}
	if inst.acquireErr != nil {
		st := Failed
		if nr.finally {
			st = Skipped
		}
		r.finish(nr, st, fmt.Sprintf("instance %s is not available: %v", inst.name, inst.acquireErr), nil)
		return settled
	}
	if !inst.acquired {
		return waiting
	}
	if inst.released {
		r.finish(nr, Skipped, fmt.Sprintf("instance %s was already released", inst.name), nil)
		return settled
	}
	if nr.finally && r.instanceBusy(nr.instance) {
		return waiting
	}
	r.start(nr)
	return started
}

// instanceBusy reports whether a step node (not a finalizer) is or may be
// on inst and hasn't ended.
func (r *runner) instanceBusy(inst string) bool {
	for _, o := range r.pending {
		if o.finally || o.state.Terminal() {
			continue
		}
		if o.instance == inst || (o.instance == "" && slices.Contains(o.n.Pool, inst)) {
			return true
		}
	}
	for _, o := range r.nodes {
		if o.state == Running && !o.finally && o.instance == inst {
			return true
		}
	}
	return false
}

// tryPlace places a cell's first node on the instance of its pool with the
// most free slots whose per-instance upstream nodes succeeded.
func (r *runner) tryPlace(nr *nodeRun) startResult {
	ok, blocked := r.depsOf(nr, "")
	if blocked != "" {
		r.finish(nr, Skipped, blocked, nil)
		return settled
	}
	if !ok {
		return waiting
	}
	if mp := nr.n.Step.MaxParallel; mp > 0 && r.perStep[nr.n.Step.ID] >= mp {
		return waiting
	}
	var best *instRun
	var reasons []string
	possible := false
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
		ok, blocked := r.depsOf(nr, name)
		if blocked != "" {
			reasons = append(reasons, blocked)
			continue
		}
		possible = true
		if !ok || !in.acquired || in.used >= in.slots {
			continue
		}
		if best == nil || in.slots-in.used > best.slots-best.used {
			best = in
		}
	}
	if best == nil {
		if !possible {
			r.finish(nr, Skipped, "no instance of its pool can run it: "+strings.Join(reasons, "; "), nil)
			return settled
		}
		return waiting
	}
	best.used++
	nr.group.placed, nr.group.instance = true, best.name
	nr.instance = best.name
	r.emit(Event{Type: NodePlaced, Node: nr.n.ID, Step: nr.n.Step.ID, Instance: best.name})
	r.start(nr)
	return started
}

func (r *runner) start(nr *nodeRun) {
	nr.state = Running
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
		if r.instanceNeeded(name) {
			continue
		}
		r.startRelease(in)
	}
}

func (r *runner) instanceNeeded(inst string) bool {
	for _, o := range r.pending {
		if o.instance == inst || (o.instance == "" && slices.Contains(o.n.Pool, inst)) {
			return true
		}
	}
	for _, o := range r.nodes {
		if o.state == Running && o.instance == inst {
			return true
		}
	}
	return false
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
		err := r.safeRelease(ctx, in.name, mode)
		r.results <- releaseResult{inst: in.name, mode: mode, err: err}
	}()
}

func (r *runner) safeRelease(ctx context.Context, name string, mode ReleaseMode) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic while releasing %s: %v", name, p)
		}
	}()
	if r.cfg.Instances == nil {
		return nil
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
		return Canceled, "canceled: " + causeText(context.Cause(runCtx))
	case attemptCtx.Err() != nil:
		return TimedOut, causeText(context.Cause(attemptCtx))
	}
	return Failed, err.Error()
}

func exitCode(err error) *int {
	var ec ExitCoder
	if errors.As(err, &ec) {
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
		case in.releaseErrMsg == "stopped":
			s.Stopped = append(s.Stopped, name)
		case in.releaseErrMsg != "":
			s.Left = append(s.Left, name)
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

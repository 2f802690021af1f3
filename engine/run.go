package engine

import (
	"context"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sourcegraph/conc/panics"
	"github.com/taoflow/taoflow/internal/progress"
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
	// Progress reports the node's progress: a short line (epoch 3/10 loss
	// 0.2 eta 4m) and its figures; it becomes a NodeProgress event.
	Progress func(progress.Report)
	// Release releases the task's instance now (what a delete step ends
	// with). force deletes even if a results upload or fetch on it failed.
	Release func(ctx context.Context, force bool) error
	// Slot is the slot of its instance that the node's cell holds; nil
	// for a node of no cell.
	Slot *Slot
	// Salvage is set on a node that copies results and runs only to
	// salvage them (salvage.go): the executor checks first that there is
	// something to copy, and returns ErrNothingToSalvage when not.
	Salvage bool
	// Partial says why what a salvage node copies may be partial (a node
	// before it did not succeed); "" when it is whole.
	Partial string
}

// Slot is one of an instance's slots, held by one cell at a time from its
// placement until its last node ends.
type Slot struct {
	Index int // 0 … slots-1
	// GPUs are the slot's share of the instance's GPUs
	// (plan.SlotGPUs); nil when the instance's GPU count is not known or
	// is less than its slots.
	GPUs []int
}

// Upstream is a node a task needed, and where it ran.
type Upstream struct {
	Node     *Node
	Instance string
}

// SettingsFailure is implemented by an Executor's error that says the
// step failed on its own settings before it touched its instance (a
// with.to that is no URL, a secret without a value): an upload or fetch
// that failed so copied nothing and lost nothing, so its instance is not
// kept for it (steps.Error: ClassInvalidConfig, ClassUnsupported).
type SettingsFailure interface{ SettingsError() bool }

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
	// ReleaseUnknown, the zero value: the release failed or panicked
	// before it could say what became of the instance, which may still
	// exist; the release's error says why.
	ReleaseUnknown ReleaseOutcome = iota
	// ReleaseDeleted: the run created it, and it is deleted (or was found
	// gone).
	ReleaseDeleted
	// ReleaseStopped: the run created it and stopped it instead of
	// deleting it (its disk holds results whose upload failed). It still
	// exists, and bills for its disk.
	ReleaseStopped
	// ReleaseKept: the run created it and the plan says keep: true.
	ReleaseKept
	// ReleaseLeftAlone: the run did not create it (an ssh host, an
	// existing instance); only the run's jobs on it were stopped.
	ReleaseLeftAlone
	// ReleaseHeld: the run created it on a platform that neither stops
	// nor bills (a local sandbox) and left it as it is, because it holds
	// results whose upload failed. It still exists, costs nothing, and is
	// removed by taoflow destroy.
	ReleaseHeld
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
	case ReleaseHeld:
		return "held"
	default: // ReleaseUnknown
		return "unknown"
	}
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
	// FinallyTimeout bounds the finalizers and the release of instances
	// (default 30m): each instance's finalizers from the first of them,
	// its release from its start, and the finalizers that start after the
	// run was cancelled all together, from the first of them.
	FinallyTimeout time.Duration
	// Done lists nodes that already succeeded (resume), with the instance
	// each ran on.
	Done map[string]string
	// Slots gives, for a resumed run, the slot index that nodes of a cell
	// held before: a cell resumed part way keeps its slot (and so its
	// GPUs) when that slot is free.
	Slots map[string]int
	// GPUs returns the GPU count of an instance (declared in the plan, or
	// counted by its preflight), 0 when not known; nil is never known.
	// The GPUs of a slot are read when each node of its cell starts.
	GPUs func(instance string) int
	// SkipSalvage, once closed (a second Ctrl-C), cancels the salvage
	// nodes running and starts no more (salvage.go); nil never skips.
	SkipSalvage <-chan struct{}
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
	// Held lists instances left as they are to keep results whose upload
	// failed, on a platform where they cost nothing (ReleaseHeld).
	Held []string
	// Left lists instances whose release failed or was refused: they may
	// still exist (and bill). LeftWhy says why, by instance.
	Left    []string
	LeftWhy map[string]string
	// Salvaged lists the nodes that salvaged results during teardown
	// (salvage.go); they count as succeeded in States.
	Salvaged []string
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

// message is what the workers (node attempts, acquires, releases) send to
// the run loop, the only goroutine that reads or writes the run's state.
// The set is closed: the four types below.
type message interface{ message() }

// nodeResult: a node's attempts ended (its worker is done).
type nodeResult struct {
	nr   *nodeRun
	st   NodeState
	msg  string
	code *int
	// nothing: a salvage node found nothing to copy (ErrNothingToSalvage).
	nothing bool
	// settings: its last attempt failed on the step's own settings,
	// before it touched the instance (SettingsFailure).
	settings bool
}

// acquireResult: an instance's Acquire returned (its worker is done).
type acquireResult struct {
	inst string
	err  error
}

// releaseResult: an instance's Release returned (its worker is done).
type releaseResult struct {
	inst    string
	outcome ReleaseOutcome
	err     error
}

// releaseRequest: a running node (a delete step) asks for its instance to
// be released now; reply gets the outcome. Its worker goes on.
type releaseRequest struct {
	inst  string
	force bool
	reply chan error
}

func (nodeResult) message()     {}
func (acquireResult) message()  {}
func (releaseResult) message()  {}
func (releaseRequest) message() {}

// execution is one run of a graph. Its fields belong to the loop
// goroutine; workers only send messages.
type execution struct {
	g   *Graph
	cfg Config
	// starts counts the nodes started so far (nodeRun.startSeq).
	starts int

	mu    sync.Mutex // serialises observer calls
	nodes []*nodeRun
	byID  map[string]*nodeRun
	insts map[string]*instRun

	results chan message
	// inflight counts workers that have not yet sent their result (node
	// attempts, acquires, releases). The run ends when it is 0 and no node
	// waits (pending, parked, slotWait empty); when it is 0 but nodes still
	// wait, nothing can ever wake them: unstick fails them instead of
	// hanging.
	inflight int
	// running counts nodes whose attempts are under way (bounded by
	// Config.Parallel); perStep the same per step (bounded by max_parallel).
	running int
	perStep map[string]int

	// pending holds nodes to try on the next scheduling pass. parked holds
	// nodes waiting for one specific node to end; ready holds nodes to
	// look at again on the next pass.
	pending []*nodeRun
	parked  map[*nodeRun][]*nodeRun
	ready   []*nodeRun
	// may counts, per instance, the nodes not yet ended that run or may
	// run there (mayStep: the same without finalizers): an instance nothing
	// may need is released at once, and its finalizers start once mayStep
	// is 0.
	may, mayStep map[string]int
	// slotWait holds cells waiting for a free slot in their pool.
	slotWait map[string]*poolWait
	// stepInst finds the per-instance node of a step on an instance.
	stepInst map[string]map[string]*nodeRun

	stepsCtx    context.Context
	cancelSteps context.CancelCauseFunc
	// finalCtx bounds the finalizers that start once the run was
	// cancelled; each instance bounds its own before (instRun.finalCtx).
	finalCtx       context.Context
	finalCancel    context.CancelFunc
	finallyStarted bool
	canceled       bool
	interrupted    bool

	// salvageCtx is what salvage nodes run under (salvageContext);
	// salvageSkipped is set by SkipSalvage, from startSalvage's watcher.
	salvageCtx     context.Context
	salvageCancel  context.CancelCauseFunc
	salvageDone    chan struct{}
	salvageSkipped atomic.Bool
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
	x := &execution{g: g, cfg: cfg, byID: map[string]*nodeRun{}, insts: map[string]*instRun{},
		results: make(chan message, 64), perStep: map[string]int{}, parked: map[*nodeRun][]*nodeRun{},
		may: map[string]int{}, mayStep: map[string]int{}, stepInst: map[string]map[string]*nodeRun{},
		slotWait: map[string]*poolWait{}}
	x.stepsCtx, x.cancelSteps = context.WithCancelCause(ctx)
	defer x.cancelSteps(nil)
	x.startSalvage(ctx)
	groups := map[*Cell]*groupRun{}
	for _, n := range g.Nodes {
		nr := &nodeRun{n: n, state: Pending, instance: n.Instance, finally: n.Finally}
		if n.Cell != nil {
			gr := groups[n.Cell]
			if gr == nil {
				gr = &groupRun{pool: n.Pool, poolKey: strings.Join(n.Pool, "\x00"), slot: -1}
				groups[n.Cell] = gr
			}
			gr.open++
			gr.members = append(gr.members, nr)
			nr.group = gr
		} else {
			if x.stepInst[n.Step.ID] == nil {
				x.stepInst[n.Step.ID] = map[string]*nodeRun{}
			}
			x.stepInst[n.Step.ID][n.Instance] = nr
		}
		if inst, ok := cfg.Done[n.ID]; ok {
			nr.state, nr.msg, nr.instance = Succeeded, "succeeded in an earlier attempt of this run", inst
			if nr.group != nil {
				nr.group.instance, nr.group.placed = inst, true
				nr.group.open--
			}
		}
		x.nodes = append(x.nodes, nr)
		x.byID[n.ID] = nr
	}
	for _, in := range g.Plan.Instances {
		x.insts[in.Name] = &instRun{name: in.Name, slots: in.Slots, busy: make([]bool, in.Slots)}
	}
	// A cell resumed part way holds its slot until its last node ends, as
	// it did before: the same slot where it is known and free, in node
	// order so that the choice is the same on every resume.
	var resumed []*groupRun
	seen := map[*groupRun]bool{}
	for _, n := range g.Nodes {
		gr := groups[n.Cell]
		if gr == nil || !gr.placed || gr.open == 0 {
			continue
		}
		if !seen[gr] {
			seen[gr] = true
			resumed = append(resumed, gr)
		}
		if i, ok := cfg.Slots[n.ID]; ok && gr.slot < 0 {
			gr.slot = i
		}
	}
	for _, gr := range resumed {
		if in := x.insts[gr.instance]; in != nil {
			want := gr.slot
			gr.slot = -1
			in.take(gr, want)
		}
	}
	for _, nr := range x.nodes {
		if !nr.state.Terminal() {
			x.pending = append(x.pending, nr)
			x.addMay(nr, 1)
		}
	}
	x.emit(Event{Type: RunStarted, Message: g.Plan.Name})
	x.acquireAll()
	x.loop(ctx)
	x.endSalvage()
	if x.finalCancel != nil {
		x.finalCancel()
	}
	for _, in := range x.insts {
		if in.finalCancel != nil {
			in.finalCancel()
		}
	}
	return x.summary()
}

func (x *execution) emit(e Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.cfg.Observer.Event(e)
}

func (x *execution) loop(ctx context.Context) {
	done := ctx.Done()
	for {
		x.schedule()
		x.maybeRelease()
		if x.inflight == 0 && len(x.pending) == 0 && len(x.parked) == 0 && len(x.slotWait) == 0 {
			return
		}
		if x.inflight == 0 {
			// Nothing is running and nothing can change: whatever still
			// waits would wait forever. Fail it rather than hang.
			x.unstick()
			continue
		}
		select {
		case <-done:
			done = nil
			x.interrupted = true
			x.cancel(context.Cause(ctx))
		case msg := <-x.results:
			x.handle(msg)
		}
	}
}

// cancel stops starting step nodes and cancels running ones.
func (x *execution) cancel(cause error) {
	if x.canceled {
		return
	}
	x.canceled = true
	x.cancelSteps(cause)
	for on, nodes := range x.parked {
		x.ready = append(x.ready, nodes...)
		delete(x.parked, on)
	}
	x.wakeSlots("")
}

func (x *execution) handle(msg message) {
	switch m := msg.(type) {
	case nodeResult:
		x.inflight--
		x.running--
		x.perStep[m.nr.n.Step.ID]--
		if m.nr.salvage {
			x.salvageEnded(&m)
		}
		m.nr.settings = m.settings
		x.finish(m.nr, m.st, m.msg, m.code)
	case acquireResult:
		x.inflight--
		x.acquireEnded(m)
	case releaseResult:
		x.inflight--
		x.releaseEnded(m)
	case releaseRequest:
		x.releaseAsked(m)
	}
}

// spawn runs f on a worker goroutine of its own and sends what it returns
// to the loop. A panic in f does not take the process (and the teardown
// with it) down: it is caught, with the worker's stack, and failed turns
// it into the message the loop waits for.
func (x *execution) spawn(f func() message, failed func(*panics.Recovered) message) {
	x.inflight++
	go func() {
		var msg message
		if p := panics.Try(func() { msg = f() }); p != nil {
			msg = failed(p)
		}
		x.results <- msg
	}()
}

func (x *execution) summary() Summary {
	s := Summary{States: map[string]NodeState{}, Messages: map[string]string{}, Placement: map[string]string{}, Interrupted: x.interrupted}
	for _, nr := range x.nodes {
		s.States[nr.n.ID] = nr.state
		if nr.msg != "" {
			s.Messages[nr.n.ID] = nr.msg
		}
		if nr.instance != "" {
			s.Placement[nr.n.ID] = nr.instance
		}
		if nr.salvage && nr.state == Succeeded {
			s.Salvaged = append(s.Salvaged, nr.n.ID)
		}
	}
	for _, name := range x.g.Plan.InstanceNames() {
		in := x.insts[name]
		switch {
		case in.releaseErrMsg != "":
			s.Left = append(s.Left, name)
			if s.LeftWhy == nil {
				s.LeftWhy = map[string]string{}
			}
			s.LeftWhy[name] = in.releaseErrMsg
		case in.phase != instReleased:
		case in.outcome == ReleaseStopped:
			s.Stopped = append(s.Stopped, name)
		case in.outcome == ReleaseKept:
			s.Kept = append(s.Kept, name)
		case in.outcome == ReleaseHeld:
			s.Held = append(s.Held, name)
		}
	}
	return s
}

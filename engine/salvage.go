package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/taoflow/taoflow/plan"
)

// Salvage (docs/design.md §8.6): on a budget stop, Ctrl-C or a failure, a
// node that copies results off an instance (plan.SavesResults) and would
// otherwise never run — cancelled before it started, or skipped because a
// node before it did not succeed — runs all the same, before its instance
// is released, when a run node before it started on that instance: what
// the job wrote (checkpoints, logs) leaves the instance before it is
// deleted. The executor first checks that there is something to copy
// (ErrNothingToSalvage when not). Salvage runs on a context that the run's
// cancellation does not end, bounded by FinallyTimeout (the run-wide
// teardown deadline once the run was cancelled), and Config.SkipSalvage
// (a second Ctrl-C) cancels it and starts no more. A salvaged node counts
// as succeeded for the summary but not for its dependents: what it copied
// may be partial. plan salvage: false turns it off.

// ErrNothingToSalvage is what an Executor returns (wrapped, with the
// reason) for a salvage task that found nothing to copy: the node then
// ends as it would have without salvage, and no failed upload is counted
// against its instance.
var ErrNothingToSalvage = errors.New("nothing to salvage")

// salvageOn reports whether salvage may start nodes now.
func (x *execution) salvageOn() bool {
	return !x.g.Plan.NoSalvage && !x.salvageSkipped.Load()
}

// trySalvage starts nr as a salvage node when it qualifies; ok is false
// when it does not, and the caller ends it as it would have (cancelled or
// skipped with why). A node that qualifies but whose upstream nodes have
// not all ended yet waits for them (res waiting, parked on on): a job
// being stopped may still be writing its results.
func (x *execution) trySalvage(nr *nodeRun, why string) (res startResult, on *nodeRun, ok bool) {
	n := nr.n
	if !x.salvageOn() || nr.finally || !plan.SavesResults(n.Step.Uses) {
		return waiting, nil, false
	}
	inst := nr.instance
	if n.Cell != nil {
		if nr.group == nil || !nr.group.placed {
			return waiting, nil, false
		}
		inst = nr.group.instance
	}
	in := x.insts[inst]
	if in == nil || !in.acquired() || in.phase == instReleased {
		return waiting, nil, false
	}
	placed := func(t *Node) string { return x.byID[t.ID].instance }
	var failed []string
	for _, u := range x.g.Upstream(n, inst, placed) {
		ur := x.byID[u.Node.ID]
		if !ur.state.Terminal() {
			return waiting, ur, true
		}
		if !x.succeeded(ur) {
			failed = append(failed, fmt.Sprintf("%s %s", ur.n.ID, x.endText(ur)))
		}
	}
	if !x.wroteResults(nr, inst) {
		return waiting, nil, false
	}
	if x.cfg.Parallel > 0 && x.running >= x.cfg.Parallel {
		return waiting, nil, true
	}
	nr.instance = inst
	nr.salvage, nr.salvageWhy = true, why
	if len(failed) > 0 {
		nr.partial = "upstream " + strings.Join(failed, ", ")
		if x.canceled {
			nr.partial += "; " + causeText(context.Cause(x.stepsCtx))
		}
	}
	x.emit(Event{Type: NodeSalvage, Node: n.ID, Step: n.Step.ID, Instance: inst, Message: salvageMessage(nr)})
	x.start(nr)
	return started, nil, true
}

// salvageMessage says why a salvage node runs.
func salvageMessage(nr *nodeRun) string {
	if nr.partial != "" {
		return "salvaging what the job wrote before the instance goes (partial: " + nr.partial + ")"
	}
	return "salvaging the results before the instance goes (" + nr.salvageWhy + ")"
}

// wroteResults reports whether a run node before nr (through any chain of
// needs) launched a job on inst (in this attempt of the run or an earlier
// one), which may have written results there.
func (x *execution) wroteResults(nr *nodeRun, inst string) bool {
	placed := func(t *Node) string { return x.byID[t.ID].instance }
	seen := map[*nodeRun]bool{}
	stack := []*nodeRun{nr}
	for len(stack) > 0 {
		cur := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, u := range x.g.Upstream(cur.n, inst, placed) {
			ur := x.byID[u.Node.ID]
			if seen[ur] || ur.instance != inst {
				continue
			}
			seen[ur] = true
			// A run node that failed launched no job (it returns once its
			// job runs); one cancelled or timed out may have.
			if ur.n.Step.Uses == plan.KindRun && (ur.started || ur.state == Succeeded) && ur.state != Failed {
				return true
			}
			stack = append(stack, ur)
		}
	}
	return false
}

// startSalvage sets up the context salvage nodes run under, and follows
// Config.SkipSalvage until the run ends (endSalvage).
func (x *execution) startSalvage(ctx context.Context) {
	x.salvageCtx, x.salvageCancel = context.WithCancelCause(context.WithoutCancel(ctx))
	x.salvageDone = make(chan struct{})
	if x.cfg.SkipSalvage == nil {
		return
	}
	skip, done, cancel := x.cfg.SkipSalvage, x.salvageDone, x.salvageCancel
	go func() {
		select {
		case <-skip:
			x.salvageSkipped.Store(true)
			cancel(errSalvageSkipped)
		case <-done:
		}
	}()
}

// errSalvageSkipped is the cause of a salvage node's end by SkipSalvage.
var errSalvageSkipped = errors.New("salvage skipped by a second interrupt")

// endSalvage lets go of what startSalvage set up, once the run ends.
func (x *execution) endSalvage() {
	close(x.salvageDone)
	x.salvageCancel(nil)
}

// salvageContext is the context a salvage node runs on: not ended by the
// run's cancellation, ended by SkipSalvage, and bounded by FinallyTimeout
// — the run-wide teardown deadline once the run was cancelled, else one
// of its own from its start.
func (x *execution) salvageContext() (context.Context, context.CancelFunc) {
	cause := fmt.Errorf("salvage ran past its deadline of %s", x.cfg.FinallyTimeout)
	deadline := time.Now().Add(x.cfg.FinallyTimeout)
	if x.canceled {
		if dl, ok := x.finalContext("").Deadline(); ok {
			deadline = dl
			cause = fmt.Errorf("finalizers, salvage and teardown ran past their deadline of %s", x.cfg.FinallyTimeout)
		}
	}
	return context.WithDeadlineCause(x.salvageCtx, deadline, cause)
}

// salvageEnded adjusts the end of a salvage node's attempts: one that
// found nothing to copy ends as it would have without salvage (and no
// failed upload is counted against its instance); one that succeeded
// says it was salvaged.
func (x *execution) salvageEnded(m *nodeResult) {
	nr := m.nr
	switch {
	case m.nothing:
		nr.salvage, nr.started = false, false
		m.st = Skipped
		if x.canceled {
			m.st = Canceled
		}
		m.msg = nr.salvageWhy + "; " + m.msg
		m.code = nil
	case m.st != Succeeded && errors.Is(context.Cause(x.salvageCtx), errSalvageSkipped):
		// Skipped on purpose: the instance goes as if it had not run
		// (deleted, not stopped to keep what it did not copy).
		nr.started = false
	case m.st == Succeeded && nr.partial != "":
		m.msg = "salvaged (partial results: " + nr.partial + ")"
	case m.st == Succeeded:
		m.msg = "salvaged during teardown (" + nr.salvageWhy + ")"
	}
}

// endText names how a node ended for a dependent's message.
func (x *execution) endText(nr *nodeRun) string {
	if nr.salvage && nr.state == Succeeded {
		return "was salvaged (its results may be partial)"
	}
	return string(nr.state)
}

package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/taoflow/taoflow/internal/progress"
	"github.com/taoflow/taoflow/plan"
)

// finalContext is the context a finalizer of instance inst runs on: one
// that the run's cancellation does not end, with a deadline of
// FinallyTimeout. Under early teardown each instance's finalizers start
// when its own share of the run ends, so each instance has a deadline of
// its own, counted from its first finalizer: a sweep whose instances end
// hours apart gives the last one's finalizers as long as the first's.
// Finalizers that start once the run was cancelled (Ctrl-C, fail_fast)
// share one run-wide deadline from the first of them.
func (x *execution) finalContext(inst string) context.Context {
	if !x.finallyStarted {
		x.finallyStarted = true
		x.emit(Event{Type: FinallyStarted})
	}
	in := x.insts[inst]
	if x.canceled || in == nil {
		if x.finalCtx == nil {
			x.finalCtx, x.finalCancel = context.WithTimeoutCause(context.WithoutCancel(x.stepsCtx), x.cfg.FinallyTimeout,
				fmt.Errorf("finalizers and teardown ran past their deadline of %s", x.cfg.FinallyTimeout))
		}
		return x.finalCtx
	}
	if in.finalCtx == nil {
		in.finalCtx, in.finalCancel = context.WithTimeoutCause(context.WithoutCancel(x.stepsCtx), x.cfg.FinallyTimeout,
			fmt.Errorf("the finalizers of %s ran past their deadline of %s", inst, x.cfg.FinallyTimeout))
	}
	return in.finalCtx
}

// attempts runs a node's attempts (on a worker of its own) and says how the
// last one ended.
func (x *execution) attempts(ctx context.Context, nr *nodeRun, inst string, upstream []Upstream, slot *Slot) nodeResult {
	n := nr.n
	res := nodeResult{nr: nr}
	if n.Step.UsesSlotGPUs() && (slot == nil || slot.GPUs == nil) {
		res.st, res.msg = Failed, x.noSlotGPUs(n, inst, slot)
		return res
	}
	with := x.g.With(n, Scope{RunID: x.cfg.RunID, Instance: inst, Slot: slot})
	retries := n.Step.Retries
	for attempt := 1; ; attempt++ {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if n.Step.Timeout > 0 {
			actx, cancel = context.WithTimeoutCause(ctx, n.Step.Timeout, fmt.Errorf("step %s timed out after %s", n.Step.ID, n.Step.Timeout))
		}
		log := &lineWriter{emit: func(line string) {
			x.emit(Event{Type: NodeLog, Node: n.ID, Step: n.Step.ID, Instance: inst, Message: line})
		}}
		task := &Task{
			RunID: x.cfg.RunID, Node: n, Instance: inst, With: with, Attempt: attempt, Log: log, Upstream: upstream, Slot: slot,
			Salvage: nr.salvage, Partial: nr.partial,
			Progress: func(p progress.Report) {
				if p.Line != "" {
					x.emit(Event{Type: NodeProgress, Node: n.ID, Step: n.Step.ID, Instance: inst, Message: p.Line, Progress: &p.Figures})
				}
				if len(p.Points) > 0 {
					x.emit(Event{Type: NodeMetrics, Node: n.ID, Step: n.Step.ID, Instance: inst, Points: p.Points})
				}
			},
			Release: func(ctx context.Context, force bool) error {
				reply := make(chan error, 1)
				x.results <- releaseRequest{inst: inst, force: force, reply: reply}
				select {
				case err := <-reply:
					return err
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			},
		}
		x.emit(Event{Type: NodeStarted, Node: n.ID, Step: n.Step.ID, Instance: inst, Attempt: attempt})
		err := x.cfg.Executor.Execute(actx, task)
		log.Close()
		st, msg := classify(ctx, actx, err)
		cancel()
		res.st, res.msg, res.code = st, msg, exitCode(err)
		// Settings only when every attempt failed so: one that copied
		// part before it failed leaves results behind.
		var sf SettingsFailure
		res.settings = (attempt == 1 || res.settings) && st == Failed && errors.As(err, &sf) && sf.SettingsError()
		if nr.salvage && errors.Is(err, ErrNothingToSalvage) {
			res.nothing, res.msg = true, err.Error()
			return res
		}
		if (st == Failed || st == TimedOut) && attempt <= retries && ctx.Err() == nil {
			wait := backoff(n.Step.Backoff, attempt)
			x.emit(Event{Type: NodeRetrying, Node: n.ID, Step: n.Step.ID, Instance: inst, Attempt: attempt,
				Message: fmt.Sprintf("%s; retry %d of %d in %s", msg, attempt, retries, wait)})
			t := time.NewTimer(wait)
			select {
			case <-t.C:
				continue
			case <-ctx.Done():
				t.Stop()
				res.st, res.msg = Canceled, "canceled while waiting to retry: "+causeText(context.Cause(ctx))
				return res
			}
		}
		return res
	}
}

// noSlotGPUs says why a node that needs its slot's GPUs has none. Validate
// and preflight refuse what leads here; this keeps a job from starting on
// GPUs another slot holds if they did not.
func (x *execution) noSlotGPUs(n *Node, inst string, slot *Slot) string {
	if slot == nil {
		return fmt.Sprintf("step %s needs the GPUs of its slot, but its cell holds no slot of %s", n.Step.ID, inst)
	}
	count := 0
	if x.cfg.GPUs != nil {
		count = x.cfg.GPUs(inst)
	}
	slots := x.insts[inst].slots
	if count == 0 {
		return fmt.Sprintf("the GPUs of %s are not known, so slot %d has none: declare them (instances.%s.gpus) or count them with a preflight step that step %s needs", inst, slot.Index, inst, n.Step.ID)
	}
	return fmt.Sprintf("%s has %d GPUs for %d slots, so slot %d has none", inst, count, slots, slot.Index)
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
		base = plan.DefaultBackoff
	}
	return base << min(attempt-1, 5)
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

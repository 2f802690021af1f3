package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sourcegraph/conc/panics"
)

// instPhase is where an instance is in its life within one run. It only
// moves forward: idle → acquiring → ready or unavailable → releasing →
// released.
type instPhase int

const (
	instIdle        instPhase = iota // no node has needed it yet
	instAcquiring                    // Acquire is running
	instUnavailable                  // Acquire failed (acquireErr says why); released all the same, for what a failed create may have left
	instReady                        // acquired: nodes may start on it
	instReleasing                    // Release is running
	instReleased                     // Release returned; nothing starts on it any more
)

func (p instPhase) String() string {
	return [...]string{"idle", "acquiring", "unavailable", "ready", "releasing", "released"}[p]
}

// instRun is one instance of the plan during a run.
type instRun struct {
	name        string
	slots, used int    // used: cells placed on it whose last node has not ended
	busy        []bool // busy[i]: a cell holds slot i
	phase       instPhase
	acquireErr  error // why it is unavailable
	// unsaved are the directories an upload or fetch that ran on it did
	// not copy (it failed after it started copying); saved those a
	// verified upload or fetch copied. An unsaved directory no saved one
	// holds means its disk holds results that exist nowhere else
	// (holdsResults): it is stopped, not deleted, unless a delete step
	// asked to force it (forceDelete).
	unsaved, saved []copied
	forceDelete    bool
	// waiters are delete steps waiting for the release to end.
	waiters       []chan error
	releaseErrMsg string         // why the release failed ("" if it did not)
	outcome       ReleaseOutcome // of the release, once released
	// finalCtx bounds the instance's finalizers that start before the run
	// is cancelled, from the first of them (finalContext).
	finalCtx    context.Context
	finalCancel context.CancelFunc
}

// take gives cell g a slot: slot want when it is free, else the lowest
// free one. A cell beyond the slots (a resumed run whose plan has fewer
// slots now) holds none.
func (in *instRun) take(g *groupRun, want int) {
	in.used++
	if want < 0 || want >= len(in.busy) || in.busy[want] {
		want = slices.Index(in.busy, false)
	}
	if want >= 0 {
		in.busy[want] = true
	}
	g.slot = want
}

// free gives back the slot of cell g, whose last node ended.
func (in *instRun) free(g *groupRun) {
	in.used--
	if g.slot >= 0 && g.slot < len(in.busy) {
		in.busy[g.slot] = false
	}
}

// acquired reports whether nodes could start on the instance: it was
// acquired, even if it is being (or has been) released since.
func (in *instRun) acquired() bool { return in.acquireErr == nil && in.phase >= instReady }

// acquireAll starts acquiring every instance some node may run on.
func (x *execution) acquireAll() {
	needed := map[string]bool{}
	for _, nr := range x.pending {
		if nr.instance != "" {
			needed[nr.instance] = true
		}
		for _, p := range nr.n.Pool {
			needed[p] = true
		}
	}
	for _, name := range x.g.Plan.InstanceNames() {
		if !needed[name] {
			continue
		}
		x.insts[name].phase = instAcquiring
		x.emit(Event{Type: InstanceAcquire, Instance: name})
		x.spawn(func() message {
			return acquireResult{inst: name, err: x.acquire(name)}
		}, func(p *panics.Recovered) message {
			return acquireResult{inst: name, err: fmt.Errorf("panic while acquiring %s: %s", name, p)}
		})
	}
}

func (x *execution) acquire(name string) error {
	if x.cfg.Instances == nil {
		return nil
	}
	return x.cfg.Instances.Acquire(x.stepsCtx, name)
}

// acquireEnded records the end of an instance's Acquire.
func (x *execution) acquireEnded(m acquireResult) {
	x.wakeSlots("")
	in := x.insts[m.inst]
	if m.err != nil {
		in.phase, in.acquireErr = instUnavailable, m.err
		x.emit(Event{Type: InstanceFailed, Instance: m.inst, Message: m.err.Error()})
		return
	}
	in.phase = instReady
	x.emit(Event{Type: InstanceReady, Instance: m.inst})
}

// maybeRelease is called as nodes end: an instance nothing can need any
// more is released right away (early teardown).
func (x *execution) maybeRelease() {
	for _, name := range x.g.Plan.InstanceNames() {
		in := x.insts[name]
		if (in.phase == instReady || in.phase == instUnavailable) && x.may[name] == 0 {
			x.startRelease(in)
		}
	}
}

// releaseAsked handles a delete step's request to release its instance
// now: it joins a release under way, or starts one.
func (x *execution) releaseAsked(m releaseRequest) {
	in := x.insts[m.inst]
	if m.force {
		in.forceDelete = true
	}
	if in.phase == instReleased {
		m.reply <- in.releaseError()
		return
	}
	in.waiters = append(in.waiters, m.reply)
	if in.phase != instReleasing {
		x.startRelease(in)
	}
}

func (x *execution) startRelease(in *instRun) {
	mode := ReleaseDelete
	if in.holdsResults() && !in.forceDelete {
		mode = ReleaseStop
	}
	in.phase = instReleasing
	x.emit(Event{Type: InstanceRelease, Instance: in.name, Message: mode.String()})
	x.spawn(func() message {
		ctx, cancel := context.WithTimeoutCause(context.WithoutCancel(x.stepsCtx), x.cfg.FinallyTimeout,
			fmt.Errorf("releasing %s took longer than %s", in.name, x.cfg.FinallyTimeout))
		defer cancel()
		outcome, err := x.release(ctx, in.name, mode)
		return releaseResult{inst: in.name, outcome: outcome, err: err}
	}, func(p *panics.Recovered) message {
		return releaseResult{inst: in.name, err: fmt.Errorf("panic while releasing %s: %s", in.name, p)}
	})
}

func (x *execution) release(ctx context.Context, name string, mode ReleaseMode) (ReleaseOutcome, error) {
	if x.cfg.Instances == nil {
		return ReleaseDeleted, nil
	}
	return x.cfg.Instances.Release(ctx, name, mode)
}

// releaseEnded records the end of an instance's Release and answers the
// delete steps waiting for it.
func (x *execution) releaseEnded(m releaseResult) {
	x.wakeSlots("")
	in := x.insts[m.inst]
	in.phase, in.outcome = instReleased, m.outcome
	if m.err != nil {
		in.releaseErrMsg = m.err.Error()
		x.emit(Event{Type: InstanceLeft, Instance: m.inst, Message: m.err.Error()})
	} else {
		x.emit(Event{Type: InstanceReleased, Instance: m.inst, Message: releasedMessage(m.outcome)})
	}
	for _, w := range in.waiters {
		w <- in.releaseError()
	}
	in.waiters = nil
}

// releaseError is what a delete step waiting for the release gets: nil
// when the instance went as asked (or was stopped to keep its results).
func (in *instRun) releaseError() error {
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
		return "stopped instead of deleted: a results upload or fetch on it failed (its disk is kept)"
	case ReleaseKept:
		return "kept (keep: true)"
	case ReleaseLeftAlone:
		return "left as it is (not created by this run)"
	case ReleaseHeld:
		return "held, not deleted: a results upload or fetch on it failed, so it keeps them (it costs nothing)"
	default: // ReleaseUnknown
		return "released; what became of it is unknown"
	}
}

// holdsResults reports whether some directory a failed upload or fetch
// did not copy off the instance was not copied by a verified one either
// (the same directory, or one above it) that started after it or after
// the same nodes.
func (in *instRun) holdsResults() bool {
	for _, u := range in.unsaved {
		if !slices.ContainsFunc(in.saved, func(s copied) bool {
			return (s.seq > u.seq || s.needs == u.needs) && (s.dir == u.dir || s.dir == "/" || strings.HasPrefix(u.dir, s.dir+"/"))
		}) {
			return true
		}
	}
	return false
}

// copied is a directory an upload or fetch copied (or failed to copy) off
// an instance, when that node started (nodeRun.startSeq), and what it
// waited for (needsKey).
type copied struct {
	dir   string
	seq   int
	needs string
}

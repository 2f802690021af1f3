package steps

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/taoflow/taoflow/platform"
)

// eventsFile is where a host-process job's supervisor appends "@end JOB"
// when the job ends, relative to the instance's $HOME
// (scripts/proc-supervisor.sh).
const eventsFile = ".taoflow/events"

// Watching. A wait polls its jobs every with.interval, but it does not
// wait for the next poll to notice a job's end: one watcher per instance
// (scripts/watch.sh, a long-running command streamed through
// platform.Streamer) reports the ends of every job there as lines — the
// supervisors' "@end JOB" lines for host processes, docker events' die
// events for the run's containers — and wakes the waits of those jobs,
// which poll at once. The watcher only says when to look: what a job's
// state is comes from the poll, as before. So a missed line costs time,
// never correctness: the interval stays as the fallback heartbeat.
//
// A watcher connects once a wait follows a job on its instance and stops
// when no wait has followed any for watchLinger, when the instance's jobs
// are cleaned up, or when the run closes the steps. A dropped stream (a
// killed ssh session, a restarted sshd) reconnects; every time the
// watcher is (again) ready it wakes all its waits for one poll, which
// sees the ends it could not report. Where no stream can run (brev's exec
// transport, an ssh host that allows too few sessions, a platform that
// is no Streamer, a watcher whose first watchGiveUp connections all
// failed before "@ready") the waits poll only.

const (
	// watchLinger is how long a watcher no wait follows stays connected
	// for the next wait (the cells of a sweep follow one after the other).
	watchLinger = 2 * time.Second
	// watchGiveUp is how many connections in a row may fail before
	// "@ready", when none ever got ready, before the instance is polled
	// only.
	watchGiveUp = 5
	// watchBackoff is the first pause before a reconnect, doubled up to
	// watchMaxBackoff.
	watchBackoff    = 100 * time.Millisecond
	watchMaxBackoff = 5 * time.Second
	// watchStopGrace is how long a stopped watcher's command has to end
	// once its stdin is closed, before it is canceled.
	watchStopGrace = 2 * time.Second
	// minWatchSessions is the fewest ssh sessions per instance
	// (platform.max_sessions) that leave room for a watcher beside the
	// launches and polls.
	minWatchSessions = 3
)

// A wake costs a poll, and the events file the watcher follows can be
// written by any job on the instance: a job appending "@ready" or "@end"
// lines in a loop would have every wait there poll without pause. So each
// follower's wakes are rationed, a token bucket: wakeBurst at once, then
// one per wakeEvery. A wake over the ration is not lost but held back until
// the ration allows it (one at most: wakes coalesce).
const (
	wakeBurst = 2
	wakeEvery = time.Second
)

// wakeRation is the token bucket of one follower's wakes. Its clock is
// now (time.Now when nil).
type wakeRation struct {
	now    func() time.Time
	tokens float64
	last   time.Time // when tokens was counted; zero: never, the bucket is full
}

// take spends a token when there is one (ok), else says how long until
// there is.
func (r *wakeRation) take() (ok bool, wait time.Duration) {
	now := time.Now
	if r.now != nil {
		now = r.now
	}
	t := now()
	if r.last.IsZero() {
		r.tokens = wakeBurst
	} else if d := t.Sub(r.last); d > 0 {
		r.tokens = min(wakeBurst, r.tokens+float64(d)/float64(wakeEvery))
	}
	r.last = t
	if r.tokens >= 1 {
		r.tokens--
		return true, 0
	}
	return false, time.Duration((1 - r.tokens) * float64(wakeEvery))
}

// follower is one wait's interest in the ends of its jobs.
type follower struct {
	jobs map[string]bool
	wake chan struct{} // capacity 1: wakes coalesce

	mu     sync.Mutex
	ration wakeRation
	held   *time.Timer // rings a wake the ration held back
}

// poke wakes the wait, within its ration: a wake already pending, or held
// back, takes this one in.
func (f *follower) poke() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held != nil || len(f.wake) == cap(f.wake) {
		return
	}
	ok, wait := f.ration.take()
	if !ok {
		f.held = time.AfterFunc(wait, func() {
			f.mu.Lock()
			f.held = nil
			f.mu.Unlock()
			f.poke()
		})
		return
	}
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// quiet stops a held-back wake: the wait no longer follows.
func (f *follower) quiet() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held != nil {
		f.held.Stop()
		f.held = nil
	}
}

// watcher follows the jobs of one instance.
type watcher struct {
	s    *Steps
	st   platform.Streamer
	inst platform.Instance

	mu        sync.Mutex
	followers map[*follower]bool
	stopped   bool
	idle      *time.Timer // runs stop once no wait follows
	stdin     *io.PipeWriter
	cancel    context.CancelFunc
	done      chan struct{}
	ready     bool // the current stream printed "@ready"
	connects  int  // the streams that got ready so far
	disabled  bool // polls only from now on
	lines     int  // the lines the streams printed so far
}

// watchedEvents is the events file the watchers follow (as tf_home reads
// it): eventsFile under the instance's home, or on Slurm the run's events file in the shared
// workdir, which each job's batch script appends to as it ends on its
// compute node (scripts/slurm-job.sh). A line that a shared filesystem
// delays or mangles costs a wake, never a job's state: the polls read
// that from squeue and the job's directory.
func (s *Steps) watchedEvents() string {
	if s.onSlurm() {
		return s.slurmWorkdir() + "/" + s.cfg.RunID + "/events"
	}
	return "~/" + eventsFile
}

// canWatch reports whether the steps' platform can hold a watcher on its
// instances, and the streamer to hold it with.
func (s *Steps) canWatch() (platform.Streamer, bool) {
	st, ok := s.cfg.Platform.(platform.Streamer)
	if !ok {
		return nil, false
	}
	if c, ok := st.(platform.StreamChecker); ok && !c.CanStream() {
		return nil, false
	}
	if p := s.cfg.Plan; p != nil {
		if n := p.Platform.MaxSessions; n > 0 && n < minWatchSessions {
			return nil, false
		}
	}
	return st, true
}

// follow makes the waits' wake channel ring soon after one of the jobs ws
// ends (and after each (re)connect of a watcher). It returns nil when no
// instance of ws can be watched; release ends the following.
func (s *Steps) follow(ws []*watched) (<-chan struct{}, func()) {
	st, ok := s.canWatch()
	if !ok {
		return nil, func() {}
	}
	f := &follower{jobs: map[string]bool{}, wake: make(chan struct{}, 1), ration: wakeRation{now: s.wakeClock}}
	insts := map[string]platform.Instance{}
	for _, w := range ws {
		f.jobs[w.job.ID] = true
		insts[w.inst.Name] = w.inst
	}
	var held []*watcher
	s.watchMu.Lock()
	if s.watchers == nil {
		s.watchers = map[string]*watcher{}
	}
	for name, inst := range insts {
		if s.watchClosed {
			break
		}
		w := s.watchers[name]
		switch added := w != nil && w.add(f); {
		case added:
		case w != nil && w.isDisabled():
			continue // polled only
		default: // none yet, or one that stopped
			w = &watcher{s: s, st: st, inst: inst, followers: map[*follower]bool{}}
			w.add(f)
			s.watchers[name] = w
		}
		held = append(held, w)
	}
	s.watchMu.Unlock()
	if len(held) == 0 {
		return nil, func() {}
	}
	return f.wake, func() {
		for _, w := range held {
			w.remove(f)
		}
		f.quiet()
	}
}

// add registers f, starting the watcher's stream when it is the first.
// It is false when the watcher has stopped (a new one must take its
// place) or polls only.
func (w *watcher) add(f *follower) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped || w.disabled {
		return false
	}
	w.followers[f] = true
	if w.idle != nil {
		w.idle.Stop()
		w.idle = nil
	}
	if w.done == nil {
		ctx, cancel := context.WithCancel(context.Background())
		w.cancel, w.done = cancel, make(chan struct{})
		go w.loop(ctx)
	}
	return true
}

func (w *watcher) isReady() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ready
}

func (w *watcher) isDisabled() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.disabled
}

// remove unregisters f; the watcher stops watchLinger after its last
// follower leaves, unless another comes.
func (w *watcher) remove(f *follower) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.followers, f)
	if len(w.followers) == 0 && !w.stopped && w.idle == nil {
		w.idle = time.AfterFunc(watchLinger, func() {
			w.mu.Lock()
			idle := len(w.followers) == 0 && !w.stopped
			if idle {
				// Under the lock that add takes: a wait that comes now
				// finds the watcher stopped and starts another.
				w.stopped = true
			}
			w.mu.Unlock()
			if idle {
				w.halt()
			}
		})
	}
}

// stop ends the watcher whether or not waits follow it (they poll on
// their interval from now on).
func (w *watcher) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	w.halt()
}

// halt ends the stopped watcher's stream (closing its stdin, then
// canceling it if it does not end within watchStopGrace) and waits for it.
func (w *watcher) halt() {
	w.mu.Lock()
	if w.idle != nil {
		w.idle.Stop()
		w.idle = nil
	}
	done, cancel, stdin := w.done, w.cancel, w.stdin
	w.mu.Unlock()
	if done == nil {
		return
	}
	if stdin != nil {
		_ = stdin.Close()
	}
	select {
	case <-done:
	case <-time.After(watchStopGrace):
	}
	cancel()
	<-done
	// The stream is gone: every follower polls again on its interval
	// alone, and a later follow starts a new watcher.
	w.wakeAll()
}

// loop runs the watch script until the watcher stops, reconnecting when
// the stream ends.
func (w *watcher) loop(ctx context.Context) {
	defer close(w.done)
	sc := privatePrelude + script(Params{
		"tf_events": w.s.watchedEvents(),
		"tf_run":    w.s.cfg.RunID,
		"tf_docker": boolParam(!w.s.onSlurm() && (w.s.cfg.Plan == nil || w.s.cfg.Plan.RunsContainers())),
	}, "home", "watch")
	backoff, fails, everReady := watchBackoff, 0, false
	for {
		r, pw := io.Pipe()
		w.mu.Lock()
		if w.stopped {
			w.mu.Unlock()
			return
		}
		w.stdin, w.ready = pw, false
		w.mu.Unlock()
		lw := &lineWriter{line: w.line}
		_, err := w.st.ExecStream(ctx, w.inst, sc, r, lw)
		_ = pw.Close()
		_ = r.Close()
		w.mu.Lock()
		wasReady, stopped := w.ready, w.stopped
		w.ready = false
		w.mu.Unlock()
		if ctx.Err() != nil || stopped {
			return
		}
		if wasReady {
			// The stream ended without being asked to: its reports stop
			// here, so the waits poll once (an end between its last line
			// and now); the next "@ready" wakes them again. Failed
			// reconnects wake nobody: a host that is down costs the waits
			// no polls beyond their interval's.
			w.wakeAll()
			backoff, fails, everReady = watchBackoff, 0, true
		} else {
			fails++
		}
		// A watcher that never got ready cannot run here (no tail, a shell
		// that refuses it); one that did keeps trying while waits follow
		// it: the host may be back.
		if errors.Is(err, platform.ErrNoStream) || errors.Is(err, platform.ErrNotFound) || (!everReady && fails >= watchGiveUp) {
			w.mu.Lock()
			w.disabled = true
			w.mu.Unlock()
			return
		}
		if !sleep(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, watchMaxBackoff)
	}
}

// line handles one line of the watch script.
func (w *watcher) line(l string) {
	w.mu.Lock()
	w.lines++
	w.mu.Unlock()
	switch f := strings.Fields(l); {
	case len(f) == 1 && f[0] == "@ready":
		w.mu.Lock()
		w.ready = true
		w.connects++
		w.mu.Unlock()
		w.wakeAll()
	case len(f) >= 2 && (f[0] == "@end" || f[0] == "@die"):
		w.mu.Lock()
		for fl := range w.followers {
			if fl.jobs[f[1]] {
				fl.poke()
			}
		}
		w.mu.Unlock()
	}
	// anything else: noise from the instance's shell start-up
}

func (w *watcher) wakeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for fl := range w.followers {
		fl.poke()
	}
}

// unwatch stops the watcher of instance name, if any (its jobs are being
// cleaned up: nothing is left to report).
func (s *Steps) unwatch(name string) {
	s.watchMu.Lock()
	w := s.watchers[name]
	delete(s.watchers, name)
	s.watchMu.Unlock()
	if w != nil {
		w.stop()
	}
}

// Close stops every watcher and waits for them; later waits poll only.
// The run calls it when it ends.
func (s *Steps) Close() {
	s.watchMu.Lock()
	s.watchClosed = true
	ws := s.watchers
	s.watchers = nil
	s.watchMu.Unlock()
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(w.stop)
	}
	wg.Wait()
	s.stopRenewers()
}

// lineWriter calls line for each complete line written to it.
type lineWriter struct {
	line func(string)
	buf  []byte
}

func (lw *lineWriter) Write(p []byte) (int, error) {
	lw.buf = append(lw.buf, p...)
	for {
		i := bytes.IndexByte(lw.buf, '\n')
		if i < 0 {
			break
		}
		lw.line(string(lw.buf[:i]))
		lw.buf = lw.buf[i+1:]
	}
	if len(lw.buf) > 4096 { // no line of ours is this long: noise
		lw.buf = lw.buf[:0]
	}
	return len(p), nil
}

// pause sleeps for d, or until wake rings (a job may have ended). It is
// false when ctx is done.
func pause(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-wake:
		return true
	case <-ctx.Done():
		return false
	}
}

package steps

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taoflow/taoflow/internal/progress"
	"github.com/taoflow/taoflow/internal/testrig"
	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
	"github.com/taoflow/taoflow/platform/ssh"
	"github.com/taoflow/taoflow/platform/ssh/sshtest"
)

// fakeClock is a clock that moves only when told.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestWakeRation: a follower's wakes come wakeBurst at once, then one per
// wakeEvery, and a refused one says how long until it is allowed.
func TestWakeRation(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	r := wakeRation{now: clock.now}
	take := func(want bool, wantWait time.Duration) {
		t.Helper()
		ok, wait := r.take()
		if ok != want || wait != wantWait {
			t.Fatalf("take() = %v, %v; want %v, %v", ok, wait, want, wantWait)
		}
	}
	take(true, 0)
	take(true, 0) // the burst of two
	take(false, wakeEvery)
	clock.advance(wakeEvery / 2)
	take(false, wakeEvery/2)
	clock.advance(wakeEvery / 2)
	take(true, 0)
	take(false, wakeEvery)
	clock.advance(time.Hour) // a quiet hour banks no more than the burst
	take(true, 0)
	take(true, 0)
	take(false, wakeEvery)
	clock.advance(-time.Minute) // a clock that steps back gives nothing
	take(false, wakeEvery)

	// The follower: a flood of pokes while the clock stands still rings
	// the burst and holds one back, which rings once the ration allows.
	clock = &fakeClock{t: time.Unix(1e9, 0)}
	f := &follower{wake: make(chan struct{}, 1), ration: wakeRation{now: clock.now}}
	defer f.quiet()
	rang := 0
	for range 10000 {
		f.poke()
		select {
		case <-f.wake:
			rang++
		default:
		}
	}
	if rang != wakeBurst {
		t.Fatalf("10,000 pokes with the clock stopped rang %d wakes, want %d", rang, wakeBurst)
	}
	f.mu.Lock()
	held := f.held != nil
	f.mu.Unlock()
	if !held {
		t.Fatal("the pokes over the ration left no wake held back")
	}
	clock.advance(wakeEvery)
	select {
	case <-f.wake:
	case <-time.After(noticeBound):
		t.Fatalf("the held-back wake did not ring within %s of the ration allowing it", noticeBound)
	}
}

// TestWakeFlood: a job floods the instance's events file with 10,000
// lines ("@ready", which wakes every wait, and "@end" of the job another
// wait follows) while that wait (interval 1h) runs. The wait's ration
// holds: with its clock stopped, the flood costs it at most wakeBurst
// polls, not one per line the watcher reads; once the clock moves on, the
// end of its own job still reaches it.
func TestWakeFlood(t *testing.T) {
	srv := sshtest.Start(t)
	home, err := srv.AddSandbox("box")
	if err != nil {
		t.Fatal(err)
	}
	pf := &countingStreamer{pf: ssh.New(ssh.Config{Run: "r1", ConfigFile: srv.ConfigFile})}
	t.Cleanup(func() { _ = pf.pf.Close() })
	x := newXfer(t, pf, platform.Instance{Name: "box", Ref: "box"}, home)
	x.steps = New(Config{Platform: pf, RunID: "r1", Plan: x.steps.cfg.Plan, PollInterval: tick})
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	x.steps.wakeClock = clock.now
	e := &env{inst: x.inst, steps: x.steps}
	t.Cleanup(func() {
		x.steps.Close()
		killJobs(platform.Instance{Ref: home})
		waitJobsGone(t, platform.Instance{Ref: home})
	})
	const victim, flooder = "tf-r1-train-box", "tf-r1-flood-box"
	e.runJob(t, x.steps, victim, with("command", `while [ ! -e "$HOME/go" ]; do sleep 0.05; done`))

	ctx, cancel := context.WithTimeout(t.Context(), noticeBound)
	defer cancel()
	done := make(chan error, 1)
	log := &logBuf{}
	go func() {
		done <- x.steps.Do(ctx, Request{NodeID: "wait@box", Step: &plan.Step{ID: "wait", Uses: plan.KindWait},
			Instance: x.inst, With: hour, Jobs: []Job{{ID: victim}}, Log: log, Progress: func(progress.Report) {}})
	}()
	testrig.Eventually(t, 30*time.Second, "the watcher is ready", func() bool {
		w := watcherOf(x.steps, "box")
		return w != nil && w.isReady()
	})
	// The wait's first poll and the one "@ready" asked for (the first of
	// its ration).
	testrig.Eventually(t, 30*time.Second, "two polls", func() bool { return pf.polls.Load() >= 2 })
	before := pf.polls.Load()
	w := watcherOf(x.steps, "box")
	linesBefore := w.linesSoFar()

	// 100 batches of 100 lines, a short pause between: the watcher reads
	// them as they come, far more often than once a second.
	flood := `i=0; while [ $i -lt 100 ]; do j=0; while [ $j -lt 50 ]; do echo @ready; echo "@end ` + victim + `"; j=$((j+1)); done >> "$HOME/.taoflow/events"; sleep 0.01; i=$((i+1)); done; touch "$HOME/flooded"`
	e.runJob(t, x.steps, flooder, with("command", flood))
	testrig.Eventually(t, noticeBound, "the flood to end", func() bool {
		_, err := os.Stat(filepath.Join(home, "flooded"))
		return err == nil
	})
	b, _ := os.ReadFile(filepath.Join(home, eventsFile))
	if n := strings.Count(string(b), "@end "+victim+"\n"); n != 5000 {
		t.Fatalf("the events file holds %d flood lines for the victim, want 5000", n)
	}
	// Every line of the flood has reached the watcher.
	testrig.Eventually(t, noticeBound, "the watcher to read the flood", func() bool { return w.linesSoFar() >= linesBefore+10000 })
	if got := pf.polls.Load() - before; got > wakeBurst {
		t.Errorf("a flood of 10,000 event lines cost the wait %d polls, want at most %d (its burst, the clock stopped)", got, wakeBurst)
	}
	t.Logf("polls during the flood: %d", pf.polls.Load()-before)

	// The ration lets wakes through again as time passes: the end of the
	// wait's own job still reaches it.
	if err := os.WriteFile(filepath.Join(home, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	clock.advance(time.Hour)
	if err := <-done; err != nil {
		t.Fatalf("the wait did not notice its job's end after the flood: %v\nlog:\n%s", err, log)
	}
}

func (w *watcher) linesSoFar() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lines
}

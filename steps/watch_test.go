package steps

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taoflow/taoflow/internal/progress"
	"github.com/taoflow/taoflow/internal/testrig"
	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
	"github.com/taoflow/taoflow/platform/brev"
	"github.com/taoflow/taoflow/platform/ssh"
	"github.com/taoflow/taoflow/platform/ssh/sshtest"
)

// hour is the poll interval of the tests below: a wait that returns
// within their bound noticed its job's end without polling for it.
var hour = with("interval", "1h")

// noticeBound bounds a wait that must notice a job's end at once: far
// below the hour its poll interval would take, far above a loaded
// machine's slowest round trip.
const noticeBound = 60 * time.Second

// watcherOf returns the steps' watcher of instance name (nil for none).
func watcherOf(s *Steps, name string) *watcher {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	return s.watchers[name]
}

func (w *watcher) connectsSoFar() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.connects
}

// killWatchClients SIGKILLs the local ssh clients of the watch sessions
// on the instance whose home is home, as a dropped connection would end
// them, and fails t when there is none. A script is no argument
// (design.md §6.0), so a session is found from its far end: the watch
// script's tail -f of home's events file, whose session leader is the
// remote wrapper, whose argv holds the nonce that the local ssh client's
// argv (the same wrapper) holds too.
func killWatchClients(t *testing.T, home string) {
	t.Helper()
	nonce := regexp.MustCompile(`__taoflow_[0-9a-f]{16}:`)
	killed := 0
	for _, p := range testrig.ProcessesWith(filepath.Join(home, eventsFile)) {
		st, ok := testrig.ReadStat(p.PID)
		if p.Comm() != "tail" || !ok {
			continue
		}
		leader, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(st.SID), "cmdline"))
		m := nonce.Find(leader)
		if err != nil || m == nil {
			continue
		}
		for _, c := range testrig.ProcessesWith(string(m)) {
			if c.Comm() == "ssh" && syscall.Kill(c.PID, syscall.SIGKILL) == nil {
				killed++
			}
		}
	}
	if killed == 0 {
		t.Fatal("found no ssh client of a watch session to kill")
	}
}

// TestWaitNoticesEnd: with interval 1h, a host-process job's end reaches
// the wait at once, on the local platform and over a real sshd; the
// watcher is one per instance for both waits, and Close leaves no watch
// process behind.
func TestWaitNoticesEnd(t *testing.T) {
	for name, rig := range xferRigs(t) {
		t.Run(name, func(t *testing.T) {
			x := rig(t)
			e := &env{inst: x.inst, steps: x.steps}
			t.Cleanup(func() {
				x.steps.Close()
				killJobs(platform.Instance{Ref: x.home})
				waitJobsGone(t, platform.Instance{Ref: x.home})
			})
			ids := []string{"tf-r1-a-a", "tf-r1-b-a"}
			for i, id := range ids {
				e.runJob(t, x.steps, id, with("command", "sleep "+[]string{"0.5", "1.5"}[i]))
			}
			ctx, cancel := context.WithTimeout(t.Context(), noticeBound)
			defer cancel()
			errs := make(chan error, 2)
			for _, id := range ids {
				go func() {
					log, _, err := e.waitJobs(ctx, x.steps, hour, Job{ID: id})
					if err == nil && !strings.Contains(log.String(), "at once when one ends") {
						t.Errorf("the wait does not say it follows its job:\n%s", log)
					}
					errs <- err
				}()
			}
			for range ids {
				if err := <-errs; err != nil {
					t.Fatalf("a wait with interval 1h did not notice its job's end within %s: %v", noticeBound, err)
				}
			}
			w := watcherOf(x.steps, x.inst.Name)
			if w == nil {
				t.Fatal("no watcher on the instance")
			}
			if n := w.connectsSoFar(); n != 1 {
				t.Errorf("the watcher connected %d times, want once for both waits", n)
			}
			events := filepath.Join(x.home, eventsFile)
			b, _ := os.ReadFile(events)
			for _, id := range ids {
				if !strings.Contains(string(b), "@end "+id+"\n") {
					t.Errorf("%s does not record the end of %s:\n%s", events, id, b)
				}
			}
			x.steps.Close()
			testrig.Eventually(t, 10*time.Second, "no watch process left", func() bool { return len(testrig.ProcessesWith(events)) == 0 })
		})
	}
}

// TestWatcherReconnects: the watcher's ssh session is killed while a job
// runs (interval 1h); the watcher connects again, the job's end is still
// noticed, and the job was launched once.
func TestWatcherReconnects(t *testing.T) {
	srv := sshtest.Start(t)
	home, err := srv.AddSandbox("box")
	if err != nil {
		t.Fatal(err)
	}
	pf := ssh.New(ssh.Config{Run: "r1", ConfigFile: srv.ConfigFile})
	t.Cleanup(func() { _ = pf.Close() })
	x := newXfer(t, pf, platform.Instance{Name: "box", Ref: "box"}, home)
	e := &env{inst: x.inst, steps: x.steps}
	t.Cleanup(func() {
		x.steps.Close()
		killJobs(platform.Instance{Ref: home})
		waitJobsGone(t, platform.Instance{Ref: home})
	})
	const id = "tf-r1-train-box"
	gate := filepath.Join(home, "go")
	e.runJob(t, x.steps, id, with("command", `while [ ! -e "$HOME/go" ]; do sleep 0.05; done; echo done`))

	ctx, cancel := context.WithTimeout(t.Context(), noticeBound)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, _, err := e.waitJobs(ctx, x.steps, hour, Job{ID: id})
		done <- err
	}()
	events := filepath.Join(home, eventsFile)
	var w *watcher
	testrig.Eventually(t, 30*time.Second, "the watcher is ready", func() bool {
		w = watcherOf(x.steps, "box")
		return w != nil && w.isReady() && len(testrig.ProcessesWith(events)) > 0
	})
	killWatchClients(t, home)
	testrig.Eventually(t, 30*time.Second, "the watcher connects again", func() bool { return w.connectsSoFar() >= 2 && w.isReady() })
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("after a reconnect, the wait did not notice the job's end within %s: %v", noticeBound, err)
	}
	log := e.runJob(t, x.steps, id, with("command", "echo again"))
	if !strings.Contains(log.String(), "adopted existing job") {
		t.Errorf("the job was launched again:\n%s", log)
	}
	x.steps.Close()
	// The killed session's remote half ended too: its stdin closed.
	testrig.Eventually(t, 10*time.Second, "no watch process left", func() bool { return len(testrig.ProcessesWith(events)) == 0 })
}

// TestWaitNoticesContainerEnd: with interval 1h, a container's end
// reaches the wait at once through docker events.
func TestWaitNoticesContainerEnd(t *testing.T) {
	image := testrig.BuildTrainerImage(t, "")
	e := newDockerEnv(t, nil)
	id := e.job("train")
	e.runContainer(t, id, "image", image, "command", "-epochs 2 -sleep 300ms")
	ctx, cancel := context.WithTimeout(t.Context(), noticeBound)
	defer cancel()
	log, _, err := e.waitJobs(ctx, e.steps, hour, Job{ID: id, Image: image})
	if err != nil {
		t.Fatalf("a wait with interval 1h did not notice the container's end within %s: %v\nlog:\n%s", noticeBound, err, log)
	}
	if !strings.Contains(log.String(), "trainer: done") {
		t.Errorf("the wait log misses the container's last line:\n%s", log)
	}
	e.steps.Close()
}

// TestWaitPollsWithoutStream: on a platform that cannot stream (brev's
// exec transport, here a platform that is no Streamer) a wait still ends,
// by polling, and says it polls only.
func TestWaitPollsWithoutStream(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Platform = &hookPlatform{Platform: c.Platform, before: func(string) {}} })
	const id = "tf-r1-train-a"
	e.runJob(t, e.steps, id, with("command", "sleep 0.2"))
	log, _, err := e.waitJobs(t.Context(), e.steps, with("interval", "100ms"), Job{ID: id})
	if err != nil {
		t.Fatalf("wait: %v\nlog:\n%s", err, log)
	}
	if strings.Contains(log.String(), "at once") || !strings.Contains(log.String(), "(poll every 100ms)") {
		t.Errorf("the wait log should say it polls only:\n%s", log)
	}
	if watcherOf(e.steps, "a") != nil {
		t.Error("a watcher was started on a platform that cannot stream")
	}
}

// TestWatchExecTransport: brev's exec transport (it cannot stream), or a
// plan with too few ssh sessions for a watcher, is polled only.
func TestWatchExecTransport(t *testing.T) {
	for _, transport := range []string{brev.TransportExec, brev.TransportSSH} {
		pf, err := brev.New(brev.Config{Transport: transport})
		if err != nil {
			t.Fatal(err)
		}
		e := newEnv(t, func(c *Config) { c.Platform = pf })
		if _, ok := e.steps.canWatch(); ok != (transport == brev.TransportSSH) {
			t.Errorf("brev transport %s: watched = %v", transport, ok)
		}
	}
	e := newEnv(t, func(c *Config) { c.Plan = &plan.Plan{Platform: plan.Platform{Kind: "ssh", MaxSessions: 2}} })
	if _, ok := e.steps.canWatch(); ok {
		t.Error("max_sessions 2: the instances would be watched")
	}
	e = newEnv(t)
	if _, ok := e.steps.canWatch(); !ok {
		t.Error("the local platform cannot be watched")
	}
}

// TestWatcherMissesNoEnd: the watcher's session is killed and the host
// refuses new sessions (sshtest's <sandbox>.down) while the job ends, so
// no watcher can report that end; once the host is back, the watcher
// connects again and its "@ready" poll sees the end (interval 1h).
func TestWatcherMissesNoEnd(t *testing.T) {
	srv := sshtest.Start(t)
	home, err := srv.AddSandbox("box")
	if err != nil {
		t.Fatal(err)
	}
	pf := &countingStreamer{pf: ssh.New(ssh.Config{Run: "r1", ConfigFile: srv.ConfigFile})}
	t.Cleanup(func() { _ = pf.pf.Close() })
	x := newXfer(t, pf, platform.Instance{Name: "box", Ref: "box"}, home)
	// A poll that fails for the host being down gives up after its quick
	// retries, so that only the watcher's reconnect can wake the wait.
	x.steps = New(Config{Platform: pf, RunID: "r1", Plan: x.steps.cfg.Plan, PollInterval: tick, TransientBackoff: 10 * time.Millisecond})
	e := &env{inst: x.inst, steps: x.steps}
	t.Cleanup(func() {
		x.steps.Close()
		killJobs(platform.Instance{Ref: home})
		waitJobsGone(t, platform.Instance{Ref: home})
	})
	const id = "tf-r1-train-box"
	e.runJob(t, x.steps, id, with("command", `while [ ! -e "$HOME/go" ]; do sleep 0.05; done`))

	ctx, cancel := context.WithTimeout(t.Context(), noticeBound)
	defer cancel()
	done := make(chan error, 1)
	log := &logBuf{}
	go func() {
		done <- x.steps.Do(ctx, Request{NodeID: "wait@box", Step: &plan.Step{ID: "wait", Uses: plan.KindWait},
			Instance: x.inst, With: hour, Jobs: []Job{{ID: id}}, Log: log, Progress: func(progress.Report) {}})
	}()
	var w *watcher
	testrig.Eventually(t, 30*time.Second, "the watcher is ready", func() bool {
		w = watcherOf(x.steps, "box")
		return w != nil && w.isReady()
	})
	// The wait's first poll and the one "@ready" asked for are done: no
	// wake is pending when the stream is cut.
	testrig.Eventually(t, 30*time.Second, "two polls", func() bool { return pf.polls.Load() >= 2 })
	down := home + ".down"
	if err := os.WriteFile(down, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	killWatchClients(t, home)
	testrig.Eventually(t, 30*time.Second, "the watcher to lose its stream", func() bool { return !w.isReady() })
	// The stream's end woke the wait, whose poll failed: the host is down.
	testrig.Eventually(t, 30*time.Second, "the wait's poll to fail", func() bool { return strings.Contains(log.String(), "poll failed (1 of") })
	if err := os.WriteFile(filepath.Join(home, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	testrig.Eventually(t, 30*time.Second, "the job to end", func() bool {
		_, err := os.Stat(filepath.Join(home, jobsDir, id, "rc"))
		return err == nil
	})
	if err := os.Remove(down); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the end of a job while the watcher was cut off was not noticed within %s: %v\nlog:\n%s", noticeBound, err, log)
	}
	if n := w.connectsSoFar(); n < 2 {
		t.Errorf("the watcher connected %d times, want again after the cut (disabled %v, same %v)\nlog:\n%s", n, w.isDisabled(), w == watcherOf(x.steps, "box"), log)
	}
	x.steps.Close()
}

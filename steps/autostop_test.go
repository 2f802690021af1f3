package steps

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/taoflow/taoflow/internal/testrig"
	"github.com/taoflow/taoflow/plan"
)

func TestAutostopDecision(t *testing.T) {
	for name, tc := range map[string]struct {
		line string
		ok   bool
		want string
	}{
		"idle":      {"1796538242 idle 31", true, "stopped itself at 2026-12-06T06:24:02Z (lease expired: not renewed for 31s, no job running)"},
		"max_after": {"1796538242 max_after 86401", true, "stopped itself at 2026-12-06T06:24:02Z (max_after: lease not renewed for 24h0m1s, the run's jobs stopped)"},
		"stopped":   {"1796538242 stopped 0", true, "found stopped at 2026-12-06T06:24:02Z with its autostop armed: it stopped itself (lease expired or max_after passed)"},
		"reason":    {"1796538242 bored 31", false, ""},
		"fields":    {"1796538242 idle", false, ""},
		"number":    {"x idle 31", false, ""},
		"negative":  {"1796538242 idle -3", false, ""},
	} {
		t.Run(name, func(t *testing.T) {
			d, ok := ParseAutostopDecision(tc.line)
			if ok != tc.ok {
				t.Fatalf("ParseAutostopDecision(%q) ok = %v, want %v", tc.line, ok, tc.ok)
			}
			if !ok {
				return
			}
			if diff := cmp.Diff(tc.want, d.String()); diff != "" {
				t.Errorf("String() (-want +got):\n%s", diff)
			}
			if d.Fact() != tc.line {
				t.Errorf("Fact() = %q, want %q", d.Fact(), tc.line)
			}
		})
	}
}

func TestAutostopCadence(t *testing.T) {
	for name, tc := range map[string]struct {
		after time.Duration
		every string
		renew time.Duration
	}{
		"seconds": {2 * time.Second, "0.5", 666666666 * time.Nanosecond},
		"minutes": {30 * time.Minute, "30", time.Minute},
		"small":   {100 * time.Millisecond, "0.2", 100 * time.Millisecond},
		"tens":    {20 * time.Second, "5", 6666666666 * time.Nanosecond},
	} {
		t.Run(name, func(t *testing.T) {
			if got := autostopEvery(tc.after); got != tc.every {
				t.Errorf("autostopEvery(%s) = %q, want %q", tc.after, got, tc.every)
			}
			if got := renewEvery(tc.after); got != tc.renew {
				t.Errorf("renewEvery(%s) = %s, want %s", tc.after, got, tc.renew)
			}
		})
	}
	for fact, want := range map[string]string{
		"1800 86400": "autostop armed: 30m after taoflow leaves, 24h at most with a job running",
		"5 0":        "autostop armed: 5s after taoflow leaves",
		"0 0":        "",
		"x":          "",
	} {
		if got := AutostopArmed(fact); got != want {
			t.Errorf("AutostopArmed(%q) = %q, want %q", fact, got, want)
		}
	}
	if got := AutostopDir("run-1", "gpu-a"); got != ".taoflow/jobs/autostop.run-1-gpu-a" || strings.HasPrefix(filepath.Base(got), plan.JobPrefix("run-1")) {
		t.Errorf("AutostopDir = %q: want it beside the jobs, under no job prefix", got)
	}
}

// autostopEnv is a local sandbox whose plan gives instance a the autostop
// a, with decisions collected.
func autostopEnv(t *testing.T, a *plan.Autostop) (*env, func() []AutostopDecision) {
	t.Helper()
	var mu sync.Mutex
	var got []AutostopDecision
	e := newEnv(t, func(c *Config) {
		c.Plan = &plan.Plan{Platform: plan.Platform{Kind: plan.PlatformLocal}, Instances: []*plan.Instance{{Name: "a", Autostop: a}}}
		c.OnAutostop = func(instance string, d AutostopDecision) {
			mu.Lock()
			defer mu.Unlock()
			if instance == "a" {
				got = append(got, d)
			}
		}
	})
	return e, func() []AutostopDecision {
		mu.Lock()
		defer mu.Unlock()
		return append([]AutostopDecision(nil), got...)
	}
}

func (e *env) arm(t *testing.T) {
	t.Helper()
	armed, err := e.steps.Arm(t.Context(), e.inst, nil)
	if err != nil || !armed {
		t.Fatalf("Arm = %v, %v; want armed", armed, err)
	}
}

func (e *env) fired() bool {
	_, err := os.Stat(filepath.Join(e.inst.Ref, "stopped"))
	return err == nil
}

func (e *env) decision(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.inst.Ref, AutostopDir("r1", "a"), "decision"))
	if err != nil {
		t.Fatalf("no decision: %v", err)
	}
	return strings.TrimSpace(string(b))
}

const stopCommand = `touch "$HOME/stopped"`

// TestAutostopIdle: taoflow leaves (its renewer stops, as when apply is
// killed) while a job runs; the job finishes; the watchdog fires after
// more, not while the job runs.
func TestAutostopIdle(t *testing.T) {
	t.Parallel()
	e, _ := autostopEnv(t, &plan.Autostop{After: time.Second, Command: stopCommand})
	e.arm(t)
	const id = "tf-r1-train-a"
	e.runJob(t, e.steps, id, with("command", "sleep 3"))
	e.steps.stopRenewer("a") // taoflow is gone
	left := time.Now()
	// The job runs 3 s, well past after (1 s): the watchdog waits for it.
	testrig.Eventually(t, 30*time.Second, "the job to end", func() bool {
		_, err := os.Stat(filepath.Join(e.jobDir(id), "rc"))
		if err != nil && e.fired() {
			t.Fatalf("the watchdog fired %s after taoflow left, while the job still ran", time.Since(left))
		}
		return err == nil
	})
	ended := time.Now()
	testrig.Eventually(t, 30*time.Second, "the watchdog to fire", e.fired)
	if ended.Sub(left) < 2*time.Second {
		t.Errorf("the job ended %s after taoflow left; the test needs it to run past after", ended.Sub(left))
	}
	d, ok := ParseAutostopDecision(e.decision(t))
	if !ok || d.Why != "idle" || d.Age < time.Second {
		t.Errorf("decision %q, want idle with a lease older than after", e.decision(t))
	}
	if _, err := os.Stat(filepath.Join(e.jobDir(id), "canceled")); err == nil {
		t.Errorf("the job that ended by itself is marked canceled")
	}
}

// TestAutostopMaxAfter: a job that runs on is stopped, and the machine
// with it, once max_after passes without a renewal.
func TestAutostopMaxAfter(t *testing.T) {
	t.Parallel()
	e, decisions := autostopEnv(t, &plan.Autostop{After: time.Second, MaxAfter: 2 * time.Second, Command: stopCommand})
	e.arm(t)
	const id = "tf-r1-train-a"
	e.runJob(t, e.steps, id, with("command", "sleep 60"))
	pid := e.jobPid(t, id)
	e.steps.stopRenewer("a")
	testrig.Eventually(t, 30*time.Second, "the watchdog to fire", e.fired)
	d, ok := ParseAutostopDecision(e.decision(t))
	if !ok || d.Why != "max_after" || d.Age < 2*time.Second {
		t.Errorf("decision %q, want max_after with a lease at least 2s old", e.decision(t))
	}
	if groupAlive(t, pid) {
		t.Errorf("the job still runs after max_after fired")
	}
	if _, err := os.Stat(filepath.Join(e.jobDir(id), "canceled")); err != nil {
		t.Errorf("the job stopped by max_after is not marked canceled: %v", err)
	}
	// taoflow comes back: its cleanup reads the decision, and removes the
	// watchdog's directory.
	if err := e.steps.Cleanup(t.Context(), e.inst); err != nil {
		t.Fatal(err)
	}
	if got := decisions(); len(got) != 1 || got[0].Why != "max_after" {
		t.Errorf("decisions read back = %+v, want the max_after one", got)
	}
	if _, err := os.Stat(filepath.Join(e.inst.Ref, AutostopDir("r1", "a"))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the watchdog's directory is left after cleanup: %v", err)
	}
}

// TestAutostopRenewed: a live taoflow renewing the lease keeps the
// watchdog from firing, however long; cleanup disarms it (the watchdog
// process ends, its directory goes).
func TestAutostopRenewed(t *testing.T) {
	t.Parallel()
	// after is 4 s, so a renewal (every third of it) may come 2.6 s late on
	// a loaded machine before the lease looks stale.
	e, _ := autostopEnv(t, &plan.Autostop{After: 4 * time.Second, Command: stopCommand})
	e.arm(t)
	dir := filepath.Join(e.inst.Ref, AutostopDir("r1", "a"))
	pid, err := readPid(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The lease holds the Unix second of its last renewal: wait until the
	// renewals have carried it two and a half afters past the first one
	// (no job runs meanwhile), or the watchdog fired.
	var first int64
	testrig.Eventually(t, 10*time.Second, "a lease to read", func() bool {
		var ok bool
		first, ok = readLease(dir)
		return ok
	})
	testrig.Eventually(t, time.Minute, "the lease renewed for 10 s", func() bool {
		v, ok := readLease(dir)
		return (ok && v-first >= 10) || e.fired()
	})
	if e.fired() {
		t.Fatalf("the watchdog fired while taoflow renewed the lease")
	}
	if !groupAlive(t, pid) {
		t.Fatalf("the watchdog is not running")
	}
	if err := e.steps.Cleanup(t.Context(), e.inst); err != nil {
		t.Fatal(err)
	}
	testrig.Eventually(t, 10*time.Second, "the watchdog to end", func() bool { return !groupAlive(t, pid) })
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the watchdog's directory is left after cleanup: %v", err)
	}
	// Its process group is gone, so nothing of it can run the command
	// later: what fired() says now is final.
	if e.fired() {
		t.Errorf("a disarmed watchdog fired")
	}
}

// readLease reads the Unix second a watchdog's lease in dir was last
// renewed at; false while a renewal is rewriting it.
func readLease(dir string) (int64, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "lease"))
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil
}

// TestAutostopInert: an autostop without a command on a machine the run
// did not create (an ssh host) or a local sandbox arms nothing.
func TestAutostopInert(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{plan.PlatformLocal, plan.PlatformSSH} {
		e := newEnv(t, func(c *Config) {
			c.Plan = &plan.Plan{Platform: plan.Platform{Kind: kind}, Instances: []*plan.Instance{{Name: "a", Autostop: &plan.Autostop{After: time.Second}}}}
		})
		armed, err := e.steps.Arm(t.Context(), e.inst, nil)
		if err != nil || armed {
			t.Errorf("%s: Arm = %v, %v; want nothing armed", kind, armed, err)
		}
		if _, err := os.Stat(filepath.Join(e.inst.Ref, AutostopDir("r1", "a"))); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: a watchdog directory exists: %v", kind, err)
		}
	}
}

package steps

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
)

// Autostop (docs/design.md §8.8): at the end of preflight an instance with
// an autostop gets a watchdog (scripts/autostop-watchdog.sh) in a session
// of its own, under AutostopDir, holding a lease that a renewer goroutine
// of this process renews through the platform's transport. When taoflow
// is gone (killed, asleep, cut off) the lease ages; the watchdog stops the
// run's jobs and runs the autostop command once it is older than after
// with no job running, or older than max_after whatever runs. Cleanup
// disarms it (kills it, removes its directory) before the instance is
// deleted or let go.

// Node facts of a preflight that armed an autostop.
const (
	// RecordAutostop is "AFTER MAX_AFTER", whole seconds (0: no
	// max_after): the autostop armed on the node's instance.
	RecordAutostop = "autostop"
	// RecordAutostopFired is the watchdog's decision as taoflow read it
	// back ("EPOCH WHY AGE", ParseAutostopDecision).
	RecordAutostopFired = "autostop_fired"
)

// AutostopDir is the watchdog's directory for instance of run, relative
// to the instance's $HOME: beside the run's job directories, under a name
// that no job prefix (tf-) matches.
func AutostopDir(run, instance string) string {
	return jobsDir + "/autostop." + strings.TrimPrefix(plan.JobPrefix(run), "tf-") + instance
}

// autostopEvery is how often the watchdog looks at its lease, in seconds
// as sleep reads them: a quarter of after, between 0.2 s and 30 s.
func autostopEvery(after time.Duration) string {
	d := min(max(after/4, 200*time.Millisecond), 30*time.Second)
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}

// renewEvery is how often taoflow renews a lease: a third of after (so a
// renewal lost to the network is not a lapse), at most a minute, at
// least 100 ms.
func renewEvery(after time.Duration) time.Duration {
	return min(max(after/3, 100*time.Millisecond), time.Minute)
}

// wholeSeconds rounds d up to whole seconds, at least 1: the lease is
// read with date +%s.
func wholeSeconds(d time.Duration) int64 {
	return max(1, int64(math.Ceil(d.Seconds())))
}

// AutostopArmed renders the fact RecordAutostop as status shows it:
// "autostop armed: 30m after taoflow leaves, 24h at most with a job
// running"; "" for a fact it cannot read.
func AutostopArmed(fact string) string {
	f := strings.Fields(fact)
	if len(f) != 2 {
		return ""
	}
	after, err1 := strconv.ParseInt(f[0], 10, 64)
	most, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil || after <= 0 || most < 0 {
		return ""
	}
	a := plan.Autostop{After: time.Duration(after) * time.Second, MaxAfter: time.Duration(most) * time.Second}
	return "autostop armed: " + a.Describe()
}

// AutostopDecision is what a watchdog decided when it fired.
type AutostopDecision struct {
	At time.Time // when it fired, by the instance's clock
	// Why is idle (the lease expired with no job running), max_after
	// (the ceiling passed, jobs stopped) or stopped (taoflow found the
	// instance stopped with the autostop armed, and could not read more).
	Why string
	Age time.Duration // how old the lease was
}

// ParseAutostopDecision reads "EPOCH WHY AGE".
func ParseAutostopDecision(line string) (AutostopDecision, bool) {
	f := strings.Fields(line)
	if len(f) != 3 {
		return AutostopDecision{}, false
	}
	at, err1 := strconv.ParseInt(f[0], 10, 64)
	age, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || at <= 0 || age < 0 {
		return AutostopDecision{}, false
	}
	switch f[1] {
	case "idle", "max_after", "stopped":
	default:
		return AutostopDecision{}, false
	}
	return AutostopDecision{At: time.Unix(at, 0).UTC(), Why: f[1], Age: time.Duration(age) * time.Second}, true
}

// Fact is the decision as RecordAutostopFired holds it.
func (d AutostopDecision) Fact() string {
	return fmt.Sprintf("%d %s %d", d.At.Unix(), d.Why, int64(d.Age/time.Second))
}

func (d AutostopDecision) String() string {
	at := d.At.Format(time.RFC3339)
	switch d.Why {
	case "idle":
		return fmt.Sprintf("stopped itself at %s (lease expired: not renewed for %s, no job running)", at, d.Age)
	case "max_after":
		return fmt.Sprintf("stopped itself at %s (max_after: lease not renewed for %s, the run's jobs stopped)", at, d.Age)
	}
	return fmt.Sprintf("found stopped at %s with its autostop armed: it stopped itself (lease expired or max_after passed)", at)
}

// autostopFor returns the autostop of the plan's instance name and the
// command its watchdog runs; a nil autostop when it has none or it would
// do nothing (no command).
func (s *Steps) autostopFor(name string) (*plan.Autostop, string) {
	if s.cfg.Plan == nil {
		return nil, ""
	}
	pi := s.cfg.Plan.Instance(name)
	if pi == nil || pi.Autostop == nil || pi.Autostop.After <= 0 {
		return nil, ""
	}
	cmd := pi.AutostopCommand(s.cfg.Plan.Platform.Kind)
	if cmd == "" {
		return nil, ""
	}
	return pi.Autostop, cmd
}

// Armed reports whether the plan gives instance name an autostop that
// preflight arms.
func (s *Steps) Armed(name string) bool {
	a, _ := s.autostopFor(name)
	return a != nil
}

// watchdogScript is the watchdog's text for inst (procfuncs and
// scripts/autostop-watchdog.sh, its parameters set).
func (s *Steps) watchdogScript(inst platform.Instance, a *plan.Autostop, cmd string) string {
	var most int64
	if a.MaxAfter > 0 {
		most = wholeSeconds(a.MaxAfter)
	}
	runsContainers := s.cfg.Plan == nil || s.cfg.Plan.RunsContainers()
	return script(Params{
		"tf_limit":          strconv.Itoa(int(defaultTermGrace / (100 * time.Millisecond))),
		"tf_jobs":           jobsDir,
		"tf_prefix":         plan.JobPrefix(s.cfg.RunID),
		"tf_run":            s.cfg.RunID,
		"tf_instance":       inst.Name,
		"tf_dir":            AutostopDir(s.cfg.RunID, inst.Name),
		"tf_after":          strconv.FormatInt(wholeSeconds(a.After), 10),
		"tf_max_after":      strconv.FormatInt(most, 10),
		"tf_every":          autostopEvery(a.After),
		"tf_command":        cmd,
		"tf_docker":         boolParam(runsContainers),
		"tf_run_label":      labelRun + "=" + s.cfg.RunID,
		"tf_instance_label": labelInstance + "=" + inst.Name,
		"tf_grace":          strconv.Itoa(int(defaultTermGrace / time.Second)),
	}, "procfuncs", "autostop-watchdog")
}

// armScript installs and starts the watchdog (scripts/autostop-arm.sh).
func (s *Steps) armScript(inst platform.Instance, a *plan.Autostop, cmd string) string {
	return script(Params{
		"tf_limit":       "1",
		"tf_dir":         AutostopDir(s.cfg.RunID, inst.Name),
		"tf_watchdog":    s.watchdogScript(inst, a, cmd),
		"tf_exit_setsid": strconv.Itoa(exitSetsid),
	}, "procfuncs", "autostop-arm")
}

// Arm installs inst's watchdog (replacing one armed before) and starts
// renewing its lease, when the plan gives inst an autostop with a
// command; it does nothing otherwise. Preflight arms at its end; a resumed
// run arms again the instances it takes back. log, when not nil, is told.
func (s *Steps) Arm(ctx context.Context, inst platform.Instance, log io.Writer) (armed bool, err error) {
	a, cmd := s.autostopFor(inst.Name)
	if a == nil {
		return false, nil
	}
	log = logOrDiscard(log)
	res, err := s.exec(ctx, inst, s.armScript(inst, a, cmd), nil)
	switch {
	case err != nil:
		return false, s.fail(ClassNotReachable, err, "arming the autostop of %s: %v", inst.Name, err)
	case res.ExitCode == exitSetsid:
		return false, s.fail(ClassInvalidConfig, nil, "cannot arm the autostop of %s: %s", inst.Name, s.lastLine(res.Stderr))
	case res.ExitCode != 0:
		return false, s.fail(ClassNotReachable, nil, "arming the autostop of %s failed (exit code %d): %s", inst.Name, res.ExitCode, s.lastLine(res.Stderr))
	}
	for _, l := range s.decisions(inst.Name, outputLines(res.Stdout)) {
		if !strings.HasPrefix(l, "armed ") {
			fmt.Fprintln(log, l)
		}
	}
	fmt.Fprintf(log, "autostop armed on %s: it stops itself %s (%s); taoflow renews its lease every %s\n",
		inst.Name, a.Describe(), s.redact.Redact(cmd), renewEvery(a.After).Round(time.Millisecond))
	s.startRenewer(inst, a.After)
	return true, nil
}

// armedFact is RecordAutostop's value for a.
func armedFact(a *plan.Autostop) string {
	var most int64
	if a.MaxAfter > 0 {
		most = wholeSeconds(a.MaxAfter)
	}
	return fmt.Sprintf("%d %d", wholeSeconds(a.After), most)
}

// armAutostop is preflight's last act: Arm, and the fact that it did.
func (s *Steps) armAutostop(ctx context.Context, req Request) error {
	armed, err := s.Arm(ctx, req.Instance, req.Log)
	if err != nil || !armed {
		return err
	}
	if a, _ := s.autostopFor(req.Instance.Name); a != nil && req.Record != nil {
		req.Record(RecordAutostop, armedFact(a))
	}
	return nil
}

// renewers are the lease renewers of the armed instances, by instance
// name: each stop function ends its goroutine and waits for it.
type renewers struct {
	mu   sync.Mutex
	stop map[string]func()
}

// startRenewer starts renewing inst's lease every renewEvery(after),
// replacing a renewer it had.
func (s *Steps) startRenewer(inst platform.Instance, after time.Duration) {
	s.stopRenewer(inst.Name)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	s.renew.mu.Lock()
	if s.renew.stop == nil {
		s.renew.stop = map[string]func(){}
	}
	s.renew.stop[inst.Name] = func() { cancel(); <-done }
	s.renew.mu.Unlock()
	every := renewEvery(after)
	renew := script(Params{"tf_dir": AutostopDir(s.cfg.RunID, inst.Name)}, "autostop-renew")
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			rctx, rcancel := context.WithTimeout(ctx, max(every, 10*time.Second))
			res, err := s.cfg.Platform.Exec(rctx, inst, renew, nil)
			rcancel()
			if err != nil || res.ExitCode != 0 {
				continue // the next tick tries again
			}
			// Line by line: a transport may print lines of its own
			// (brev exec echoes the instance's name).
			for _, l := range outputLines(res.Stdout) {
				if l == "@gone" {
					return
				}
				if line, ok := strings.CutPrefix(l, "@decision "); ok {
					s.noteDecision(inst.Name, line)
					return
				}
			}
		}
	}()
}

// stopRenewer stops renewing the lease of instance name.
func (s *Steps) stopRenewer(name string) {
	s.renew.mu.Lock()
	stop := s.renew.stop[name]
	delete(s.renew.stop, name)
	s.renew.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// stopRenewers stops every renewer (Close).
func (s *Steps) stopRenewers() {
	s.renew.mu.Lock()
	names := make([]string, 0, len(s.renew.stop))
	for n := range s.renew.stop {
		names = append(names, n)
	}
	s.renew.mu.Unlock()
	for _, n := range names {
		s.stopRenewer(n)
	}
}

// noteDecision hands a decision line read back from a watchdog to
// Config.OnAutostop.
func (s *Steps) noteDecision(instance, line string) {
	d, ok := ParseAutostopDecision(line)
	if ok && s.cfg.OnAutostop != nil {
		s.cfg.OnAutostop(instance, d)
	}
}

// decisions takes the watchdog's "@decision ..." line out of a cleanup's
// output lines, handing it to Config.OnAutostop and putting in its place
// what it says.
func (s *Steps) decisions(instance string, lines []string) []string {
	out := lines[:0]
	for _, l := range lines {
		line, ok := strings.CutPrefix(l, "@decision ")
		if !ok {
			out = append(out, l)
			continue
		}
		s.noteDecision(instance, line)
		if d, ok := ParseAutostopDecision(line); ok {
			out = append(out, "autostop: "+instance+" "+d.String())
		}
	}
	return out
}

package steps

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/taoflow/taoflow/internal/progress"
	"github.com/taoflow/taoflow/internal/testrig"
	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
	"github.com/taoflow/taoflow/platform/local"
	"github.com/taoflow/taoflow/secret"
)

// tick is the poll interval of every test.
const tick = 20 * time.Millisecond

// env is a local sandbox instance with the steps of run "r1" on it.
type env struct {
	local *local.Local
	inst  platform.Instance
	steps *Steps
	made  []*Steps // every Steps newSteps made, closed at the end
}

// newEnv creates sandbox "a" of run r1 and registers a cleanup that kills
// every job process group left in it.
func newEnv(t *testing.T, mod ...func(*Config)) *env {
	t.Helper()
	l := local.New(t.TempDir())
	inst, err := l.Create(context.Background(), "r1", platform.Spec{Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{local: l, inst: inst}
	// Before the sandbox is removed: no watcher and no job's supervisor
	// may still write into it (a supervisor appends its @end line just
	// after rc, which a wait may already have read).
	t.Cleanup(func() {
		for _, s := range e.made {
			s.Close()
		}
		killJobs(inst)
		waitJobsGone(t, inst)
	})
	e.steps = e.newSteps("r1", mod...)
	return e
}

// waitJobsGone waits until no live process is left in the group of any
// job in inst's sandbox.
func waitJobsGone(t *testing.T, inst platform.Instance) {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(inst.Ref, jobsDir, "*"))
	testrig.Eventually(t, 30*time.Second, "the jobs' processes to end", func() bool {
		for _, d := range dirs {
			if pid, err := readPid(d); err == nil && pid > 1 && len(testrig.GroupMembers(pid)) > 0 {
				return false
			}
		}
		return true
	})
}

func (e *env) newSteps(run string, mod ...func(*Config)) *Steps {
	// A plan without containers: Cleanup of run "r1" must not touch the
	// containers of other test binaries' runs that happen to be named r1.
	cfg := Config{Platform: e.local, RunID: run, PollInterval: tick, Plan: &plan.Plan{}}
	for _, m := range mod {
		m(&cfg)
	}
	s := New(cfg)
	s.process.(*process).termGrace = 300 * time.Millisecond // tests need not wait 5s for KILL
	e.made = append(e.made, s)
	return s
}

// killJobs kills the process group of every job in inst's sandbox.
func killJobs(inst platform.Instance) {
	dirs, _ := filepath.Glob(filepath.Join(inst.Ref, jobsDir, "*"))
	for _, d := range dirs {
		if pid, err := readPid(d); err == nil && pid > 1 {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
}

func readPid(dir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

func (e *env) jobDir(id string) string { return filepath.Join(e.inst.Ref, jobsDir, id) }

func (e *env) jobPid(t *testing.T, id string) int {
	t.Helper()
	pid, err := readPid(e.jobDir(id))
	if err != nil {
		t.Fatalf("job %s has no pid: %v", id, err)
	}
	return pid
}

// groupAlive reports whether a live (not zombie) process is in group pgid;
// this host's init does not reap orphans, so zombies stay.
func groupAlive(t *testing.T, pgid int) bool {
	t.Helper()
	return len(testrig.GroupMembers(pgid)) > 0
}

// with builds a with: mapping from key, value pairs: a string, int, bool
// or []string value.
func with(pairs ...any) *plan.Value {
	m := &plan.Value{Kind: plan.Map}
	for i := 0; i+1 < len(pairs); i += 2 {
		m.Fields = append(m.Fields, plan.Field{Key: pairs[i].(string), Value: value(pairs[i+1])})
	}
	return m
}

func value(v any) *plan.Value {
	switch x := v.(type) {
	case string:
		return &plan.Value{Kind: plan.Scalar, Tag: "!!str", Text: x}
	case int:
		return &plan.Value{Kind: plan.Scalar, Tag: "!!int", Text: strconv.Itoa(x)}
	case bool:
		return &plan.Value{Kind: plan.Scalar, Tag: "!!bool", Text: strconv.FormatBool(x)}
	case []string:
		l := &plan.Value{Kind: plan.List}
		for _, s := range x {
			l.Items = append(l.Items, value(s))
		}
		return l
	}
	panic(fmt.Sprintf("with: unsupported value %T", v))
}

// logBuf is a node log safe to read while a step writes it.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// progressLog records progress lines.
type progressLog struct {
	mu     sync.Mutex
	lines  []string
	points []progress.Point
}

func (p *progressLog) add(r progress.Report) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r.Line != "" {
		p.lines = append(p.lines, r.Line)
	}
	p.points = append(p.points, r.Points...)
}

// series is every point reported, as "job metric epoch=value" lines.
func (p *progressLog) series() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, pt := range p.points {
		e := "-"
		if pt.Epoch != nil {
			e = strconv.FormatFloat(*pt.Epoch, 'g', -1, 64)
		}
		if pt.Time.IsZero() {
			e += " (no time)"
		}
		out = append(out, fmt.Sprintf("%s %s %s=%g", pt.Job, pt.Metric, e, pt.Value))
	}
	return out
}

func (p *progressLog) get() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// runJob launches command as job id through a run step.
func (e *env) runJob(t *testing.T, s *Steps, id string, w *plan.Value) *logBuf {
	t.Helper()
	log := &logBuf{}
	err := s.Do(t.Context(), Request{
		NodeID: "train@a", Step: &plan.Step{ID: "train", Uses: plan.KindRun},
		Instance: e.inst, With: w, JobID: id, Log: log,
	})
	if err != nil {
		t.Fatalf("run %s: %v\nlog:\n%s", id, err, log)
	}
	return log
}

// waitJobs runs a wait step for jobs.
func (e *env) waitJobs(ctx context.Context, s *Steps, w *plan.Value, jobs ...Job) (*logBuf, *progressLog, error) {
	log, prog := &logBuf{}, &progressLog{}
	err := s.Do(ctx, Request{
		NodeID: "wait@a", Step: &plan.Step{ID: "wait", Uses: plan.KindWait},
		Instance: e.inst, With: w, Jobs: jobs, Log: log, Progress: prog.add,
	})
	return log, prog, err
}

// stepError returns err's *Error, failing the test when there is none.
func stepError(t *testing.T, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *steps.Error", err, err)
	}
	return e
}

func testSecrets(t *testing.T, kv ...string) *secret.Set {
	t.Helper()
	m := map[string]string{}
	var names []string
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
		names = append(names, kv[i])
	}
	set, err := secret.Resolve(names, func(n string) (string, bool) { v, ok := m[n]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	return set
}

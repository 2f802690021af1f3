//go:build linux

package steps

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taoflow/taoflow/internal/shellquote"
	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
	"github.com/taoflow/taoflow/platform/local"
)

// BenchmarkProcessJob measures what one host-process job costs the
// instance, verb by verb, on the local platform (the same scripts go over
// ssh and brev):
//
//	launch   submit a job (its command is the builtin :, so what is
//	         counted is taoflow's launcher and supervisor, not the job)
//	poll     one status round trip for a running job with a results
//	         directory, nothing new in its log
//	collect  the status round trip that sees a job's end: its rc and its
//	         last 4 KiB of log
//	poll50   one status round trip for 50 running jobs (figures per job)
//
// Besides ns/op (the wall time of the verb, per job), each reports
// execs/job and forks/job, counted by running one extra call under
// `strace -f -e trace=execve,fork,vfork,clone,clone3` (the launched
// supervisor included: strace follows it until it exits), and
// cpu-ms/job, the user+system CPU of every process the verb started
// (getrusage of the children, with this process made a child subreaper
// so that the detached supervisor is counted too).
func BenchmarkProcessJob(b *testing.B) {
	if _, err := exec.LookPath("strace"); err != nil {
		b.Fatal("strace is needed to count processes (apt-get install strace)")
	}
	subreaper(b)
	b.Run("launch", func(b *testing.B) {
		e := newBenchEnv(b)
		n := 0
		launch := func(pl platform.Platform) {
			n++
			s := e.steps(pl)
			err := s.Do(context.Background(), Request{
				NodeID: "train@a", Step: &plan.Step{ID: "train", Uses: plan.KindRun},
				Instance: e.inst, With: with("command", ":"), JobID: fmt.Sprintf("tf-r1-t.c%d", n), Log: io.Discard,
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		e.measure(b, 1, launch)
	})
	b.Run("poll", func(b *testing.B) {
		e := newBenchEnv(b)
		probes := e.running(b, 1)
		e.measure(b, 1, func(pl platform.Platform) { e.poll(b, pl, probes, stateRunning) })
	})
	b.Run("collect", func(b *testing.B) {
		e := newBenchEnv(b)
		err := e.steps(e.local).Do(context.Background(), Request{
			NodeID: "train@a", Step: &plan.Step{ID: "train", Uses: plan.KindRun},
			Instance: e.inst, With: with("command", "head -c 4096 /dev/zero; exit 3"), JobID: "tf-r1-t.done", Log: io.Discard,
		})
		if err != nil {
			b.Fatal(err)
		}
		probes := []probe{{ID: "tf-r1-t.done", Results: "~/res"}}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if _, err := os.Stat(filepath.Join(e.inst.Ref, jobsDir, "tf-r1-t.done", "rc")); err == nil {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("the job did not end within 10s")
			}
		}
		e.measure(b, 1, func(pl platform.Platform) { e.poll(b, pl, probes, stateExited) })
	})
	b.Run("poll50", func(b *testing.B) {
		e := newBenchEnv(b)
		probes := e.running(b, 50)
		e.measure(b, 50, func(pl platform.Platform) { e.poll(b, pl, probes, stateRunning) })
	})
}

type benchEnv struct {
	local *local.Local
	inst  platform.Instance
	trace string
}

func newBenchEnv(b *testing.B) *benchEnv {
	l := local.New(b.TempDir())
	inst, err := l.Create(context.Background(), "r1", platform.Spec{Name: "a"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { killJobs(inst) })
	if err := os.MkdirAll(filepath.Join(inst.Ref, "res"), 0o700); err != nil {
		b.Fatal(err)
	}
	st := `{"epoch": 1, "max_epoch": 10, "loss": 0.5}` + "\n"
	if err := os.WriteFile(filepath.Join(inst.Ref, "res", "status.json"), []byte(st), 0o600); err != nil {
		b.Fatal(err)
	}
	return &benchEnv{local: l, inst: inst, trace: filepath.Join(b.TempDir(), "trace")}
}

func (e *benchEnv) steps(pl platform.Platform) *Steps {
	return New(Config{Platform: pl, RunID: "r1", Plan: &plan.Plan{}})
}

// running launches n jobs that sleep, and returns their probes.
func (e *benchEnv) running(b *testing.B, n int) []probe {
	var probes []probe
	for i := range n {
		id := fmt.Sprintf("tf-r1-t.r%d", i)
		err := e.steps(e.local).Do(context.Background(), Request{
			NodeID: "train@a", Step: &plan.Step{ID: "train", Uses: plan.KindRun},
			Instance: e.inst, With: with("command", "echo started; exec sleep 600"), JobID: id, Log: io.Discard,
		})
		if err != nil {
			b.Fatal(err)
		}
		probes = append(probes, probe{ID: id, Results: "~/res", Offset: int64(len("started\n"))})
	}
	// The status.json is newer than the jobs: shown.
	later := time.Now().Add(time.Second)
	if err := os.Chtimes(filepath.Join(e.inst.Ref, "res", "status.json"), later, later); err != nil {
		b.Fatal(err)
	}
	return probes
}

func (e *benchEnv) poll(b *testing.B, pl platform.Platform, probes []probe, want jobState) {
	obs, err := e.steps(pl).process.status(context.Background(), e.inst, probes)
	if err != nil {
		b.Fatal(err)
	}
	for i, o := range obs {
		if o.State != want || (want == stateRunning && (len(o.Log) != 0 || o.Status == "")) || (want == stateExited && (o.Code != 3 || len(o.Log) != 4096)) {
			b.Fatalf("job %d: %+v, want %s", i, o, want)
		}
	}
}

// measure runs verb twice to warm up, once under strace to count its
// processes, then b.N times for its time and CPU, and reports them per job
// (jobs per call). TAOFLOW_BENCH_TRACE=1 logs the traced execve calls.
func (e *benchEnv) measure(b *testing.B, jobs int, verb func(platform.Platform)) {
	// What happens once per instance is not counted: the first call
	// makes ~/.taoflow/jobs, the second makes ~/.taoflow private.
	verb(e.local)
	verb(e.local)
	verb(&tracing{Platform: e.local, file: e.trace})
	execs, forks := countTrace(b, e.trace)
	reap()
	before := childCPU()
	b.ResetTimer()
	for b.Loop() {
		verb(e.local)
	}
	b.StopTimer()
	time.Sleep(200 * time.Millisecond) // the last supervisors end
	reap()
	cpu := childCPU() - before
	per := float64(b.N * jobs)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/per, "ns/job")
	b.ReportMetric(float64(execs)/float64(jobs), "execs/job")
	b.ReportMetric(float64(forks)/float64(jobs), "forks/job")
	b.ReportMetric(float64(cpu.Microseconds())/1000/per, "cpu-ms/job")
}

// tracing runs every script under strace, writing the trace to file.
type tracing struct {
	platform.Platform
	file string
}

func (t *tracing) Exec(ctx context.Context, inst platform.Instance, script string, stdin io.Reader) (platform.Result, error) {
	wrapped := "exec strace -f -qq -o " + shellquote.Quote(t.file) +
		" -e trace=execve,fork,vfork,clone,clone3 -- /bin/sh -c " + shellquote.Quote(script)
	return t.Platform.Exec(ctx, inst, wrapped, stdin)
}

// countTrace counts the successful execve calls (less the traced shell's
// own) and the new processes (clones that are not threads) in a trace.
func countTrace(b *testing.B, file string) (execs, forks int) {
	f, err := os.Open(file)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		if os.Getenv("TAOFLOW_BENCH_TRACE") != "" && strings.Contains(l, "execve") {
			b.Log(l)
		}
		switch {
		case strings.Contains(l, "execve(") && strings.HasSuffix(l, "= 0"),
			strings.Contains(l, "<... execve resumed>") && strings.HasSuffix(l, "= 0"):
			execs++
		case strings.Contains(l, "CLONE_THREAD"):
		case strings.Contains(l, "resumed>"):
		case strings.Contains(l, " clone(") || strings.Contains(l, " clone3(") || strings.Contains(l, " fork(") || strings.Contains(l, " vfork("):
			forks++
		}
	}
	return execs - 1, forks
}

// subreaper makes this process the reaper of orphans (the detached job
// supervisors), so that their CPU counts in childCPU once reaped.
func subreaper(b *testing.B) {
	const prSetChildSubreaper = 36
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		b.Fatalf("prctl(PR_SET_CHILD_SUBREAPER): %v", errno)
	}
	b.Cleanup(func() { _, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 0, 0) })
}

// reap collects the orphans that have exited (never a child os/exec still
// waits for: the benchmark runs one command at a time).
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

func childCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

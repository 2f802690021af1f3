package main

import (
	"context"
	"fmt"
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/taoflow/taoflow/platform/brev/brevtest"
	"github.com/taoflow/taoflow/state"
)

// benchApply runs `taoflow ARGS` in this process (applyCLI) and fails b
// unless it exits 0.
func benchApply(b *testing.B, args ...string) {
	b.Helper()
	if code, out, errOut := applyCLI(b, args...); code != 0 {
		b.Fatalf("taoflow %s: exit %d\n%s\n%s", strings.Join(args, " "), code, out, errOut)
	}
}

// timed runs f and returns how long it took.
func timed(f func()) time.Duration {
	t0 := time.Now()
	f()
	return time.Since(t0)
}

// sweepJobs is the size of BenchmarkSweep100: jobs of `sleep 0.1`, run
// sweepSlots at a time.
const (
	sweepJobs  = 100
	sweepSlots = 10
)

// BenchmarkSweep100 runs 100 jobs of `sleep 0.1`, 10 at a time, three
// ways in the same iteration: `make -j10` (a Makefile of 100 targets),
// go-task (`task --concurrency 10`, a Taskfile whose default task depends
// on 100 tasks) and `taoflow apply` (a 100-cell matrix of run + wait on
// one local instance with 10 slots, wait's interval the default 10s, so
// every job's end is noticed by the instance's watcher, not a poll). It
// reports each one's seconds per sweep and taoflow's ratio to make.
// `make bench` installs task; see docs/benchmarks.md.
func BenchmarkSweep100(b *testing.B) {
	taskBin, err := exec.LookPath("task")
	if err != nil {
		// go install puts it in GOPATH/bin, which may not be on PATH.
		taskBin, err = exec.LookPath(filepath.Join(build.Default.GOPATH, "bin", "task"))
	}
	if err != nil {
		b.Fatalf("go-task is not installed (make bench installs it: go install github.com/go-task/task/v3/cmd/task@v3.54.0): %v", err)
	}
	makeBin, err := exec.LookPath("make")
	if err != nil {
		b.Fatalf("make is not installed: %v", err)
	}
	dir := b.TempDir()
	b.Chdir(dir)
	var mk, task, plan strings.Builder
	mk.WriteString("all:")
	task.WriteString("version: '3'\ntasks:\n  default:\n    deps: [")
	plan.WriteString("taoflow: 1\nname: sweep\nplatform: local\ninstances: {box: {slots: " + strconv.Itoa(sweepSlots) + "}}\nsteps:\n  - id: job\n    uses: run\n    matrix: {n: [")
	for i := 1; i <= sweepJobs; i++ {
		sep := ", "
		if i == 1 {
			sep = ""
		}
		fmt.Fprintf(&mk, " j%d", i)
		fmt.Fprintf(&task, "%sj%d", sep, i)
		fmt.Fprintf(&plan, "%s%d", sep, i)
	}
	mk.WriteString("\n")
	for i := 1; i <= sweepJobs; i++ {
		fmt.Fprintf(&mk, "j%d:\n\tsleep 0.1\n", i)
	}
	mk.WriteString(".PHONY: all")
	for i := 1; i <= sweepJobs; i++ {
		fmt.Fprintf(&mk, " j%d", i)
	}
	mk.WriteString("\n")
	task.WriteString("]\n")
	for i := 1; i <= sweepJobs; i++ {
		fmt.Fprintf(&task, "  j%d: {cmds: [sleep 0.1]}\n", i)
	}
	plan.WriteString("]}\n    with: {command: sleep 0.1}\n  - id: wait\n    uses: wait\n    needs: [job]\n    matrix: inherit\nfinally:\n  - id: teardown\n    uses: delete\n")
	for name, text := range map[string]string{"Makefile": mk.String(), "Taskfile.yml": task.String(), "sweep.yaml": plan.String()} {
		if err := os.WriteFile(name, []byte(text), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	runCmd := func(name string, args ...string) {
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			b.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	var tMake, tTask, tTaoflow time.Duration
	for b.Loop() {
		tMake += timed(func() { runCmd(makeBin, "-s", "-j"+strconv.Itoa(sweepSlots)) })
		tTask += timed(func() { runCmd(taskBin, "--silent", "--concurrency", strconv.Itoa(sweepSlots)) })
		tTaoflow += timed(func() { benchApply(b, "apply", "--output", "plain", "sweep.yaml") })
	}
	n := float64(b.N)
	b.ReportMetric(tMake.Seconds()/n, "make-s")
	b.ReportMetric(tTask.Seconds()/n, "task-s")
	b.ReportMetric(tTaoflow.Seconds()/n, "taoflow-s")
	b.ReportMetric(tTaoflow.Seconds()/tMake.Seconds(), "taoflow/make")
}

// BenchmarkDeleteAfterLastNode: a brev instance (the fake brev, reached
// through a real sshd) runs one job of `sleep 0.5`, waited for with the
// default interval (10s); the figures are how long after the job's end
// and after the instance's last node (the wait) the `brev delete` of the
// instance was issued, per run.
func BenchmarkDeleteAfterLastNode(b *testing.B) {
	f, dir := brevEnv(b, brevtest.Options{})
	const text = `taoflow: 1
name: del
platform: {kind: brev}
vars: {out: ""}
instances:
  gpu: {create: {type: g5.xlarge}}
steps:
  - id: train
    uses: run
    with: {command: "sleep 0.5; date +%s.%N > ${{ vars.out }}"}
  - id: wait
    uses: wait
    needs: [train]
    with: {timeout: 10m}
finally:
  - id: teardown
    uses: delete
`
	if err := os.WriteFile("del.yaml", []byte(text), 0o600); err != nil {
		b.Fatal(err)
	}
	var afterJob, afterNode []time.Duration
	for b.Loop() {
		// The sandboxes are this machine's directories: the job writes
		// its end time where the benchmark reads it.
		benchApply(b, "apply", "--yes", "--output", "plain", "--var", "out="+filepath.Join(dir, "ended"), "del.yaml")
		st, err := state.OpenReadOnly(filepath.Join(dir, ".taoflow"))
		if err != nil {
			b.Fatal(err)
		}
		r, err := st.LatestRun(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		nodes, err := st.Nodes(context.Background(), r.ID)
		_ = st.Close()
		if err != nil {
			b.Fatal(err)
		}
		var last time.Time
		for _, n := range nodes {
			if n.ID == "wait@gpu" {
				last = n.EndedAt
			}
		}
		var deleted time.Time
		for _, c := range f.Calls() {
			if len(c.Args) > 1 && c.Args[0] == "delete" {
				deleted = c.Start
			}
		}
		if last.IsZero() || deleted.IsZero() {
			b.Fatalf("no wait node end (%v) or no delete call (%v)", last, deleted)
		}
		ended, err := os.ReadFile(filepath.Join(dir, "ended"))
		if err != nil {
			b.Fatalf("the job's end time: %v", err)
		}
		sec, err := strconv.ParseFloat(strings.TrimSpace(string(ended)), 64)
		if err != nil {
			b.Fatal(err)
		}
		jobEnd := time.Unix(0, int64(sec*1e9))
		afterJob = append(afterJob, deleted.Sub(jobEnd))
		afterNode = append(afterNode, deleted.Sub(last))
	}
	b.ReportMetric(median(afterJob).Seconds(), "job-end-to-delete-s")
	b.ReportMetric(median(afterNode).Seconds(), "last-node-to-delete-s")
	b.ReportMetric(slices.Max(afterNode).Seconds(), "max-last-node-to-delete-s")
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

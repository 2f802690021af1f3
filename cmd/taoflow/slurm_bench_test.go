package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/taoflow/taoflow/internal/testrig"
)

// slurmBenchCells is how many `sleep 1` cells BenchmarkSlurmSweep runs
// (TAOFLOW_SLURM_BENCH_CELLS overrides it; the figure is 200).
func slurmBenchCells() int {
	if n, err := strconv.Atoi(os.Getenv("TAOFLOW_SLURM_BENCH_CELLS")); err == nil && n > 0 {
		return n
	}
	return 200
}

// slurmBenchInterval is the wait's interval in BenchmarkSlurmSweep's plan
// (TAOFLOW_SLURM_BENCH_INTERVAL overrides it: 10s is a wait's default);
// the hand-written loop asks squeue every second whatever it is.
func slurmBenchInterval() string {
	if d, err := time.ParseDuration(os.Getenv("TAOFLOW_SLURM_BENCH_INTERVAL")); err == nil && d > 0 {
		return d.String()
	}
	return "1s"
}

// slurmBenchSubmit is how many held jobs BenchmarkSlurmSweep submits, one
// by one and as one array (TAOFLOW_SLURM_BENCH_SUBMIT overrides it; the
// issue's figure is 500).
func slurmBenchSubmit() int {
	if n, err := strconv.Atoi(os.Getenv("TAOFLOW_SLURM_BENCH_SUBMIT")); err == nil && n > 0 {
		return n
	}
	return 500
}

// slurmCounters puts in front of PATH a directory of shims for the Slurm
// commands that log each call's name to a file, then run the real one;
// count returns the calls logged since the last count, by command.
func slurmCounters(b *testing.B) (count func() map[string]int) {
	dir := b.TempDir()
	log := filepath.Join(dir, "calls")
	for _, c := range []string{"sbatch", "squeue", "scontrol", "scancel", "sinfo"} {
		real, err := exec.LookPath(c)
		if err != nil {
			b.Fatal(err)
		}
		shim := fmt.Sprintf("#!/bin/sh\necho %s >> %s\nexec %s \"$@\"\n", c, log, real)
		if err := os.WriteFile(filepath.Join(dir, c), []byte(shim), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	b.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return func() map[string]int {
		data, _ := os.ReadFile(log)
		_ = os.Remove(log)
		calls := map[string]int{}
		for _, c := range strings.Fields(string(data)) {
			calls[c]++
		}
		return calls
	}
}

// BenchmarkSlurmSweep runs N cells of `sleep 1` on the test rig's
// single-node Slurm cluster, `slots` = 8, two ways in the
// same iteration: `taoflow apply` (a run + wait matrix on one pool, wait
// polling every second: one squeue per poll for all the jobs) and what a
// user would write by hand, one `sbatch --array=0-(N-1)%SLOTS` and a loop
// of `squeue` every second until the array is gone. It reports each
// one's makespan and taoflow's ratio to the hand-written script, the
// Slurm commands each ran (counted by shims in front of PATH), and the
// submit time of 500 held jobs as 500 sbatch calls against one array. No
// figure is asserted (docs/benchmarks.md).
func BenchmarkSlurmSweep(b *testing.B) {
	cluster := testrig.StartSlurm(b)
	b.Setenv("SLURM_CONF", cluster.Conf)
	count := slurmCounters(b)
	n, slots, held := slurmBenchCells(), min(8, cluster.CPUs), slurmBenchSubmit()
	dir := b.TempDir()
	cells := make([]string, n)
	for i := range cells {
		cells[i] = strconv.Itoa(i)
	}
	planFile := filepath.Join(dir, "bench.yaml")
	plan := fmt.Sprintf(`taoflow: 1
name: slurmbench
platform: {kind: slurm, workdir: %s/work}
instances:
  p: {slots: %d}
steps:
  - id: train
    uses: run
    matrix: {i: [%s]}
    with: {command: "sleep 1"}
  - {id: wait, uses: wait, needs: [train], matrix: inherit, with: {interval: %s}}
`, dir, slots, strings.Join(cells, ", "), slurmBenchInterval())
	if err := os.WriteFile(planFile, []byte(plan), 0o644); err != nil {
		b.Fatal(err)
	}
	hand := fmt.Sprintf(`set -e
id=$(printf '#!/bin/sh\nsleep 1\n' | sbatch --parsable --array=0-%d%%%d -J hand -o /dev/null)
while [ -n "$(squeue -h -j "$id" -o %%i)" ]; do sleep 1; done
`, n-1, slots)
	var tf, sh, submitEach, submitArray time.Duration
	var tfCalls, shCalls map[string]int
	for i := 0; i < b.N; i++ {
		count()
		tf += timed(func() { benchApply(b, "apply", "--output", "plain", "--state", filepath.Join(dir, "state"), planFile) })
		tfCalls = count()
		sh += timed(func() {
			if out, err := exec.Command("sh", "-c", hand).CombinedOutput(); err != nil {
				b.Fatalf("the hand-written array: %v\n%s", err, out)
			}
		})
		shCalls = count()
		submitEach += timed(func() {
			loop := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do printf '#!/bin/sh\ntrue\n' | sbatch --parsable -H -J held -o /dev/null >/dev/null || exit 1; i=$((i+1)); done`, held)
			if out, err := exec.Command("sh", "-c", loop).CombinedOutput(); err != nil {
				b.Fatalf("%v\n%s", err, out)
			}
		})
		submitArray += timed(func() {
			if out, err := exec.Command("sh", "-c", fmt.Sprintf(`printf '#!/bin/sh\ntrue\n' | sbatch --parsable -H --array=0-%d -J held -o /dev/null`, held-1)).CombinedOutput(); err != nil {
				b.Fatalf("%v\n%s", err, out)
			}
		})
		if out, err := exec.Command("scancel", "--name=held").CombinedOutput(); err != nil {
			b.Fatalf("%v\n%s", err, out)
		}
	}
	per := func(d time.Duration) float64 { return d.Seconds() / float64(b.N) }
	b.ReportMetric(per(tf), "taoflow-s")
	b.ReportMetric(per(sh), "array-script-s")
	b.ReportMetric(per(tf)/per(sh), "taoflow/array")
	b.ReportMetric(per(submitEach), "submit-each-s")
	b.ReportMetric(per(submitArray), "submit-array-s")
	// Slurm commands per second of makespan: with a wait interval of 1 s
	// that is per tick (the last iteration's calls).
	b.ReportMetric(float64(tfCalls["squeue"])/per(tf), "taoflow-squeue/s")
	b.ReportMetric(float64(shCalls["squeue"])/per(sh), "array-squeue/s")
	fmt.Printf("slurm sweep of %d x sleep 1, %d at a time, wait interval %s: taoflow %.1fs, sbatch --array + squeue loop %.1fs (%.2fx); submitting %d held jobs: %d sbatch %.2fs, one array %.2fs\n",
		n, slots, slurmBenchInterval(), per(tf), per(sh), per(tf)/per(sh), held, held, per(submitEach), per(submitArray))
	fmt.Printf("slurm commands of one apply: %s (%.2f squeue per second); of the hand-written script: %s (%.2f squeue per second)\n",
		callsText(tfCalls), float64(tfCalls["squeue"])/per(tf), callsText(shCalls), float64(shCalls["squeue"])/per(sh))
}

// callsText is a count of Slurm commands as "squeue 80, sbatch 200".
func callsText(calls map[string]int) string {
	var parts []string
	for _, c := range []string{"sbatch", "squeue", "scontrol", "scancel", "sinfo"} {
		if calls[c] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", c, calls[c]))
		}
	}
	return strings.Join(parts, ", ")
}

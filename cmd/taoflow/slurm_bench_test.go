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

// BenchmarkSlurmSweep runs N cells of `sleep 1` on the test rig's
// single-node Slurm cluster, `slots` = 8, two ways in the
// same iteration: `taoflow apply` (a run + wait matrix on one pool, wait
// polling every second: one squeue per poll for all the jobs) and what a
// user would write by hand, one `sbatch --array=0-(N-1)%SLOTS` and a loop
// of `squeue` every second until the array is gone. It reports each
// one's makespan and taoflow's ratio to the hand-written script, and the
// submit time of N held jobs as N sbatch calls against one array. No
// figure is asserted (docs/benchmarks.md).
func BenchmarkSlurmSweep(b *testing.B) {
	cluster := testrig.StartSlurm(b)
	b.Setenv("SLURM_CONF", cluster.Conf)
	n, slots := slurmBenchCells(), min(8, cluster.CPUs)
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
  - {id: wait, uses: wait, needs: [train], matrix: inherit, with: {interval: 1s}}
`, dir, slots, strings.Join(cells, ", "))
	if err := os.WriteFile(planFile, []byte(plan), 0o644); err != nil {
		b.Fatal(err)
	}
	hand := fmt.Sprintf(`set -e
id=$(printf '#!/bin/sh\nsleep 1\n' | sbatch --parsable --array=0-%d%%%d -J hand -o /dev/null)
while [ -n "$(squeue -h -j "$id" -o %%i)" ]; do sleep 1; done
`, n-1, slots)
	var tf, sh, submitEach, submitArray time.Duration
	for i := 0; i < b.N; i++ {
		tf += timed(func() { benchApply(b, "apply", "--output", "plain", "--state", filepath.Join(dir, "state"), planFile) })
		sh += timed(func() {
			if out, err := exec.Command("sh", "-c", hand).CombinedOutput(); err != nil {
				b.Fatalf("the hand-written array: %v\n%s", err, out)
			}
		})
		submitEach += timed(func() {
			loop := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do printf '#!/bin/sh\ntrue\n' | sbatch --parsable -H -J held -o /dev/null >/dev/null || exit 1; i=$((i+1)); done`, n)
			if out, err := exec.Command("sh", "-c", loop).CombinedOutput(); err != nil {
				b.Fatalf("%v\n%s", err, out)
			}
		})
		submitArray += timed(func() {
			if out, err := exec.Command("sh", "-c", fmt.Sprintf(`printf '#!/bin/sh\ntrue\n' | sbatch --parsable -H --array=0-%d -J held -o /dev/null`, n-1)).CombinedOutput(); err != nil {
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
	fmt.Printf("slurm sweep of %d x sleep 1, %d at a time: taoflow %.1fs, sbatch --array + squeue loop %.1fs (%.2fx); submitting %d held jobs: %d sbatch %.2fs, one array %.2fs\n",
		n, slots, per(tf), per(sh), per(tf)/per(sh), n, n, per(submitEach), per(submitArray))
}

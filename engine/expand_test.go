package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/plan"
)

func TestExpandPairing(t *testing.T) {
	g := mustPlan(t, `
taoflow: 1
name: pairing
vars: {img: busybox}
instances:
  a: {}
  b: {}
  c: {}
steps:
  - id: prep
    uses: preflight
  - id: pull
    uses: pull
    needs: [prep]
    on: [a, b]
    with: {image: "${{ vars.img }}"}
  - id: train
    uses: run
    needs: [pull]
    on: [a, b]
    matrix: {lr: [0.1, 0.01]}
    with: {command: "train --lr ${{ matrix.lr }} --out ${{ cell.id }}"}
  - id: wait
    uses: wait
    needs: [train]
    matrix: inherit
  - id: report
    uses: pull
    needs: [wait]
    with: {image: x}
finally:
  - id: teardown
    uses: delete
`)
	got := map[string]string{}
	for _, n := range g.Nodes {
		var deps []string
		for _, d := range n.Needs {
			deps = append(deps, d.String())
		}
		got[n.ID] = strings.Join(deps, " ")
	}
	want := map[string]string{
		"prep@a": "", "prep@b": "", "prep@c": "",
		// per-instance needs per-instance on the same instance
		"pull@a": "prep@a", "pull@b": "prep@b",
		// a cell needs the per-instance node of wherever it is placed
		"train[lr=0.1]": "pull@<its instance>", "train[lr=0.01]": "pull@<its instance>",
		// an inheriting cell needs the same cell
		"wait[lr=0.1]": "train[lr=0.1]", "wait[lr=0.01]": "train[lr=0.01]",
		// per-instance needs cells: those placed on it, where it is in the pool…
		"report@a": "wait[cells placed here]", "report@b": "wait[cells placed here]",
		// …else every cell
		"report@c":   "wait[lr=0.1] wait[lr=0.01]",
		"teardown@a": "", "teardown@b": "", "teardown@c": "",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("needs (-want +got):\n%s", diff)
	}
	tr := g.Node("train[lr=0.1]")
	if tr.Cell.ID != "lr-0.1" || tr.Cell.Index != 0 || tr.JobID != "tf-r1-train.lr-0.1" {
		t.Errorf("cell = %+v, job %s", tr.Cell, tr.JobID)
	}
	if g.Node("wait[lr=0.01]").Root != "train[lr=0.01]" {
		t.Errorf("inherited node does not follow its cell")
	}
	with := g.With(tr, engine.Scope{RunID: "r1"})
	if cmd := with.Get("command").Text; cmd != "train --lr 0.1 --out lr-0.1" {
		t.Errorf("command = %q", cmd)
	}
}

func TestCellIDsStableAndUnique(t *testing.T) {
	g := mustPlan(t, `
taoflow: 1
name: ids
instances: {a: {}}
steps:
  - id: train
    uses: run
    matrix:
      name: ["a b", "a/b", "x"]
      n: [1, 2]
    with: {command: x}
  - id: wait
    uses: wait
    needs: [train]
    matrix: inherit
`)
	seen := map[string]bool{}
	var ids []string
	for _, n := range g.StepNodes("train") {
		if seen[n.Cell.ID] {
			t.Errorf("duplicate cell id %s", n.Cell.ID)
		}
		seen[n.Cell.ID] = true
		ids = append(ids, n.Cell.ID)
	}
	// "a b" and "a/b" both sanitise to a-b: those cells get hashed ids.
	want := []string{"cell0-", "cell1-", "cell2-", "cell3-", "name-x_n-1", "name-x_n-2"}
	for i, id := range ids {
		if !strings.HasPrefix(id, want[i]) {
			t.Errorf("cell %d id = %s, want prefix %s", i, id, want[i])
		}
	}
	g2 := mustPlan(t, `
taoflow: 1
name: ids
instances: {a: {}}
steps:
  - id: train
    uses: run
    matrix:
      name: ["a b", "a/b", "x"]
      n: [1, 2]
    with: {command: x}
  - id: wait
    uses: wait
    needs: [train]
    matrix: inherit
`)
	for i, n := range g2.StepNodes("train") {
		if n.Cell.ID != ids[i] {
			t.Errorf("cell ids are not stable: %s vs %s", n.Cell.ID, ids[i])
		}
	}
}

// TestJobIDsDoNotCollide: step a × cell x-y-z and step a-x × cell y-z were
// both tf-RUN-a-x-y-z; the second step adopted the first's job and its
// command never ran (issue 17 item 7).
func TestJobIDsDoNotCollide(t *testing.T) {
	g := mustPlan(t, `
taoflow: 1
name: collide
instances: {box: {}}
steps:
  - {id: a, uses: run, matrix: {x: [y-z]}, with: {command: echo a}}
  - {id: a-x, uses: run, matrix: {y: [z]}, with: {command: echo a-x}}
  - {id: w, uses: wait, needs: [a], matrix: inherit}
  - {id: w2, uses: wait, needs: [a-x], matrix: inherit}
`)
	a, ax := g.StepNodes("a")[0], g.StepNodes("a-x")[0]
	if a.Cell.ID != "x-y-z" || ax.Cell.ID != "y-z" {
		t.Fatalf("cell ids %q and %q: the test no longer sets up the clash", a.Cell.ID, ax.Cell.ID)
	}
	if a.JobID == ax.JobID {
		t.Fatalf("steps a and a-x share the job id %s", a.JobID)
	}
}

// TestExpandRefusesOversizedMatrix: 64 keys of 2 values wrapped to 0 cells
// and apply "succeeded" having run nothing; 63 keys panicked (makeslice).
// validate refuses both (plan.MaxCells); Expand, given such a plan anyway,
// errs instead of expanding nothing or panicking.
func TestExpandRefusesOversizedMatrix(t *testing.T) {
	for _, keys := range []int{17, 63, 64, 65} {
		var src strings.Builder
		src.WriteString("taoflow: 1\nname: big\ninstances: {box: {}}\nsteps:\n  - id: p\n    uses: pull\n    with: {image: busybox}\n    matrix:\n")
		for i := 0; i < keys; i++ {
			fmt.Fprintf(&src, "      k%d: [a, b]\n", i)
		}
		p, diags := plan.Parse("big.yaml", []byte(src.String()), plan.Options{})
		if !diags.HasErrors() || !strings.Contains(diags.Error(), "big.yaml:8:5: error: step \"p\": the matrix has") {
			t.Errorf("%d keys: validate said %v", keys, diags)
		}
		if _, err := engine.Expand(p, engine.Options{}); err == nil {
			t.Errorf("%d keys: Expand expanded a matrix of 2^%d cells", keys, keys)
		}
	}
}

func TestShellValuesAreQuoted(t *testing.T) {
	g := mustPlan(t, `
taoflow: 1
name: quote
instances: {a: {}}
steps:
  - id: train
    uses: run
    matrix: {tag: ["x; rm -rf ~", "ok"]}
    with:
      command: echo ${{ matrix.tag }}
      results: ~/r/${{ matrix.tag }}
  - id: wait
    uses: wait
    needs: [train]
    matrix: inherit
`)
	w := g.With(g.StepNodes("train")[0], engine.Scope{RunID: "r1"})
	if got := w.Get("command").Text; got != "echo 'x; rm -rf ~'" {
		t.Errorf("command = %q", got)
	}
	if got := w.Get("results").Text; got != "~/r/x; rm -rf ~" {
		t.Errorf("non-shell field changed: %q", got)
	}
}

// BenchmarkEngine10k measures the engine's own overhead per node on a
// 10,000-node graph with a no-op executor.
func BenchmarkEngine10k(b *testing.B) {
	var src strings.Builder
	src.WriteString("taoflow: 1\nname: bench\ninstances:\n  a: {slots: 8}\n  b: {slots: 8}\nsteps:\n  - {id: prep, uses: preflight}\n  - id: train\n    uses: run\n    needs: [prep]\n    matrix:\n      i: [")
	for i := 0; i < 5000; i++ {
		if i > 0 {
			src.WriteString(", ")
		}
		fmt.Fprint(&src, i)
	}
	src.WriteString("]\n    with: {command: x}\n  - {id: wait, uses: wait, needs: [train], matrix: inherit}\n")
	g := mustPlanB(b, src.String())
	b.ResetTimer()
	for b.Loop() {
		s := engine.Run(b.Context(), g, engine.Config{RunID: "r", Executor: noop{}})
		if s.Failed() {
			b.Fatal("failed")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(g.Nodes)), "ns/node")
}

type noop struct{}

func (noop) Execute(context.Context, *engine.Task) error { return nil }

// BenchmarkSweepMakespan runs a sweep of sleeping jobs (40 cells of 20ms on
// two instances with 4 slots each) and reports the makespan against the
// ideal: total work / slots.
func BenchmarkSweepMakespan(b *testing.B) {
	const cells, work, slots = 40, 20 * time.Millisecond, 8
	var src strings.Builder
	src.WriteString("taoflow: 1\nname: bench\ninstances:\n  a: {slots: 4}\n  b: {slots: 4}\nsteps:\n  - id: train\n    uses: run\n    matrix:\n      i: [")
	for i := 0; i < cells; i++ {
		if i > 0 {
			src.WriteString(", ")
		}
		fmt.Fprint(&src, i)
	}
	src.WriteString("]\n    with: {command: x}\n  - {id: wait, uses: wait, needs: [train], matrix: inherit}\n")
	g := mustPlanB(b, src.String())
	sleeper := sleepExec{d: work}
	var total time.Duration
	for b.Loop() {
		start := time.Now()
		if s := engine.Run(b.Context(), g, engine.Config{RunID: "r", Executor: sleeper}); s.Failed() {
			b.Fatal("failed")
		}
		total += time.Since(start)
	}
	ideal := time.Duration(cells) * work / slots
	makespan := total / time.Duration(b.N)
	b.ReportMetric(float64(makespan.Milliseconds()), "makespan-ms")
	b.ReportMetric(float64(ideal.Milliseconds()), "ideal-ms")
	b.ReportMetric(float64(makespan)/float64(ideal), "ratio")
}

// sleepExec sleeps for run nodes (the job) and returns at once otherwise.
type sleepExec struct{ d time.Duration }

func (s sleepExec) Execute(ctx context.Context, t *engine.Task) error {
	if t.Node.Step.Uses == "run" {
		time.Sleep(s.d)
	}
	return nil
}

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/taoflow/taoflow/runner"
	"github.com/taoflow/taoflow/state"
)

// TestRequireCleanExit2 checks that apply --require-clean refuses a dirty
// tree with exit 2, listing the changed files, and starts nothing.
func TestRequireCleanExit2(t *testing.T) {
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	plan := filepath.Join(dir, "plan.yaml")
	body := "taoflow: 1\nname: p\ninstances:\n  a: {}\nsteps:\n  - id: s\n    uses: run\n    with: {command: \"true\"}\n"
	if err := os.WriteFile(plan, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	git("init", "-q")
	git("add", "plan.yaml")
	git("commit", "-qm", "one")
	if err := os.WriteFile(plan, []byte(body+"# changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(t.TempDir(), "state")
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"--state", stateDir, "apply", "--require-clean", plan}, stdio{in: strings.NewReader(""), out: &out, err: &errb})
	if code := exitCode(err, &errb); code != exitUsage {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitUsage, errb.String())
	}
	if !strings.Contains(errb.String(), "uncommitted changes") || !strings.Contains(errb.String(), "\n  plan.yaml") {
		t.Errorf("stderr does not list the changed file:\n%s", errb.String())
	}
	if _, err := os.Stat(stateDir); !os.IsNotExist(err) {
		t.Errorf("a refused apply made the state directory (%v)", err)
	}
}

var (
	trainerOnce sync.Once
	trainerPath string
	trainerErr  error
)

// manyUntracked is how many untracked files busy-repo.txtar makes in its
// repository ($MANY_UNTRACKED): the issue-21 repository held thousands.
const manyUntracked = 3000

// TestRecordsScripts runs the scripts of testdata/records: provenance,
// names and tags, the results table (jobs run the fake TAO trainer, which
// writes status.json as TAO does) and notifiers. $TRAINER is the trainer.
func TestRecordsScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/records",
		Setup: func(env *testscript.Env) error {
			isolateState(env)
			trainerOnce.Do(func() {
				dir, err := os.MkdirTemp("", "taoflow-trainer-")
				if err != nil {
					trainerErr = err
					return
				}
				trainerPath = filepath.Join(dir, "trainer")
				out, err := exec.Command("go", "build", "-o", trainerPath, "github.com/taoflow/taoflow/internal/testrig/trainer").CombinedOutput()
				if err != nil {
					trainerErr = fmt.Errorf("building the trainer: %w\n%s", err, out)
				}
			})
			env.Setenv("TRAINER", trainerPath)
			env.Setenv("MANY_UNTRACKED", strconv.Itoa(manyUntracked))
			return trainerErr
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"httpsink": cmdHTTPSink,
		},
	})
}

// httpsink FILE STATUS: serve POSTs on 127.0.0.1 until the script ends,
// appending each body (and a newline) to FILE and answering STATUS; $SINK
// is its URL.
func cmdHTTPSink(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: httpsink file status")
	}
	code, err := strconv.Atoi(args[1])
	if err != nil {
		ts.Fatalf("httpsink: %v", err)
	}
	path := ts.MkAbs(args[0])
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintf(f, "%s %s %s\n%s\n", r.Method, r.URL.RequestURI(), r.Header.Get("Content-Type"), body)
			f.Close()
		}
		mu.Unlock()
		w.WriteHeader(code)
	}))
	ts.Defer(srv.Close)
	ts.Setenv("SINK", srv.URL)
}

// TestResultsGolden renders a results table (two run steps, a failed cell,
// a metric one cell lacks, TAO records) as text and CSV against golden
// files; UPDATE_GOLDEN=1 rewrites them.
func TestResultsGolden(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	tab := runner.ResultTable{
		RunID: "r1", Keys: []string{"lr", "bs"}, Metrics: []string{"accuracy", "loss"},
		Rows: []runner.ResultRow{
			{Step: "train", Cell: "lr-0.1-bs-8", Matrix: map[string]string{"lr": "0.1", "bs": "8"}, Instance: "gpu0", State: "succeeded",
				Duration: 754 * time.Second, Seconds: 754, NetworkArch: "visual_changenet", Action: "train", Epoch: f(10), MaxEpoch: f(10),
				Last: map[string]float64{"loss": 0.123456, "accuracy": 0.91}, Best: map[string]float64{"loss": 0.1, "accuracy": 0.93},
				Results: []string{"s3://b/exp/lr-0.1-bs-8/"}},
			{Step: "train", Cell: "lr-0.01-bs-8", Matrix: map[string]string{"lr": "0.01", "bs": "8"}, Instance: "gpu1", State: "failed",
				Duration: 61 * time.Second, Seconds: 61, NetworkArch: "visual_changenet", Action: "train", Epoch: f(2), MaxEpoch: f(10),
				Last: map[string]float64{"loss": 2.5}, Best: map[string]float64{"loss": 2.5}},
			{Step: "eval", Instance: "gpu0", State: "succeeded", Duration: 5 * time.Second, Seconds: 5,
				Last: map[string]float64{"accuracy": 0.88}, Best: map[string]float64{"accuracy": 0.88}},
		},
	}
	if err := tab.Sort("loss"); err != nil {
		t.Fatal(err)
	}
	var text, csvOut bytes.Buffer
	if err := writeResults(&text, tab); err != nil {
		t.Fatal(err)
	}
	if err := writeResultsCSV(&csvOut, tab); err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][]byte{"results.txt": text.Bytes(), "results.csv": csvOut.Bytes()} {
		path := filepath.Join("testdata", "golden", name)
		if os.Getenv("UPDATE_GOLDEN") != "" {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), string(got)); diff != "" {
			t.Errorf("%s (-want +got):\n%s\nRegenerate with UPDATE_GOLDEN=1 go test ./cmd/taoflow -run TestResultsGolden", name, diff)
		}
	}
}

// TestShowRecord checks the record lines of status RUN: name, tags, a
// dirty tree, who ran it, instance types and image digests (once each).
func TestShowRecord(t *testing.T) {
	rec := state.RunRecord{Label: "n", Tags: map[string]string{"b": "2", "a": "1"},
		Provenance: []byte(`{"git": {"repo": true, "commit": "c0ffee", "branch": "main", "dirty": true, "changed": ["x", "y"], "diff_sha256": "0123456789abcdef0123"}, "taoflow_version": "v1", "user": "ana", "host": "lap"}`)}
	nodes := []state.Node{
		{ID: "pull@gpu", Instance: "gpu", Facts: map[string]string{"image": "img:1", "digest": "img@sha256:aa"}},
		{ID: "pull@gpu", Instance: "gpu", Facts: map[string]string{"image": "img:1", "digest": "img@sha256:aa"}},
		{ID: "train", Instance: "gpu"},
	}
	res := []state.Resource{{Kind: state.KindInstance, Instance: "gpu", Data: map[string]string{"type": "g5.xlarge"}}, {Kind: state.KindJob, Instance: "gpu"}}
	var b bytes.Buffer
	showRecord(&b, rec, nodes, res)
	want := `name: n
tags: a=1 b=2
git: c0ffee on main, dirty (2 changed, diff sha256 0123456789ab)
ran by: ana@lap with taoflow v1
instance: gpu type g5.xlarge
image: img:1 = img@sha256:aa on gpu
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

package steps

import (
	"context"
	"fmt"
	"github.com/taoflow/taoflow/internal/testrig"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// toolShim puts, in front of PATH, a script for each tool that logs the
// tool's name and execs the real one, and returns what was logged since
// the last call.
func toolShim(t *testing.T, tools ...string) (calls func() []string) {
	t.Helper()
	bin := t.TempDir()
	logFile := filepath.Join(bin, "calls")
	for _, name := range tools {
		real, err := exec.LookPath(name)
		if err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf("#!/bin/sh\necho %s >> %s\nexec %s \"$@\"\n", name, logFile, real)
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return func() []string {
		b, _ := os.ReadFile(logFile)
		_ = os.Remove(logFile)
		got := strings.Fields(string(b))
		sort.Strings(got)
		return got
	}
}

// TestProcessJobTools: the process runtime's launch starts only mkdir
// and setsid among the usual tools, and a poll of ten running jobs with
// nothing new in their logs starts wc once and tail once per job (for its status.json): no process per job for its state, pid,
// start time or log size (docs/benchmarks.md).
func TestProcessJobTools(t *testing.T) {
	calls := toolShim(t, "cat", "date", "wc", "tr", "tail", "head", "sed", "cut", "awk", "mv", "mkdir", "sleep", "rm", "chmod", "setsid")
	e := newEnv(t)
	res := filepath.Join(e.inst.Ref, "res")
	if err := os.MkdirAll(res, 0o700); err != nil {
		t.Fatal(err)
	}
	const n = 10
	var probes []probe
	for i := range n {
		id := fmt.Sprintf("tf-r1-t.c%d", i)
		e.runJob(t, e.steps, id, with("command", "echo started; while :; do read -r _ < /dev/null; done"))
		probes = append(probes, probe{ID: id, Offset: int64(len("started\n")), Results: "~/res"})
	}
	later := time.Now().Add(2 * time.Second)
	if err := os.WriteFile(filepath.Join(res, "status.json"), []byte(`{"epoch": 1}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(res, "status.json"), later, later); err != nil {
		t.Fatal(err)
	}
	testrig.Eventually(t, time.Minute, "the jobs' first line", func() bool {
		for _, p := range probes {
			if b, _ := os.ReadFile(filepath.Join(e.jobDir(p.ID), "log")); string(b) != "started\n" {
				return false
			}
		}
		return true
	})
	calls()
	e.runJob(t, e.steps, "tf-r1-t.one", with("command", ":"))
	// The detached supervisor logs its setsid on its own time.
	testrig.Eventually(t, time.Minute, "the job to end", func() bool {
		_, err := os.Stat(filepath.Join(e.jobDir("tf-r1-t.one"), "rc"))
		return err == nil
	})
	if diff := cmp.Diff([]string{"mkdir", "setsid"}, calls()); diff != "" {
		t.Errorf("tools a launch started (-want +got):\n%s", diff)
	}
	obs, err := e.steps.process.status(context.Background(), e.inst, probes)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range obs {
		if o.State != stateRunning || len(o.Log) != 0 || o.Status != `{"epoch": 1}` {
			t.Errorf("job %d: %+v, want running, nothing new, its status line", i, o)
		}
	}
	want := []string{"wc"}
	for range n {
		want = append(want, "tail")
	}
	sort.Strings(want)
	if diff := cmp.Diff(want, calls()); diff != "" {
		t.Errorf("tools a poll of %d jobs started (-want +got):\n%s", n, diff)
	}
}

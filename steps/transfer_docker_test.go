package steps

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taoflow/taoflow/internal/testrig"
	"github.com/taoflow/taoflow/plan"
)

// TestSendIntoContainer sends a spec to a sandbox, runs a container that
// needs it (the trainer waits for the file before its first epoch), and
// fetches what the container wrote back here.
func TestSendIntoContainer(t *testing.T) {
	image := testrig.BuildTrainerImage(t, "")
	dir := t.TempDir()
	e := newDockerEnv(t, nil, func(c *Config) { c.BaseDir = dir }) // no plan: relative paths from BaseDir
	writeTree(t, filepath.Join(dir, "specs"), map[string]string{"spec.yaml": "epochs: 1\n"})
	if log, err := e.do(context.Background(), plan.KindSend, with("from", "specs", "to", "~/specs")); err != nil {
		t.Fatalf("send: %v\n%s", err, log)
	}
	job := e.job("train")
	e.runContainer(t, job, "image", image, "command", "-epochs 1 -sleep 10ms -wait-for /specs/spec.yaml",
		"volumes", []string{"~/specs:/specs", "~/results:/results"})
	wlog, _, err := e.waitJobs(context.Background(), e.steps, with("timeout", "2m"), Job{ID: job, Image: image, Results: "~/results"})
	if err != nil || !strings.Contains(wlog.String(), "trainer: done") {
		t.Fatalf("the job did not read what was sent: %v\n%s", err, wlog)
	}
	if log, err := e.do(context.Background(), plan.KindFetch, with("from", "~/results", "to", "out")); err != nil {
		t.Fatalf("fetch: %v\n%s", err, log)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "out", "status.json")); err != nil || !strings.Contains(string(b), "epoch") {
		t.Errorf("the container's status.json, fetched: %q, %v", b, err)
	}
}

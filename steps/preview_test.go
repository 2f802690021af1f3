package steps

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
)

// recording passes every Exec on to a platform and keeps its script and
// stdin.
type recording struct {
	platform.Platform
	mu      sync.Mutex
	scripts []string
	stdins  []string
}

func (r *recording) Exec(ctx context.Context, inst platform.Instance, script string, stdin io.Reader) (platform.Result, error) {
	var b []byte
	if stdin != nil {
		b, _ = io.ReadAll(stdin)
	}
	r.mu.Lock()
	r.scripts = append(r.scripts, script)
	r.stdins = append(r.stdins, string(b))
	r.mu.Unlock()
	return r.Platform.Exec(ctx, inst, script, strings.NewReader(string(b)))
}

// TestPreviewIsWhatRuns: the commands Preview shows for a node are the
// scripts Do sends, byte for byte and in order, for a preflight, a run (with
// a secret), a wait and a file:// upload; and Preview needs no secret
// values and contacts nothing.
func TestPreviewIsWhatRuns(t *testing.T) {
	e := newEnv(t)
	rec := &recording{Platform: e.local}
	s := e.newSteps("r1", func(c *Config) {
		c.Platform = rec
		c.Secrets = testSecrets(t, "TOKEN", "s3cr3t-value")
		c.BaseDir = t.TempDir()
	})
	blind := e.newSteps("r1", func(c *Config) { c.Platform = nil; c.BaseDir = s.cfg.BaseDir })
	writeTree(t, s.cfg.BaseDir, map[string]string{"specs/a.yaml": "a: 1\n"})
	shared := t.TempDir()
	writeTree(t, shared, map[string]string{"x.bin": "x"})
	job := "tf-r1-train-a"
	nodes := []Request{
		{NodeID: "pre@a", Step: &plan.Step{ID: "pre", Uses: plan.KindPreflight}, With: with("interval", "10ms")},
		{NodeID: "train@a", Step: &plan.Step{ID: "train", Uses: plan.KindRun}, JobID: job,
			With: with("command", `mkdir -p ~/out && echo "${#TOKEN}" > ~/out/n`, "env", []string{"TOKEN"})},
		{NodeID: "wait@a", Step: &plan.Step{ID: "wait", Uses: plan.KindWait}, With: with("interval", "10ms"),
			Jobs: []Job{{ID: job, Results: "~/out"}}},
		{NodeID: "up@a", Step: &plan.Step{ID: "up", Uses: plan.KindUploadS3}, With: with("from", "~/out", "to", "file://"+s.cfg.BaseDir+"/copied")},
		{NodeID: "send@a", Step: &plan.Step{ID: "send", Uses: plan.KindSend}, With: with("from", "specs", "to", "~/specs")},
		{NodeID: "stage@a", Step: &plan.Step{ID: "stage", Uses: plan.KindDownloadS3}, With: with("from", "file://"+shared, "to", "~/data")},
	}
	for _, req := range nodes {
		req.Instance, req.Log = e.inst, io.Discard
		want, err := blind.Preview(req)
		if err != nil {
			t.Fatalf("%s: Preview: %v", req.NodeID, err)
		}
		rec.scripts, rec.stdins = nil, nil
		if err := s.Do(t.Context(), req); err != nil {
			t.Fatalf("%s: Do: %v", req.NodeID, err)
		}
		// Every previewed command was sent, in order (a repeated one, such
		// as a poll, possibly more than once; commands Preview leaves out,
		// such as the manifest, in between).
		i := 0
		for _, sent := range rec.scripts {
			if i < len(want) && sent == want[i].Script {
				i++
			}
		}
		if i != len(want) {
			t.Errorf("%s: sent scripts do not match the preview at command %d (%s):\npreview:\n%s\nsent:\n%s",
				req.NodeID, i, want[min(i, len(want)-1)].What, want[min(i, len(want)-1)].Script, strings.Join(rec.scripts, "\n----\n"))
		}
		for _, c := range want {
			if strings.Contains(c.Script, "s3cr3t-value") {
				t.Errorf("%s: a secret value in a previewed script", req.NodeID)
			}
		}
		if req.NodeID == "train@a" && (len(want) != 1 || strings.Join(want[0].Stdin, ",") != "TOKEN" || rec.stdins[0] != "s3cr3t-value\n") {
			t.Errorf("train: preview stdin %v, sent %q", want[0].Stdin, rec.stdins)
		}
	}
}

package testrig

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	code := m.Run()
	StopSharedSlurm()
	os.Exit(code)
}

// TestSlurm runs a job asking for both GRES GPUs on the rig's cluster and
// reads what Slurm gave it and how it ended.
func TestSlurm(t *testing.T) {
	s := SharedSlurm(t)
	out := t.TempDir() + "/out"
	id, err := command(s.Env(), strings.NewReader("#!/bin/sh\necho gpus=$CUDA_VISIBLE_DEVICES\nexit 3\n"),
		"sbatch", "--parsable", "--gpus=2", "-J", "tr-slurm", "-o", out)
	if err != nil {
		t.Fatal(err)
	}
	id = strings.TrimSpace(id)
	var info string
	Eventually(t, 30*time.Second, "the job to end", func() bool {
		info, _ = s.Command("scontrol", "show", "job", "-o", id)
		return strings.Contains(info, "JobState=FAILED")
	})
	if !strings.Contains(info, "ExitCode=3:0") {
		t.Errorf("scontrol show job: %s", info)
	}
	b, _ := os.ReadFile(out)
	if got := strings.TrimSpace(string(b)); got != "gpus=0,1" {
		t.Errorf("job output %q, want gpus=0,1", got)
	}
	for _, j := range s.Jobs(t) {
		if strings.HasPrefix(j, id+" ") {
			t.Errorf("job %s still queued: %s", id, j)
		}
	}
}

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taoflow/taoflow/internal/testrig"
	"github.com/taoflow/taoflow/platform/brev/brevtest"
	"github.com/taoflow/taoflow/state"
)

const brevAutostopPlan = `taoflow: 1
name: brev-autostop
platform: {kind: brev}
autostop: {after: 2s}
instances:
  gpu: {create: {type: g5.xlarge}}
steps:
  - id: preflight
    uses: preflight
    with: {interval: 200ms, ready_timeout: 1m}
  - id: train
    uses: run
    needs: [preflight]
    with: {command: "touch ~/started; sleep 3; touch ~/ended"}
  - id: wait
    uses: wait
    needs: [train]
    with: {interval: 200ms}
finally:
  - id: teardown
    uses: delete
`

// TestBrevAutostop: apply is killed (kill -9) while the job on a brev
// instance it created runs. The job ends; the instance's watchdog, whose
// lease nobody renews, runs the default command (sudo shutdown -h now),
// which the fake brev turns into a stopped instance; destroy then finds it
// stopped, says it stopped itself, and deletes it.
func TestBrevAutostop(t *testing.T) {
	f, dir := brevEnv(t, brevtest.Options{})
	writePlan(t, "autostop.yaml", brevAutostopPlan)
	// taoflow as a process of its own, to be killed: this test binary
	// under the name testscript.Main runs as taoflow.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "taoflow")
	if err := os.Symlink(self, bin); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The ssh masters of the killed apply (destroy has its own).
		masters := filepath.Join(f.Home, ".ssh")
		for _, p := range testrig.ProcessesWith(masters) {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
		testrig.Eventually(t, 10*time.Second, "the killed apply's ssh masters to end", func() bool {
			return len(testrig.ProcessesWith(masters)) == 0
		})
	})
	apply := exec.Command(bin, "apply", "--yes", "--output", "plain", "autostop.yaml")
	apply.Dir = dir
	var out strings.Builder
	apply.Stdout, apply.Stderr = &out, &out
	if err := apply.Start(); err != nil {
		t.Fatal(err)
	}
	sandbox := func(name string) string {
		for _, in := range f.Instances() {
			if strings.HasPrefix(in.Name, "tf-brev-autostop-") {
				return filepath.Join(in.Sandbox, name)
			}
		}
		return ""
	}
	exists := func(name string) func() bool {
		return func() bool {
			p := sandbox(name)
			_, err := os.Stat(p)
			return p != "" && err == nil
		}
	}
	testrig.Eventually(t, 60*time.Second, "the job to start", exists("started"))
	_ = apply.Process.Kill()
	_ = apply.Wait()
	if !strings.Contains(out.String(), "autostop armed on gpu: it stops itself 2s after taoflow leaves (sudo shutdown -h now)") {
		t.Errorf("apply did not say it armed the autostop:\n%s", out.String())
	}
	var name string
	testrig.Eventually(t, 60*time.Second, "the instance to stop itself", func() bool {
		for _, in := range f.Instances() {
			if strings.HasPrefix(in.Name, "tf-brev-autostop-") && (in.Status == "STOPPING" || in.Status == "STOPPED") {
				name = in.Name
				return true
			}
		}
		return false
	})
	if !exists("ended")() {
		t.Errorf("the instance stopped before its job ended")
	}
	st, err := state.OpenReadOnly(filepath.Join(dir, ".taoflow"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := st.LatestRun(context.Background())
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	// reap leaves it to its run's destroy, and says it stopped itself.
	_, stdout, stderr := applyCLI(t, "reap")
	if !strings.Contains(stdout+stderr, "it stopped itself (its autostop fired while taoflow was away)") {
		t.Errorf("reap does not report the instance that stopped itself:\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	code, stdout, stderr := applyCLI(t, "destroy", r.ID, "--yes")
	if code != exitOK {
		t.Fatalf("destroy exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !regexp.MustCompile(`gpu: autostop: found stopped at \S+ with its autostop armed: it stopped itself`).MatchString(stdout) {
		t.Errorf("destroy does not say the instance stopped itself:\n%s", stdout)
	}
	if f.Status(name) != "DELETING" && f.Status(name) != "" {
		t.Errorf("instance %s is %s after destroy, want it deleted", name, f.Status(name))
	}
	f.CheckNoneAlive(t)
	_, stdout, _ = applyCLI(t, "status", r.ID)
	if !regexp.MustCompile(`(?m)^  gpu +autostop armed: 2s after taoflow leaves$`).MatchString(stdout) ||
		!regexp.MustCompile(`(?m)^  gpu +found stopped at \S+ with its autostop armed`).MatchString(stdout) {
		t.Errorf("status does not show the autostop and that it fired:\n%s", stdout)
	}
}

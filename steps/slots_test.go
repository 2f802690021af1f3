package steps

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taoflow/taoflow/internal/testrig"
	"github.com/taoflow/taoflow/plan"
)

// fakeNvidiaSMI puts on PATH an nvidia-smi whose -L lists n GPUs in the
// real tool's form (the nvidia-smi-L.txt of the project's shared reference notes, nvidia-smi-h200/).
func fakeNvidiaSMI(t *testing.T, n int) {
	t.Helper()
	dir := t.TempDir()
	var lines strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&lines, "GPU %d: NVIDIA H200 (UUID: GPU-78b81f41-1f71-d518-827c-4dfa3dfc8b%02x)\n", i, i)
	}
	if err := os.WriteFile(filepath.Join(dir, "gpus.txt"), []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	fakeTool(t, dir, "nvidia-smi", `[ "$1" = -L ] || exit 2
exec /bin/cat `+filepath.Join(dir, "gpus.txt"))
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
}

// slotPlan is a plan whose run step splits instance a's GPUs over its 2
// slots, the GPUs counted by preflight (gpus is "" ) or declared.
func slotPlan(t *testing.T, gpus, image string) *plan.Plan {
	t.Helper()
	decl := ""
	if gpus != "" {
		decl = ", gpus: " + gpus
	}
	cmd := "echo devices=$CUDA_VISIBLE_DEVICES"
	if image != "" {
		cmd = "echo hi\n      image: " + image
	}
	src := `taoflow: 1
name: slots
instances:
  a: {slots: 2` + decl + `}
steps:
  - {id: pre, uses: preflight, with: {docker: false}}
  - id: train
    uses: run
    needs: [pre]
    matrix: {lr: [1, 2, 3]}
    with:
      command: ` + cmd + `
      gpus: per-slot
  - {id: wait, uses: wait, needs: [train], matrix: inherit}
`
	p, diags := plan.Parse("plan.yaml", []byte(src), plan.Options{})
	if diags.HasErrors() {
		t.Fatalf("plan:\n%s", diags.Error())
	}
	return p
}

// TestPreflightPerSlot: a preflight on an instance whose cells split its
// GPUs counts them even without with.gpus, fails with fewer GPUs than
// slots (or than declared), and records the count for the run steps.
func TestPreflightPerSlot(t *testing.T) {
	tests := map[string]struct {
		declared string
		present  int
		wantMsg  string // "" is success
	}{
		"counted, enough":     {present: 2},
		"counted, one short":  {present: 1, wantMsg: "a has 1 GPU, wanted at least 2 (gpus: per-slot gives each of its 2 slots a GPU)"},
		"declared, present":   {declared: "4", present: 4},
		"declared, not there": {declared: "4", present: 3, wantMsg: "a has 3 GPUs, wanted at least 4 (instances.a.gpus: 4, for gpus: per-slot)"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			fakeNvidiaSMI(t, tt.present)
			p := slotPlan(t, tt.declared, "")
			e := newEnv(t, func(c *Config) { c.Plan = p })
			facts := map[string]string{}
			log := &logBuf{}
			err := e.steps.Do(context.Background(), Request{
				NodeID: "pre@a", Step: p.Step("pre"), Instance: e.inst, With: with("docker", false), Log: log,
				Record: func(k, v string) { facts[k] = v },
			})
			if tt.wantMsg != "" {
				se := stepError(t, err)
				if se.Class != ClassTooFewGPUs || se.Msg != tt.wantMsg {
					t.Fatalf("error = %v, want %s: %s", err, ClassTooFewGPUs, tt.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatalf("preflight: %v\n%s", err, log)
			}
			if got, want := e.steps.GPUs("a"), tt.present; tt.declared == "" && got != want {
				t.Errorf("GPUs(a) = %d, want the %d counted", got, want)
			}
			if got := facts[RecordGPUs]; got != fmt.Sprint(tt.present) {
				t.Errorf("recorded gpus = %q, want %d", got, tt.present)
			}
		})
	}
}

// TestPerSlotHostProcesses: two host-process jobs of the same step, in
// slots 0 and 1 of a 4-GPU instance, each get only their slot's GPUs in
// CUDA_VISIBLE_DEVICES.
func TestPerSlotHostProcesses(t *testing.T) {
	p := slotPlan(t, "4", "")
	e := newEnv(t, func(c *Config) { c.Plan = p })
	w := with("command", "echo devices=$CUDA_VISIBLE_DEVICES", "gpus", "per-slot")
	for slot, id := range []string{"tf-r1-train.c0", "tf-r1-train.c1"} {
		log := &logBuf{}
		err := e.steps.Do(context.Background(), Request{
			NodeID: "train[" + id + "]", Step: p.Step("train"), Instance: e.inst, With: w, JobID: id, Log: log,
			Slot: &Slot{Index: slot, GPUs: plan.SlotGPUs(4, 2, slot)},
		})
		if err != nil {
			t.Fatalf("run %s: %v\n%s", id, err, log)
		}
	}
	for id, want := range map[string]string{"tf-r1-train.c0": "devices=0,1", "tf-r1-train.c1": "devices=2,3"} {
		if got := jobOutput(t, e.jobDir(id)); got != want {
			t.Errorf("%s printed %q, want %q", id, got, want)
		}
	}
	// Without a slot with GPUs the job is not launched on a guess.
	err := e.steps.Do(context.Background(), Request{
		NodeID: "train[x]", Step: p.Step("train"), Instance: e.inst, With: w, JobID: "tf-r1-train.c2", Log: &logBuf{},
		Slot: &Slot{Index: 0},
	})
	if se := stepError(t, err); se.Class != ClassInvalidConfig || !strings.Contains(se.Msg, "holds no slot with GPUs") {
		t.Errorf("without GPUs: %v", err)
	}
}

// jobOutput waits for a host-process job to end and returns its log.
func jobOutput(t *testing.T, dir string) string {
	t.Helper()
	testrig.Eventually(t, 20*time.Second, "job "+filepath.Base(dir)+" to end", func() bool {
		_, err := os.Stat(filepath.Join(dir, "rc"))
		return err == nil
	})
	out, err := os.ReadFile(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// TestPerSlotContainers: the containers of two slots ask Docker for their
// own devices. This machine has no GPU, so a docker that creates instead
// of running (a start would fail without the NVIDIA runtime) stands on the
// PATH in front of the real one, and the containers' DeviceRequests are
// read back with docker inspect.
func TestPerSlotContainers(t *testing.T) {
	image := testrig.BuildTrainerImage(t, "")
	real, err := exec.LookPath("docker")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	fakeTool(t, dir, "docker", `if [ "$1" = run ]; then
	shift; [ "$1" = -d ] && shift
	exec `+real+` create "$@"
fi
exec `+real+` "$@"`)
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	p := slotPlan(t, "4", image)
	e := newEnv(t, func(c *Config) { c.Plan = p; c.RunID = "slots" + fmt.Sprint(time.Now().UnixNano()) })
	w := with("image", image, "command", "true", "gpus", "per-slot")
	want := map[string]string{}
	for slot := 0; slot < 2; slot++ {
		id := fmt.Sprintf("tf-%s-train.c%d", e.steps.cfg.RunID, slot)
		t.Cleanup(func() { _, _ = testrig.Docker(t, "rm", "-f", id) })
		log := &logBuf{}
		err := e.steps.Do(context.Background(), Request{
			NodeID: "train[c" + fmt.Sprint(slot) + "]", Step: p.Step("train"), Instance: e.inst, With: w, JobID: id, Log: log,
			Slot: &Slot{Index: slot, GPUs: plan.SlotGPUs(4, 2, slot)},
		})
		if err != nil {
			t.Fatalf("run %s: %v\n%s", id, err, log)
		}
		want[id] = fmt.Sprintf(`[{"Driver":"","Count":0,"DeviceIDs":["%d","%d"],"Capabilities":[["gpu"]],"Options":{}}]`, 2*slot, 2*slot+1)
	}
	for id, w := range want {
		out, err := testrig.Docker(t, "inspect", "--type", "container", "-f", "{{json .HostConfig.DeviceRequests}}", id)
		if err != nil {
			t.Fatalf("inspect %s: %v\n%s", id, err, out)
		}
		var got, exp any
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%s: %v: %s", id, err, out)
		}
		_ = json.Unmarshal([]byte(w), &exp)
		if fmt.Sprint(got) != fmt.Sprint(exp) {
			t.Errorf("%s: DeviceRequests = %s, want %s", id, strings.TrimSpace(out), w)
		}
	}
}

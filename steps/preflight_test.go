package steps

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
)

// fakeTool puts an executable script named name, with body, first on the
// PATH that local commands get (platform/local passes the host's PATH on).
func fakeTool(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestPreflight(t *testing.T) {
	fixture, err := filepath.Abs("testdata/nvidia-smi-L.txt")
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		with      *plan.Value
		tools     map[string]string // fake tools on PATH
		onlyFakes bool              // PATH holds nothing but the fakes
		wantClass string
		wantMsg   string
	}{
		"probe only": {with: with("interval", "20ms", "docker", false)},
		"one GPU":    {with: with("gpus", 1, "docker", false), tools: map[string]string{"nvidia-smi": "cat " + fixture}},
		"two GPUs wanted": {
			with: with("gpus", 2, "docker", false), tools: map[string]string{"nvidia-smi": "cat " + fixture},
			wantClass: ClassTooFewGPUs, wantMsg: "a has 1 GPU, wanted at least 2",
		},
		"no nvidia-smi": {
			with: with("gpus", 1, "docker", false), onlyFakes: true,
			wantClass: ClassTooFewGPUs, wantMsg: "nvidia-smi is not installed on a (no NVIDIA driver?); wanted 1 GPU",
		},
		"nvidia-smi fails": {
			with: with("gpus", 1), tools: map[string]string{"nvidia-smi": "echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.'; exit 9"},
			wantClass: ClassTooFewGPUs, wantMsg: "nvidia-smi -L failed on a (exit code 9): NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.; wanted 1 GPU",
		},
		"docker works": {with: with("docker", true), tools: map[string]string{"docker": `[ "$1" = info ] && echo "Server Version: 27"`}},
		"docker daemon down": {
			with: with("docker", true), tools: map[string]string{"docker": "echo 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock.' >&2; exit 1"},
			wantClass: ClassNoDocker, wantMsg: "docker info failed on a (exit code 1): Cannot connect to the Docker daemon at unix:///var/run/docker.sock.",
		},
		"no docker": {
			with: with("docker", true), onlyFakes: true,
			wantClass: ClassNoDocker, wantMsg: "docker is not installed on a",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			for tool, body := range tt.tools {
				fakeTool(t, dir, tool, body)
			}
			fakeTool(t, dir, "cat", `exec /bin/cat "$@"`)
			if tt.onlyFakes {
				t.Setenv("PATH", dir)
			} else {
				t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
			}
			e := newEnv(t)
			log := &logBuf{}
			err := e.steps.Do(t.Context(), Request{
				Step: &plan.Step{ID: "preflight", Uses: plan.KindPreflight}, Instance: e.inst, With: tt.with, Log: log,
			})
			if tt.wantClass == "" {
				if err != nil {
					t.Fatalf("preflight: %v\n%s", err, log)
				}
				if !strings.Contains(log.String(), "a answered after") {
					t.Errorf("log:\n%s", log)
				}
				return
			}
			se := stepError(t, err)
			if se.Class != tt.wantClass || se.Msg != tt.wantMsg {
				t.Errorf("error = %q (class %q), want %q (class %q)", se.Msg, se.Class, tt.wantMsg, tt.wantClass)
			}
		})
	}
}

// TestPreflightDockerDefault checks docker only when the plan runs
// containers and with.docker is absent.
func TestPreflightDockerDefault(t *testing.T) {
	dir := t.TempDir()
	fakeTool(t, dir, "docker", "exit 1")
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	containers := &plan.Plan{Steps: []*plan.Step{{ID: "pull", Uses: plan.KindPull}}}
	tests := map[string]struct {
		plan      *plan.Plan
		wantClass string
	}{
		"no plan":                  {},
		"host-process plan":        {plan: &plan.Plan{Steps: []*plan.Step{{ID: "t", Uses: plan.KindRun, With: with("command", "x")}}}},
		"plan that pulls an image": {plan: containers, wantClass: ClassNoDocker},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, func(c *Config) { c.Plan = tt.plan })
			err := e.steps.Do(t.Context(), Request{
				Step: &plan.Step{ID: "preflight", Uses: plan.KindPreflight}, Instance: e.inst,
			})
			if ClassOf(err) != tt.wantClass {
				t.Errorf("error = %v, want class %q", err, tt.wantClass)
			}
		})
	}
}

func TestPreflightNotReachable(t *testing.T) {
	e := newEnv(t)
	gone := platform.Instance{Name: "gone", Ref: filepath.Join(t.TempDir(), "missing")}
	log := &logBuf{}
	err := e.steps.Do(t.Context(), Request{
		Step: &plan.Step{ID: "preflight", Uses: plan.KindPreflight}, Instance: gone, Log: log,
		With: with("interval", "20ms", "ready_timeout", "200ms", "docker", false),
	})
	se := stepError(t, err)
	if se.Class != ClassNotReachable || !strings.Contains(se.Msg, "gone did not answer the probe within 200ms") {
		t.Errorf("error = %v", err)
	}
	if n := strings.Count(log.String(), "not ready yet"); n != 1 {
		t.Errorf("the same reason was logged %d times, want once:\n%s", n, log)
	}
}

const eightGPUs = `GPU 0: NVIDIA H200 (UUID: GPU-0)
GPU 1: NVIDIA H200 (UUID: GPU-1)
GPU 2: NVIDIA H200 (UUID: GPU-2)
GPU 3: NVIDIA H200 (UUID: GPU-3)
GPU 4: NVIDIA H200 (UUID: GPU-4)
GPU 5: NVIDIA H200 (UUID: GPU-5)
GPU 6: NVIDIA H200 (UUID: GPU-6)
GPU 7: NVIDIA H200 (UUID: GPU-7)
`

func TestCountGPUs(t *testing.T) {
	fixture, err := os.ReadFile("testdata/nvidia-smi-L.txt")
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		out  string
		want int
	}{
		"H200 fixture":            {string(fixture), 1},
		"empty":                   {"", 0},
		"eight":                   {eightGPUs, 8},
		"MIG devices not counted": {"GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-a)\n  MIG 1g.5gb Device 0: (UUID: MIG-b)\n  MIG 1g.5gb Device 1: (UUID: MIG-c)\n", 1},
		"error text":              {"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", 0},
		"no trailing newline":     {"GPU 0: X\nGPU 1: Y", 2},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := countGPUs([]byte(tt.out)); got != tt.want {
				t.Errorf("countGPUs = %d, want %d", got, tt.want)
			}
		})
	}
}

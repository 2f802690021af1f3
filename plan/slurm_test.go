package plan_test

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/taoflow/taoflow/plan"
)

// TestSlurmPlan reads a slurm platform and its pools, with positions.
func TestSlurmPlan(t *testing.T) {
	src := `taoflow: 1
name: p
platform: {kind: slurm, host: me@login, workdir: /shared/tf}
budget: {max_gpu_hours: 12.5}
instances:
  a100:
    partition: gpu
    account: lab
    qos: normal
    gpus: 2
    cpus: 16
    mem: 64G
    time: "1-02:03:04"
    constraint: a100&ib
    slots: 4
  cpu: {time: 90m}
steps:
  - {id: train, uses: run, matrix: {lr: [1, 2]}, with: {command: "echo hi"}}
`
	p, diags := plan.Parse("plan.yaml", []byte(src), plan.Options{})
	if diags.HasErrors() || p == nil {
		t.Fatalf("plan does not parse: %v", diags)
	}
	if got, want := p.Platform.Slurm, (plan.SlurmPlatform{Host: "me@login", Workdir: "/shared/tf", Pos: p.Platform.Slurm.Pos}); got != want {
		t.Errorf("platform = %+v, want %+v", got, want)
	}
	a := p.Instance("a100")
	want := plan.Pool{Partition: "gpu", Account: "lab", QOS: "normal", CPUs: 16, Mem: "64G", Constraint: "a100&ib",
		Time: "1-02:03:04", Minutes: 24*60 + 2*60 + 4, TimePos: a.Pool.TimePos, Pos: a.Pool.Pos}
	if diff := cmp.Diff(want, a.Pool); diff != "" {
		t.Errorf("pool (-want +got):\n%s", diff)
	}
	if a.Pool.Pos.Line != 7 || a.Pool.TimePos.Line != 13 {
		t.Errorf("positions %+v %+v, want lines 7 and 13", a.Pool.Pos, a.Pool.TimePos)
	}
	if a.GPUs != 2 || a.Slots != 4 {
		t.Errorf("gpus %d slots %d", a.GPUs, a.Slots)
	}
	if got := p.Instance("cpu").Pool.Minutes; got != 90 {
		t.Errorf("90m = %d minutes", got)
	}
	if p.Budget.MaxGPUHours != 12.5 {
		t.Errorf("max_gpu_hours = %v", p.Budget.MaxGPUHours)
	}
}

// TestSlurmPlanErrors: what the slurm platform does not read, and slurm
// keys elsewhere, are errors at their keys, naming the fix.
func TestSlurmPlanErrors(t *testing.T) {
	for name, tc := range map[string]struct{ plan, want string }{
		"pool keys on ssh":       {"platform: ssh\ninstances:\n  a: {host: h, partition: gpu}\n", "5:16: error: instance \"a\": partition, account, qos, cpus, mem, time and constraint are for the slurm platform"},
		"host on brev":           {"platform: {kind: brev, host: me@login}\ninstances:\n  a: {existing: x}\n", "3:24: error: platform brev: host: and workdir: are slurm settings"},
		"create on slurm":        {"platform: slurm\ninstances:\n  a: {create: {type: x}}\n", "5:3: error: instance \"a\": on slurm an instance is a pool of jobs"},
		"host on slurm":          {"platform: slurm\ninstances:\n  a: {host: h}\n", "remove create, existing and host"},
		"bad time":               {"platform: slurm\ninstances:\n  a: {time: \"0\"}\n", "5:13: error: instance \"a\": time: \"0\": a time limit must be more than 0"},
		"time shape":             {"platform: slurm\ninstances:\n  a: {time: soon}\n", "must be a Slurm time"},
		"bad mem":                {"platform: slurm\ninstances:\n  a: {mem: 4GB}\n", "must be a whole number of megabytes"},
		"hostile partition":      {"platform: slurm\ninstances:\n  a: {partition: \"../x y\"}\n", "must be a Slurm name"},
		"ngc-auth":               {"platform: slurm\ninstances:\n  a: {}\nsteps:\n  - {id: p, uses: ngc-auth}\n", "7:19: error: step \"p\": uses: ngc-auth runs docker"},
		"with.gpus":              {"platform: slurm\ninstances:\n  a: {gpus: 1}\nsteps:\n  - {id: r, uses: run, with: {command: x, gpus: all}}\n", "with.gpus is not used on slurm"},
		"max_gpu_hours on local": {"budget: {max_gpu_hours: 3}\ninstances:\n  a: {}\n", "warning: budget: max_gpu_hours counts Slurm jobs' GPU-hours"},
	} {
		t.Run(name, func(t *testing.T) {
			src := "taoflow: 1\nname: p\n" + tc.plan
			if !strings.Contains(tc.plan, "steps:") {
				src += "steps:\n  - {id: r, uses: run, with: {command: x}}\n"
			}
			_, diags := plan.Parse("plan.yaml", []byte(src), plan.Options{})
			var all []string
			for _, d := range diags {
				all = append(all, d.String())
			}
			if got := strings.Join(all, "\n"); !strings.Contains(got, tc.want) {
				t.Errorf("diagnostics:\n%s\nwant one with %q", got, tc.want)
			}
		})
	}
}

func TestSlurmMinutes(t *testing.T) {
	for in, want := range map[string]int{
		"1": 1, "90": 90, "1:30": 2, "0:05": 1, "2:00:00": 120, "1-0": 1440, "1-2": 1560, "1-2:30": 1590,
		"1-0:0:1": 1441, "4h": 240, "90m": 90, "30s": 1, "1h30m": 90, "UNLIMITED": math.MaxInt, "INFINITE": math.MaxInt,
	} {
		got, err := plan.SlurmMinutes(in)
		if err != nil || got != want {
			t.Errorf("SlurmMinutes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "x", "1:2:3:4", "-1", "1-2:3:4:5", "0m", "99999999999999999999"} {
		if got, err := plan.SlurmMinutes(in); err == nil {
			t.Errorf("SlurmMinutes(%q) = %d, want an error", in, got)
		}
	}
}

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/taoflow/taoflow/platform/brev/brevtest"
)

// goldenDir holds the golden files, found from the package directory
// (tests chdir away from it).
var goldenDir = func() string {
	wd, _ := os.Getwd()
	return filepath.Join(wd, "testdata", "golden")
}()

// fakeOnPath starts a fake brev without an sshd (enough for brev search)
// and points the environment at it.
func fakeOnPath(t *testing.T) *brevtest.Fake {
	t.Helper()
	f := brevtest.Start(t, brevtest.Options{})
	for _, kv := range f.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	t.Chdir(t.TempDir())
	return f
}

const costPlan = `taoflow: 1
name: cost
platform: brev
budget: {max_cost: 500, max_duration: 8h}
instances:
  big: {create: {gpu: A100, min_vram: 80}}
  small: {create: {type: "g5.2xlarge,g5.xlarge"}, slots: 2}
  eight: {create: {gpu: H100, gpus: 8, max_price: 30}}
steps:
  - {id: pre, uses: preflight}
  - {id: train, uses: run, needs: [pre], matrix: {x: [1, 2, 3]}, with: {command: "echo hi"}}
  - {id: wait, uses: wait, needs: [train], matrix: inherit, with: {timeout: 2h}}
finally:
  - {id: teardown, uses: delete}
`

// TestPlanCost: plan shows each created instance's candidate types with
// their list prices and the cost lines (golden), and plan --json carries
// the same figures. brev search ran with stdin /dev/null; nothing was
// created.
func TestPlanCost(t *testing.T) {
	f := fakeOnPath(t)
	writePlan(t, "cost.yaml", costPlan)
	code, out, errOut := applyCLI(t, "plan", "cost.yaml")
	if code != exitOK {
		t.Fatalf("plan exit %d\n%s%s", code, out, errOut)
	}
	golden(t, "plan-cost.txt", out)

	code, out, errOut = applyCLI(t, "plan", "--json", "cost.yaml")
	if code != exitOK {
		t.Fatalf("plan --json exit %d\n%s", code, errOut)
	}
	var got struct {
		Preview struct {
			Instances []struct {
				Name       string
				Type       string
				Candidates []struct {
					Type  string
					Price *float64 `json:"price_per_hour"`
				}
			}
			Cost struct {
				PerHour float64  `json:"per_hour"`
				AtMost  *float64 `json:"at_most"`
				Minimum float64
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	c := got.Preview.Cost
	// big 2.59 + small 1.45 + eight 23.92 (each at the first of its chain).
	if c.PerHour < 27.959 || c.PerHour > 27.961 {
		t.Errorf("per_hour %v, want 27.96", c.PerHour)
	}
	// The dearest type of each chain for every wait it may hold, plus boot:
	// big 5.07×(3×2h+7m, the longest boot of its chain) + small 1.45×(2×2h+4m) + eight 23.92×(3×2h+10m).
	want := 5.07*(6+7.0/60) + 1.45*(4+4.0/60) + 23.92*(6+10.0/60)
	if c.AtMost == nil || *c.AtMost < want-0.01 || *c.AtMost > want+0.01 {
		t.Errorf("at_most %v, want %.2f", c.AtMost, want)
	}
	if chain := got.Preview.Instances[0].Type; chain != "gpu_1x_a100_80gb_sxm4,a2-ultragpu-1g" {
		t.Errorf("big's chain %q, want the A100 80 GB types cheapest first", chain)
	}
	for _, call := range f.Calls() {
		if call.StdinPiped {
			t.Errorf("brev %q ran with a piped stdin", call.Args)
		}
		if call.Command == "create" {
			t.Errorf("plan ran brev create")
		}
	}

	// A wait without a timeout: no bound, and plan says which.
	writePlan(t, "unbounded.yaml", strings.Replace(costPlan, "with: {timeout: 2h}", "with: {interval: 1s}", 1))
	_, out, _ = applyCLI(t, "plan", "unbounded.yaml")
	if !strings.Contains(out, "~$27.96/h while all 3 instances run; no upper bound: wait step wait has no timeout") {
		t.Errorf("an unbounded plan's cost line:\n%s", out)
	}
}

// golden compares got with testdata/golden/name; UPDATE_GOLDEN=1 rewrites
// it.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join(goldenDir, name)
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s\nRegenerate with UPDATE_GOLDEN=1 go test ./cmd/taoflow -run %s", name, diff, t.Name())
	}
}

// TestSelectNoMatch: a filter nothing passes is exit 2 before anything is
// created — no brev create in the call log — naming the nearest offers and
// the filter that excluded each.
func TestSelectNoMatch(t *testing.T) {
	for name, c := range map[string]struct {
		create string
		want   []string
	}{
		"price": {"{gpu: H100, gpus: 8, max_price: 20}", []string{
			`gpu_1x_h100_pcie \(1x H100 80 GB, lambda-labs, not stoppable\) \$2\.49/h: excluded by gpus: it has 1, not 8`,
			`gpu_8x_h100_sxm5 \(8x H100 80 GB, lambda-labs, not stoppable\) \$23\.92/h: excluded by max_price: \$23\.92/h is over \$20\.00/h`}},
		"gpu":       {"{gpu: B200}", []string{`no type has a GPU named like "B200"`, `n1-highmem-4:nvidia-tesla-t4:1 .*excluded by gpu: its GPU is T4, not B200`}},
		"stoppable": {"{gpu: H100, stoppable: true, gpus: 1}", []string{`gpu_1x_h100_pcie .*excluded by stoppable: it cannot be stopped`}},
		"provider":  {"{gpu: L40S, provider: gcp}", []string{`g6e.xlarge .*excluded by provider: it is aws, not gcp`}},
		"min_vram":  {"{gpu: A10G, min_vram: 40}", []string{`g5.xlarge .*excluded by min_vram: 24 GB per GPU is under 40`}},
		"min_disk":  {"{gpu: A100, gpus: 1, min_disk: 20000}", []string{`gpu_1x_a100_sxm4 .*excluded by min_disk: at most 512 GB is under 20000`}},
	} {
		t.Run(name, func(t *testing.T) {
			f := fakeOnPath(t)
			writePlan(t, "p.yaml", "taoflow: 1\nname: nomatch\nplatform: brev\ninstances:\n  gpu: {create: "+c.create+"}\nsteps:\n  - {id: pre, uses: preflight}\n")
			for _, cmd := range [][]string{{"plan", "p.yaml"}, {"apply", "--yes", "--output", "plain", "p.yaml"}} {
				code, out, errOut := applyCLI(t, cmd...)
				if code != exitUsage {
					t.Errorf("%s: exit %d, want 2\n%s%s", cmd[0], code, out, errOut)
				}
				if !strings.Contains(errOut, "p.yaml:5:3: error: instance gpu: no Brev instance type matches create: {") {
					t.Errorf("%s: no position or filter in:\n%s", cmd[0], errOut)
				}
				for _, w := range c.want {
					if !regexp.MustCompile(w).MatchString(errOut) {
						t.Errorf("%s: stderr lacks %s:\n%s", cmd[0], w, errOut)
					}
				}
			}
			if calls := f.CallsOf("create", ""); len(calls) != 0 {
				t.Errorf("brev create ran: %q", calls[0].Args)
			}
			if len(f.CallsOf("search", "")) == 0 {
				t.Errorf("brev search never ran")
			}
			if _, err := os.Stat(".taoflow"); err == nil {
				t.Errorf("apply recorded a run")
			}
		})
	}
}

// TestBudgetFloor: a max_cost under what booting the instances costs is
// refused by plan and apply (exit 2), nothing created.
func TestBudgetFloor(t *testing.T) {
	f := fakeOnPath(t)
	writePlan(t, "p.yaml", "taoflow: 1\nname: floor\nplatform: brev\nbudget: {max_cost: 0.5}\ninstances:\n  gpu: {create: {gpu: H100, gpus: 8}}\nsteps:\n  - {id: pre, uses: preflight}\n")
	for _, cmd := range [][]string{{"plan", "p.yaml"}, {"apply", "--yes", "p.yaml"}} {
		code, _, errOut := applyCLI(t, cmd...)
		// 8x H100 at $23.92/h for a 10-minute boot: $3.99.
		if code != exitUsage || !strings.Contains(errOut, "p.yaml:4:1: error: budget.max_cost is $0.50, but booting the plan's instances alone costs at least $3.99") {
			t.Errorf("%s: exit %d\n%s", cmd[0], code, errOut)
		}
	}
	if len(f.CallsOf("create", "")) != 0 {
		t.Errorf("brev create ran")
	}
}

// TestSelectFiltersChain: each filter reaches brev search or is applied to
// its answer, and the matching types, cheapest first, are plan's chain.
func TestSelectFiltersChain(t *testing.T) {
	fakeOnPath(t)
	for create, want := range map[string]string{
		"{gpu: A100}":                                      "gpu_1x_a100_sxm4,gpu_1x_a100_80gb_sxm4,a2-ultragpu-1g,p4d.24xlarge",
		"{gpu: A100, gpus: 8}":                             "p4d.24xlarge",
		"{gpu: a100, min_vram: 80}":                        "gpu_1x_a100_80gb_sxm4,a2-ultragpu-1g",
		"{gpu: A100, max_price: 2.6}":                      "gpu_1x_a100_sxm4,gpu_1x_a100_80gb_sxm4",
		"{gpu: A100, stoppable: true}":                     "a2-ultragpu-1g,p4d.24xlarge",
		"{gpu: H100, provider: aws}":                       "p5.48xlarge",
		"{gpu: H100, min_disk: 3000}":                      "gpu_8x_h100_sxm5,p5.48xlarge",
		"{type: \"g5.2xlarge,g5.xlarge\"}":                 "g5.2xlarge,g5.xlarge",
		"{type: \"g5.2xlarge,g6.xlarge\", max_price: 1.2}": "g6.xlarge",
	} {
		writePlan(t, "p.yaml", "taoflow: 1\nname: chain\nplatform: brev\ninstances:\n  gpu: {create: "+create+"}\nsteps:\n  - {id: pre, uses: preflight}\n")
		code, out, errOut := applyCLI(t, "plan", "--json", "p.yaml")
		if code != exitOK {
			t.Errorf("%s: exit %d\n%s", create, code, errOut)
			continue
		}
		var got struct {
			Preview struct{ Instances []struct{ Type string } }
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		if chain := got.Preview.Instances[0].Type; chain != want {
			t.Errorf("create: %s: chain %q, want %q", create, chain, want)
		}
	}
}

// TestBrevFallbackChain: an instance picked by GPU is created with every
// matching type, cheapest first, as the --type chain; the cheapest has no
// capacity, so brev makes the next, and the run learns that type.
func TestBrevFallbackChain(t *testing.T) {
	f, dir := brevEnv(t, brevtest.Options{})
	// The upload-failure plan, uploading where it can: the run succeeds.
	plan := strings.Replace(brevUploadFails, "{create: {type: g5.xlarge}}", "{create: {gpu: H100, gpus: 1}}", 1)
	writePlan(t, "chain.yaml", strings.Replace(plan, "file:///proc/taoflow-cannot-write-here", "file://"+dir+"/out", 1))
	code, out, errOut := applyCLI(t, "apply", "--yes", "--output", "plain", "chain.yaml")
	if code != exitOK {
		t.Fatalf("apply exit %d\n%s%s", code, out, errOut)
	}
	creates := f.CallsOf("create", "")
	if len(creates) != 1 {
		t.Fatalf("%d brev create calls, want 1", len(creates))
	}
	args := creates[0].Args
	if i := slices.Index(args, "--type"); i < 0 || args[i+1] != "gpu_1x_h100_pcie,gpu_1x_h100_sxm5" {
		t.Errorf("brev %q: want --type gpu_1x_h100_pcie,gpu_1x_h100_sxm5 (cheapest first)", args)
	}
	for _, c := range f.CallsOf("search", "") {
		if c.StdinPiped {
			t.Errorf("brev search ran with a piped stdin")
		}
		if !slices.Contains(c.Args, "--gpu-name") || slices.Contains(c.Args, "--gpus") {
			t.Errorf("brev %q: want --gpu-name, and the GPU count applied by taoflow", c.Args)
		}
	}
	f.CheckNoneAlive(t)

	// The end of the run and status say what it cost: the fake cloud's
	// instance-seconds × the type's list price, within a second's worth.
	bills := f.Bills()
	if len(bills) != 1 || bills[0].Type != "gpu_1x_h100_sxm5" {
		t.Fatalf("bills %+v, want one for gpu_1x_h100_sxm5", bills)
	}
	billed := bills[0].End.Sub(bills[0].Start).Seconds()
	if !regexp.MustCompile(`instance gpu \(gpu_1x_h100_sxm5\): up \S+ at \$3\.29/h = \$\d+\.\d+; GPU idle \S+\n(.|\n)*cost ~\$\d+\.\d+ at Brev list prices \(an estimate\); GPU idle`).MatchString(errOut) {
		t.Errorf("the end of the run does not say what it cost:\n%s", errOut)
	}
	code, out, errOut = applyCLI(t, "status", "--json", "latest")
	if code != exitOK {
		t.Fatalf("status exit %d\n%s", code, errOut)
	}
	var st struct {
		Cost struct {
			Total     float64
			Instances []struct {
				Type   string
				Price  float64 `json:"price_per_hour"`
				Uptime float64 `json:"uptime_seconds"`
				Cost   float64
				Idle   float64 `json:"gpu_idle_seconds"`
				Until  *string `json:"billed_until"`
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Cost.Instances) != 1 {
		t.Fatalf("status --json cost: %s", out)
	}
	ic := st.Cost.Instances[0]
	secondsWorth := 3.29 / 3600
	if ic.Type != "gpu_1x_h100_sxm5" || ic.Price != 3.29 || ic.Until == nil {
		t.Errorf("status --json: %+v", ic)
	}
	if d := ic.Cost - billed*3.29/3600; d > secondsWorth || d < -secondsWorth {
		t.Errorf("cost $%.6f, the fake billed %.3fs × $3.29/h = $%.6f: off by more than a second's worth", ic.Cost, billed, billed*3.29/3600)
	}
	if st.Cost.Total != ic.Cost || ic.Idle <= 0 || ic.Idle >= ic.Uptime {
		t.Errorf("total %v, idle %vs of %vs uptime", st.Cost.Total, ic.Idle, ic.Uptime)
	}
	// The manifest next to the results says what the instance had cost by
	// then.
	raw, err := os.ReadFile(filepath.Join(dir, "out", "taoflow-run.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Type string `json:"instance_type"`
		Cost *struct {
			Price  float64 `json:"price_per_hour"`
			Uptime float64 `json:"uptime_seconds"`
			Cost   float64
		} `json:"instance_cost"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m.Type != "gpu_1x_h100_sxm5" || m.Cost == nil || m.Cost.Price != 3.29 || m.Cost.Uptime > ic.Uptime+1 || m.Cost.Cost > ic.Cost+secondsWorth {
		t.Errorf("manifest: %s", raw)
	}
}

// TestBrevNonStoppableUploadFails: when the results upload fails on an
// instance whose type cannot be stopped, taoflow does not try brev stop
// (it would fail), does not delete the results, and leaves the instance
// running with a loud message naming it and its hourly price: exit 3.
func TestBrevNonStoppableUploadFails(t *testing.T) {
	f, _ := brevEnv(t, brevtest.Options{})
	writePlan(t, "upfail.yaml", strings.Replace(brevUploadFails, "{create: {type: g5.xlarge}}", "{create: {gpu: H100, gpus: 1, max_price: 3.5}}", 1))
	code, out, errOut := applyCLI(t, "apply", "--yes", "--output", "plain", "upfail.yaml")
	if code != exitTeardown {
		t.Fatalf("apply exit %d, want 3\n%s%s", code, out, errOut)
	}
	if !regexp.MustCompile(`LEFT RUNNING: gpu \(tf-brev-upfail-\S+-gpu\) still holds the results .* its type gpu_1x_h100_sxm5 cannot be stopped; it bills ~\$3\.29/h \(list price\) until you fetch the results and run taoflow destroy brev-upfail-\S+ --yes`).MatchString(out + errOut) {
		t.Errorf("no loud message naming the instance and its price:\n%s%s", out, errOut)
	}
	if n := len(f.CallsOf("stop", "")); n != 0 {
		t.Errorf("brev stop ran %d times on a type that cannot stop", n)
	}
	if n := len(f.CallsOf("delete", "")); n != 0 {
		t.Errorf("the instance holding the results was deleted")
	}
	alive := f.Alive()
	if len(alive) != 1 || alive[0].Status != "RUNNING" || alive[0].Type != "gpu_1x_h100_sxm5" {
		t.Fatalf("left: %+v, want the instance RUNNING", alive)
	}
	code, out, errOut = applyCLI(t, "destroy", "latest", "--yes")
	if code != exitOK {
		t.Fatalf("destroy exit %d\n%s%s", code, out, errOut)
	}
	f.CheckNoneAlive(t)
}

const brevBudgetPlan = `taoflow: 1
name: brev-budget
platform: brev
budget: {max_duration: 15s}
instances:
  gpu: {create: {gpu: A10G}}
steps:
  - id: train
    uses: run
    with: {command: "mkdir -p ~/results && echo partial > ~/results/ckpt.txt && while true; do sleep 0.2; done"}
  - id: wait
    uses: wait
    needs: [train]
    with: {interval: 100ms, timeout: 1h}
finally:
  - id: save
    uses: upload-s3
    with: {from: "~/results", to: "file://OUT"}
  - id: teardown
    uses: delete
    needs: [save]
`

// TestBrevBudgetTrips: a run that outlasts budget.max_duration is told so,
// its running job is cancelled, the finalizers still run (the upload in
// finally happens) and the instance is deleted: exit 1, not 130.
func TestBrevBudgetTrips(t *testing.T) {
	f, dir := brevEnv(t, brevtest.Options{})
	writePlan(t, "budget.yaml", strings.Replace(brevBudgetPlan, "OUT", dir+"/out", 1))
	code, out, errOut := applyCLI(t, "apply", "--yes", "--output", "plain", "budget.yaml")
	if code != exitFailed {
		t.Fatalf("apply exit %d, want 1\n%s%s", code, out, errOut)
	}
	if !regexp.MustCompile(`taoflow: over budget: the run has lasted 1[5-9]s, budget.max_duration 15s; cancelling the running work, then tearing down`).MatchString(errOut) {
		t.Errorf("apply does not say the budget ended the run:\n%s", errOut)
	}
	if !strings.Contains(errOut, "run brev-budget-") || !strings.Contains(errOut, "over budget (the run has lasted") {
		t.Errorf("the verdict does not name the budget:\n%s", errOut)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "out", "ckpt.txt")); err != nil || string(b) != "partial\n" {
		t.Errorf("the upload in finally did not happen: %q, %v", b, err)
	}
	f.CheckNoneAlive(t)
	if len(f.CallsOf("delete", "")) == 0 {
		t.Errorf("the instance was never deleted")
	}
	code, out, _ = applyCLI(t, "status", "--json", "latest")
	var st struct {
		State string
		Nodes []struct{ ID, State, Message string }
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != exitOK {
		t.Fatalf("status: %v\n%s", err, out)
	}
	for _, n := range st.Nodes {
		if n.ID == "wait@gpu" && n.State != "canceled" || n.ID == "save@gpu" && n.State != "succeeded" {
			t.Errorf("node %s is %s: %s", n.ID, n.State, n.Message)
		}
	}
	if st.State != "failed" {
		t.Errorf("run state %s, want failed", st.State)
	}
}

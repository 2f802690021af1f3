package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/taoflow/taoflow/platform/brev/brevtest"
)

const brevUnpriced = `taoflow: 1
name: brev-unpriced
platform: brev
budget: {max_cost: 0.01}
instances:
  gpu: {create: {type: TYPES}}
steps:
  - id: hello
    uses: run
    with: {command: "echo hello"}
  - id: wait
    uses: wait
    needs: [hello]
    with: {interval: 100ms, timeout: 5m}
`

// TestBudgetUnpriced: under budget.max_cost, an instance whose type has no
// known list price (brev search failed, or does not list a type of its
// chain) could cost anything uncounted: plan and apply refuse the plan,
// exit 2, saying why, before anything is created or recorded. With
// budget.unpriced: allow, plan says max_cost does not count it (text and
// JSON) and apply runs it.
func TestBudgetUnpriced(t *testing.T) {
	f, _ := brevEnv(t, brevtest.Options{})
	writePlan(t, "p.yaml", strings.Replace(brevUnpriced, "TYPES", "g5.xlarge", 1))
	writePlan(t, "chain.yaml", strings.Replace(brevUnpriced, "TYPES", `"g5.xlarge,g5.nosuch"`, 1))
	writePlan(t, "allow.yaml", strings.Replace(strings.Replace(brevUnpriced, "TYPES", "g5.xlarge", 1), "{max_cost: 0.01}", "{max_cost: 0.01, unpriced: allow}", 1))

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", "p.yaml"}, "p.yaml:4:1: error: budget.max_cost is $0.01, but no list price is known for instance gpu (brev search failed: "},
		{[]string{"apply", "--yes", "--output", "plain", "p.yaml"}, "no list price is known for instance gpu (brev search failed: "},
		{[]string{"apply", "--yes", "--output", "plain", "chain.yaml"}, "no list price is known for instance gpu (Brev's catalogue (brev search) does not list a type of their chain), so max_cost could not count what it costs: nothing was created"},
	} {
		if !strings.HasSuffix(c.args[len(c.args)-1], "chain.yaml") {
			f.Inject(brevtest.Fault{Kind: "search-error"})
		}
		code, out, errOut := applyCLI(t, c.args...)
		if code != exitUsage || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, "add unpriced: allow to budget") {
			t.Errorf("%s: exit %d, want 2 saying %q\n%s%s", strings.Join(c.args, " "), code, c.want, out, errOut)
		}
	}
	if n := len(f.CallsOf("create", "")); n != 0 {
		t.Fatalf("brev create ran %d times under a budget that could not count the instance", n)
	}
	if _, err := os.Stat(".taoflow"); err == nil {
		t.Error("a run was recorded although nothing could start")
	}

	f.Inject(brevtest.Fault{Kind: "search-error"})
	code, out, errOut := applyCLI(t, "plan", "allow.yaml")
	if code != exitOK || !strings.Contains(out, "  max_cost does not count gpu: no price is known (budget.unpriced: allow), so the budget does not limit what it costs") {
		t.Errorf("plan with unpriced: allow: exit %d\n%s%s", code, out, errOut)
	}
	f.Inject(brevtest.Fault{Kind: "search-error"})
	code, out, errOut = applyCLI(t, "plan", "--json", "allow.yaml")
	var pj struct {
		Preview struct {
			Cost struct {
				Uncounted []string `json:"budget_uncounted"`
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &pj); err != nil || code != exitOK || len(pj.Preview.Cost.Uncounted) != 1 || pj.Preview.Cost.Uncounted[0] != "gpu" {
		t.Errorf("plan --json with unpriced: allow: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	f.Inject(brevtest.Fault{Kind: "search-error"})
	code, out, errOut = applyCLI(t, "apply", "--yes", "--output", "plain", "allow.yaml")
	if code != exitOK || !strings.Contains(errOut, "+ 1 instance of unknown price") {
		t.Errorf("apply with unpriced: allow: exit %d\n%s%s", code, out, errOut)
	}
	f.CheckNoneAlive(t)
}

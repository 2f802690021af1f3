package main

import (
	"strings"
	"testing"

	"github.com/taoflow/taoflow/platform/brev/brevtest"
)

const brevHostile = `taoflow: 1
name: brev-hostile
platform: brev
BUDGET
instances:
  gpu: {create: CREATE}
steps:
  - id: hello
    uses: run
    with: {command: "echo hello"}
  - id: wait
    uses: wait
    needs: [hello]
    with: {interval: 100ms, timeout: 5m}
`

// TestSearchHostile: a brev whose search answer holds an entry no real
// brev prints — a type with a comma (which brev create would read as a
// fallback chain that no filter checked, p5.48xlarge at $98/h behind a
// $0.01 A10G), a negative price (every cost negative: max_cost could never
// trip), terminal escapes — is not trusted: plan and apply refuse the plan
// (exit 2) saying which entry and why, escaped; no such type is ever
// created, and max_price and max_cost are never bypassed.
func TestSearchHostile(t *testing.T) {
	for name, c := range map[string]struct {
		offer, want string
	}{
		"comma": {`{"type":"g5.xlarge,p5.48xlarge","provider":"aws","gpu_name":"A10G","gpu_count":1,"vram_per_gpu_gb":24,"price_per_hour":0.01}`,
			`entry 1 (type "g5.xlarge,p5.48xlarge") has a type holding a comma`},
		"negative price": {`{"type":"g5.xlarge","provider":"aws","gpu_name":"A10G","gpu_count":1,"vram_per_gpu_gb":24,"price_per_hour":-98.32}`,
			`has price_per_hour -98.32`},
		"escapes": {`{"type":"g5.xlarge","provider":"aws","gpu_name":"A10G\u001b]52;c;aGk=\u0007\u001b[2K","gpu_count":1,"price_per_hour":0.5}`,
			`has a gpu_name holding a control character`},
	} {
		t.Run(name, func(t *testing.T) {
			f, _ := brevEnv(t, brevtest.Options{ExtraOffers: []string{c.offer}})
			plan := func(budget, create string) string {
				return strings.Replace(strings.Replace(brevHostile, "BUDGET", budget, 1), "CREATE", create, 1)
			}
			writePlan(t, "price.yaml", plan("", "{gpu: A10G, max_price: 1.3}"))
			writePlan(t, "cost.yaml", plan("budget: {max_cost: 0.5}", "{type: g5.xlarge}"))
			for _, args := range [][]string{
				{"plan", "price.yaml"},
				{"plan", "--json", "price.yaml"},
				{"apply", "--yes", "--output", "plain", "price.yaml"},
				{"plan", "cost.yaml"},
				{"apply", "--yes", "--output", "plain", "cost.yaml"},
			} {
				code, out, errOut := applyCLI(t, args...)
				both := out + errOut
				if code != exitUsage || !strings.Contains(both, c.want) {
					t.Errorf("%s: exit %d, want 2 saying %q\n%s", strings.Join(args, " "), code, c.want, both)
				}
				if strings.ContainsAny(both, "\x1b\x07") {
					t.Errorf("%s: a terminal escape of brev search's answer reached the output:\n%q", strings.Join(args, " "), both)
				}
			}
			if calls := f.CallsOf("create", ""); len(calls) != 0 {
				t.Fatalf("brev create ran on a search answer that cannot be trusted: %q", calls[0].Args)
			}
		})
	}
}

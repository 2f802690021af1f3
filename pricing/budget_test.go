package pricing

import (
	"testing"
	"time"

	"github.com/taoflow/taoflow/plan"
)

// TestOverBudget: each limit trips when reached, names itself and the
// figures; below both nothing trips; a zero limit is none.
func TestOverBudget(t *testing.T) {
	b := plan.Budget{MaxCost: 50, MaxDuration: 8 * time.Hour}
	for name, c := range map[string]struct {
		b    plan.Budget
		cost float64
		age  time.Duration
		want string
	}{
		"under both":   {b, 49.99, 7 * time.Hour, ""},
		"cost reached": {b, 50, time.Hour, "the estimated cost so far, $50.00, reached budget.max_cost $50.00"},
		"age reached":  {b, 1, 8*time.Hour + 400*time.Millisecond, "the run has lasted 8h0m0s, budget.max_duration 8h0m0s"},
		"no limits":    {plan.Budget{}, 1e6, 1e6 * time.Hour, ""},
		"cost only":    {plan.Budget{MaxCost: 1}, 0.5, 1e6 * time.Hour, ""},
	} {
		if got := OverBudget(c.b, c.cost, c.age); got != c.want {
			t.Errorf("%s: %q, want %q", name, got, c.want)
		}
	}
}

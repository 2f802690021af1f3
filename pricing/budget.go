package pricing

import (
	"fmt"
	"time"

	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
)

// OverBudget says which limit of b the run crossed, with a cost so far and
// an age; "" when none.
func OverBudget(b plan.Budget, cost float64, age time.Duration) string {
	switch {
	case b.MaxCost > 0 && cost >= b.MaxCost:
		return fmt.Sprintf("the estimated cost so far, %s, reached budget.max_cost %s", platform.Dollars(cost), platform.Dollars(b.MaxCost))
	case b.MaxDuration > 0 && age >= b.MaxDuration:
		return fmt.Sprintf("the run has lasted %s, budget.max_duration %s", age.Round(time.Second), b.MaxDuration)
	}
	return ""
}

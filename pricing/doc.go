// Package pricing holds what taoflow decides from a catalogue's list
// prices, apart from the run it prices: the instance types a plan's
// created instances may get (Select, over a platform.Searcher that runner
// builds from the plan; Selection, Candidates), what a run may cost before
// it starts (Estimated, an Estimate) and whether the plan's budget allows
// it (CheckBudget), whether a running run crossed its budget (OverBudget),
// and what the instances a run created have cost so far, from the state
// (Costs, a RunCost; select.go, budget.go, cost.go).
//
// It builds no platform and creates nothing. Its errors are plain: every
// error of Select and CheckBudget is the plan's, refused as written, and
// runner (runner.Select, runner.CheckBudget) makes them a
// runner.RefusedError, exit 2. runner records the facts Costs reads
// (DataBilledFrom, DataPrice, FactUses) and watches the budget during a
// run.
package pricing

// Package runner drives taoflow runs: it joins the engine, the steps, a
// platform and the state to apply a plan (Start, Run, Finish), resume a run
// whose apply died (LoadResumed), tear down what a run left (Destroyer) and
// find what no state accounts for (Reap).
//
// It holds the decisions a run makes beyond scheduling: every instance and
// job is recorded in the state before it is created; an instance the run
// created is deleted when released, stopped instead when a results upload on
// it failed, and left running with keep: true; a resumed run uses again the
// instances and jobs an earlier attempt made. The platform of a run's
// resources is recorded with them (PlatformData), so destroy rebuilds it
// without the plan.
//
// Around the run it also holds what is decided from prices and results:
// the choice of an instance type from the platform's offers (Select,
// select.go), the estimate and the budget a plan may not exceed
// (Estimated, CheckBudget, budget.go), what each instance cost (Costs,
// cost.go), the salvage of partial results before a release
// (salvage.go), the notify command at the end of a run (notify.go), and
// the results table and download of a finished run (Results,
// DownloadResults; results.go, download.go).
//
// cmd/taoflow parses flags, prints and maps outcomes to exit codes; it
// decides nothing a run does. The engine stays ignorant of platforms and
// the state: runner provides the engine's Executor and Instances.
package runner

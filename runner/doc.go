// Package runner drives taoflow runs: it joins the engine, the steps, a
// platform and the state to apply a plan, resume a run whose apply died
// (LoadResumed), tear down what a run left (Destroyer) and find what no
// state accounts for (Reap).
//
// An apply is Expand (the plan's graph, expanded once, under the run's
// id: the budget is checked on it before anything is asked or created),
// Start (the platform, the state and the run's record), Apply.Run and
// Apply.Notify. Run runs the graph, decides how the run ended (Verdict,
// then ExitCode, exit.go, the one definition of the exit codes), records
// that end and returns it as one Outcome: the views print it and
// cmd/taoflow exits with its ExitCode.
//
// It holds the decisions a run makes beyond scheduling: every instance and
// job is recorded in the state before it is created; an instance the run
// created is deleted when released, stopped instead when a results upload on
// it failed, and left running with keep: true; a resumed run uses again the
// instances and jobs an earlier attempt made. The platform of a run's
// resources is recorded with them (PlatformData), so destroy rebuilds it
// without the plan.
//
// Prices are package pricing's: runner builds the platform whose catalogue
// picks the instance types (Select, select.go, which makes pricing's
// refusals a *RefusedError, as CheckBudget does), records the facts a
// run's cost is counted from, and watches the budget while the run goes
// on (budget.go). Around the run it also holds the salvage of partial
// results before a release (salvage.go), the notify command at the end of
// a run (notify.go), and the results table and download of a finished run
// (Results, DownloadResults; results.go, download.go).
//
// cmd/taoflow parses flags, asks the user, prints the Outcome and exits
// with its code; it decides nothing a run does. The engine stays ignorant of platforms and
// the state: runner provides the engine's Executor and Instances.
package runner

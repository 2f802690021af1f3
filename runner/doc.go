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
// cmd/taoflow parses flags, prints and maps outcomes to exit codes; it
// decides nothing a run does. The engine stays ignorant of platforms and
// the state: runner provides the engine's Executor and Instances.
package runner

package runner

import "github.com/taoflow/taoflow/state"

// The exit codes of taoflow (docs/design.md §2.1), defined here and only
// here: a run's end records its code in the state, its RunEnded event and
// its notify summary, so the code is decided where the run ends, and
// cmd/taoflow exits with Outcome.ExitCode. cmd/taoflow/exit.go names the
// same codes for the commands and maps an error to one.
const (
	ExitOK          = 0   // every node and every finalizer succeeded
	ExitFailed      = 1   // a node failed; teardown completed
	ExitUsage       = 2   // usage error or invalid plan; nothing was started
	ExitTeardown    = 3   // teardown incomplete: something may still exist (and bill)
	ExitInterrupted = 130 // interrupted; teardown completed
)

// ExitCode is apply's exit code for a run that ended in runState (one of
// the state.Run* constants Verdict returns).
func ExitCode(runState string) int {
	switch runState {
	case state.RunSucceeded:
		return ExitOK
	case state.RunTeardownIncomplete:
		return ExitTeardown
	case state.RunInterrupted:
		return ExitInterrupted
	}
	return ExitFailed
}

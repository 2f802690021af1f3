package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/taoflow/taoflow/runner"
	"github.com/taoflow/taoflow/state"
)

// The exit codes of taoflow (docs/design.md §2.1). This table is the only place
// they are defined.
const (
	exitOK          = 0   // every node and every finalizer succeeded
	exitFailed      = 1   // a node failed; teardown completed
	exitUsage       = 2   // usage error or invalid plan; nothing was started
	exitTeardown    = 3   // teardown incomplete: something may still exist (and bill)
	exitInterrupted = 130 // interrupted; teardown completed
)

// exitCodes maps the state a run ended in (runner.Verdict) to apply's
// exit code.
var exitCodes = map[string]int{
	state.RunSucceeded:          exitOK,
	state.RunFailed:             exitFailed,
	state.RunTeardownIncomplete: exitTeardown,
	state.RunInterrupted:        exitInterrupted,
}

// exitError carries an exit code up to main. A nil err means the message
// was already printed.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageError marks an error as the user's: exit 2.
func usageError(err error) error { return &exitError{code: exitUsage, err: err} }

// silent returns an error that exits with code without printing anything more.
func silent(code int) error { return &exitError{code: code} }

// exitCode maps an error from run to the process exit code, printing it.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(stderr, "taoflow: %v\n", ee.err)
		}
		return ee.code
	}
	if refused := (*runner.RefusedError)(nil); errors.As(err, &refused) || errors.Is(err, state.ErrUnsafe) {
		fmt.Fprintf(stderr, "taoflow: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(stderr, "taoflow: %v\n", err)
	return exitFailed
}

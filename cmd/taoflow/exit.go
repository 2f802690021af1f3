package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/taoflow/taoflow/runner"
	"github.com/taoflow/taoflow/state"
)

// The exit codes of taoflow (docs/design.md §2.1), as runner defines them:
// a run's end records its code (runner.ExitCode), and apply exits with the
// runner.Outcome's.
const (
	exitOK          = runner.ExitOK          // every node and every finalizer succeeded
	exitFailed      = runner.ExitFailed      // a node failed; teardown completed
	exitUsage       = runner.ExitUsage       // usage error or invalid plan; nothing was started
	exitTeardown    = runner.ExitTeardown    // teardown incomplete: something may still exist (and bill)
	exitInterrupted = runner.ExitInterrupted // interrupted; teardown completed
)

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

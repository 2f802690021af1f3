package runner

import (
	"context"
	"fmt"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/platform"
	"github.com/taoflow/taoflow/steps"
)

// factPartial is, on an upload or fetch node that salvaged results
// (docs/design.md §8.6), why they may be partial.
const factPartial = "partial"

// salvageCheck prepares the request of a salvage task (engine.Task.Salvage):
// it runs only when the directory it copies holds something, else it
// returns engine.ErrNothingToSalvage with the reason, and its manifest
// says why the results may be partial.
func (e *executor) salvageCheck(ctx context.Context, t *engine.Task, inst platform.Instance, req *steps.Request) error {
	if !t.Salvage {
		return nil
	}
	from := ""
	if v := t.With.Get("from"); v != nil {
		from = v.Text
	}
	has, err := e.steps.HoldsResults(ctx, inst, from)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %w", engine.ErrNothingToSalvage, err)
	case !has:
		return fmt.Errorf("%w: %s on %s holds no file", engine.ErrNothingToSalvage, from, t.Instance)
	}
	req.Partial = t.Partial
	if t.Log != nil {
		fmt.Fprintf(t.Log, "salvaging %s on %s before the instance goes\n", from, t.Instance)
	}
	return nil
}

// recordPartial records on a salvage node that succeeded why its results
// may be partial, for the results table.
func recordPartial(t *engine.Task, req steps.Request) {
	if t.Partial != "" && req.Record != nil {
		req.Record(factPartial, t.Partial)
	}
}

// SkipSalvage skips the salvage uploads and fetches of the run (a second
// Ctrl-C): those running are cancelled and no more start. It may be called
// more than once, and before Run.
func (a *Apply) SkipSalvage() {
	a.skipOnce.Do(func() { close(a.skipSalvage) })
}

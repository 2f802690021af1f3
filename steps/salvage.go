package steps

import (
	"context"
	"strings"

	"github.com/taoflow/taoflow/platform"
)

// HoldsResults reports whether the directory from on inst (it may start
// with ~/) holds at least one file: a salvage upload or fetch
// (docs/design.md §8.6) runs only when the job wrote something there. An
// error means the instance could not be asked.
func (s *Steps) HoldsResults(ctx context.Context, inst platform.Instance, from string) (bool, error) {
	res, err := s.exec(ctx, inst, script(Params{"tf_src": from}, "home", "salvage-check"), nil)
	switch {
	case ctx.Err() != nil:
		return false, context.Cause(ctx)
	case err != nil:
		return false, s.fail(ClassNotReachable, err, "looking at %s on %s: %v", from, inst.Name, err)
	case res.ExitCode != 0:
		return false, s.fail(ClassNotReachable, nil, "looking at %s on %s failed (exit code %d): %s", from, inst.Name, res.ExitCode, s.lastLine(res.Stderr))
	}
	return strings.TrimSpace(string(res.Stdout)) == "@some", nil
}

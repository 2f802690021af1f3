package runner

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
	"github.com/taoflow/taoflow/pricing"
)

// This file builds the platform whose catalogue picks a plan's instance
// types (pricing.Select) and turns pricing's refusals into *RefusedError.

// SelectOptions say which brev CLI Select may run. A program the plan
// names (platform.binary) is run only when PlanBinary says the user
// agreed: a plan from elsewhere (a repository shipping tools/brev) must
// not run code on the reviewer's machine by being previewed.
type SelectOptions struct {
	// BrevBinary is a brev CLI the user named (--brev-binary): it is run
	// whatever the plan names.
	BrevBinary string
	// PlanBinary lets Select run the plan's platform.binary (apply, once
	// the user agreed to it). Without it, and without BrevBinary, the
	// search runs brev from PATH.
	PlanBinary bool
}

// PlanBinary is the program a brev plan names as its CLI
// (platform.binary), resolved as it would run (a path relative to the
// plan's directory made absolute, a bare name as written); "" when the
// plan names none or plain brev from PATH, or is not on brev.
func PlanBinary(p *plan.Plan) string {
	if p.Platform.Kind != plan.PlatformBrev || p.Platform.Binary == "" || p.Platform.Binary == "brev" {
		return ""
	}
	return resolveBinary(p.Platform.Binary, filepath.Dir(p.File))
}

// Select asks the plan's platform for the types of every instance the plan
// creates, when the platform has a catalogue (platform.Searcher; see
// pricing.Select). A filter that nothing passes, or a search that fails
// for a plan with filters, is a *RefusedError (exit 2): nothing has been
// created. Nothing is created here.
func Select(ctx context.Context, p *plan.Plan, opts SelectOptions) (*pricing.Selection, error) {
	if len(p.Billed()) == 0 {
		return &pricing.Selection{}, nil
	}
	data := PlatformData(p)
	notRun := ""
	switch prog := PlanBinary(p); {
	case opts.BrevBinary != "":
		data[dataBinary] = opts.BrevBinary
	case prog != "" && !opts.PlanBinary:
		data[dataBinary] = "" // brev from PATH
		notRun = prog
	}
	pf, err := platformFrom(p, data, "select", "", nil, nil)
	if err != nil {
		return nil, refused(fmt.Errorf("%s: %w", p.File, err))
	}
	if c, ok := pf.(platform.Closer); ok {
		defer c.Close()
	}
	searcher, ok := pf.(platform.Searcher)
	if !ok {
		return &pricing.Selection{NotRun: notRun}, nil
	}
	sel, err := pricing.Select(ctx, p, searcher, notRun)
	if err != nil {
		return nil, refused(err)
	}
	return sel, nil
}

// CheckBudget refuses (a *RefusedError) a plan whose estimate its budget
// does not allow (pricing.CheckBudget).
func CheckBudget(p *plan.Plan, e pricing.Estimate) error {
	if err := pricing.CheckBudget(p, e); err != nil {
		return refused(err)
	}
	return nil
}

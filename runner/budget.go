package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/taoflow/taoflow/pricing"
)

// DefaultBudgetPoll is how often a run with a budget: max_cost adds up
// what its instances have cost so far.
const DefaultBudgetPoll = 5 * time.Second

// watchBudget checks the plan's budget while the run goes on — its age
// against max_duration, and every BudgetPoll what its instances have cost
// so far (Costs) against max_cost — and when a limit is crossed, says so
// (ApplyConfig.OnBudget) and cancels ctx's run with that cause: the
// engine then cancels the running work and tears down, as for Ctrl-C, and
// the run ends failed (exit 1), not interrupted. It returns the function
// that stops watching.
func (a *Apply) watchBudget(ctx context.Context, cancel context.CancelCauseFunc) func() {
	b := a.cfg.Plan.Budget
	if b.MaxCost <= 0 && b.MaxDuration <= 0 && b.MaxGPUHours <= 0 {
		return func() {}
	}
	poll := a.cfg.BudgetPoll
	if poll <= 0 {
		poll = DefaultBudgetPoll
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		var deadline <-chan time.Time
		if b.MaxDuration > 0 {
			t := time.NewTimer(time.Until(a.started.Add(b.MaxDuration)))
			defer t.Stop()
			deadline = t.C
		}
		tick := time.NewTicker(poll)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-deadline:
			case <-tick.C:
			}
			cost := 0.0
			if b.MaxCost > 0 {
				if c, err := pricing.Costs(ctx, a.store, a.ID, time.Now()); err == nil {
					cost = c.Total
				}
			}
			why := pricing.OverBudget(b, cost, time.Since(a.started))
			if why == "" {
				why = a.overGPUHours(ctx)
			}
			if why == "" {
				continue
			}
			a.budgetMu.Lock()
			a.overBudgetWhy = why
			a.budgetMu.Unlock()
			if a.cfg.OnBudget != nil {
				a.cfg.OnBudget(why)
			}
			cancel(errors.New("over budget: " + why))
			return
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}

// budgetCrossed says which budget limit ended the run early; "" when none did.
func (a *Apply) budgetCrossed() string {
	a.budgetMu.Lock()
	defer a.budgetMu.Unlock()
	return a.overBudgetWhy
}

// Costs is what the run's created instances have cost so far
// (pricing.Costs).
func (a *Apply) Costs(ctx context.Context) (pricing.RunCost, error) {
	return pricing.Costs(ctx, a.store, a.ID, time.Now())
}

// overGPUHours says how the run's Slurm jobs crossed budget.max_gpu_hours
// (their elapsed time × their GPUs, so far); "" when they have not.
func (a *Apply) overGPUHours(ctx context.Context) string {
	limit := a.cfg.Plan.Budget.MaxGPUHours
	if limit <= 0 {
		return ""
	}
	t, err := Results(ctx, a.store, a.ID)
	if err != nil || t.GPUHours <= limit {
		return ""
	}
	return fmt.Sprintf("%.3f GPU-hours used, over max_gpu_hours %g", t.GPUHours, limit)
}

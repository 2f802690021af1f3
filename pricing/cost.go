package pricing

import (
	"context"
	"encoding/json"
	"sort"
	"strconv"
	"time"

	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/state"
	"github.com/taoflow/taoflow/steps"
)

// Keys of the cost facts: on an instance resource's data (and Attrs),
// and on nodes. runner records them; Costs reads them.
const (
	// DataBilledFrom is when the run asked for the instance (its intent,
	// just before `brev create`): billing is counted from then.
	DataBilledFrom = "billed_from"
	// DataPrice is the created type's list price, dollars per hour (the
	// platform's Attrs "price_per_hour").
	DataPrice = "price_per_hour"
	// FactUses is a node's step kind, so that what a job ran can be told
	// without the plan.
	FactUses = "uses"
)

// InstanceCost is what one instance the run created has cost so far,
// estimated from its type's list price: uptime × price.
type InstanceCost struct {
	Instance string `json:"instance"`
	Ref      string `json:"ref,omitempty"`
	Type     string `json:"type,omitempty"`
	// PricePerHour is the list price in dollars; null when not known.
	PricePerHour *float64  `json:"price_per_hour"`
	BilledFrom   time.Time `json:"billed_from"`
	// BilledUntil is when it was deleted (or stopped); null while it may
	// still exist and bill.
	BilledUntil *time.Time `json:"billed_until"`
	// UptimeSeconds is BilledUntil (or now) less BilledFrom.
	UptimeSeconds float64 `json:"uptime_seconds"`
	// Cost is uptime × price, dollars; null when the price is not known.
	Cost *float64 `json:"cost"`
	// IdleSeconds is the uptime with no job of the run running on it:
	// provisioning, pulls, waiting for a slot, the tail after its last
	// job.
	IdleSeconds float64 `json:"gpu_idle_seconds"`
	State       string  `json:"state"`
}

// RunCost is what a run's created instances have cost, at list prices.
type RunCost struct {
	Instances []InstanceCost `json:"instances"`
	// Total is the sum of the priced instances' costs, dollars.
	Total float64 `json:"total"`
	// Unpriced is how many instances Total leaves out: their price is not
	// known (their cost is null).
	Unpriced int `json:"unpriced_instances"`
	// IdleSeconds is the GPU-idle time of all of them together.
	IdleSeconds float64 `json:"gpu_idle_seconds"`
	// Billing is true while some instance may still bill.
	Billing bool `json:"billing"`
}

// Costs estimates what the instances run created on a platform that bills
// (brev) have cost until now: each from its intent until it was deleted or
// stopped (or now), at the list price of the type it got. Idle time is the
// part of that when none of the run's jobs (a run node launching it until
// its wait ends) ran there.
func Costs(ctx context.Context, store *state.Store, run string, now time.Time) (RunCost, error) {
	out := RunCost{Instances: []InstanceCost{}}
	res, err := store.Resources(ctx, run)
	if err != nil {
		return out, err
	}
	nodes, err := store.Nodes(ctx, run)
	if err != nil {
		return out, err
	}
	for _, r := range res {
		if r.Kind != state.KindInstance || r.Platform != plan.PlatformBrev {
			continue
		}
		ic := InstanceCost{Instance: r.Instance, Ref: r.Data["ref"], Type: r.Data["type"], State: r.State, BilledFrom: r.CreatedAt}
		if t, err := time.Parse(time.RFC3339Nano, r.Data[DataBilledFrom]); err == nil {
			ic.BilledFrom = t
		}
		end := now
		switch r.State {
		case state.ResourceDeleted, state.ResourceStopped:
			until := r.UpdatedAt
			if gone, ok := goneAt(nodes, r.Instance); ok && gone.Before(until) && !gone.Before(ic.BilledFrom) {
				// A wait saw it gone or stopped before teardown
				// recorded it so: it stopped billing then at the latest.
				until = gone
			}
			ic.BilledUntil, end = &until, until
		default:
			out.Billing = true
		}
		up := end.Sub(ic.BilledFrom)
		if up < 0 {
			up = 0
		}
		ic.UptimeSeconds = up.Seconds()
		ic.IdleSeconds = (up - busy(nodes, r.Instance, ic.BilledFrom, end)).Seconds()
		if p, err := strconv.ParseFloat(r.Data[DataPrice], 64); err == nil {
			cost := p * up.Hours()
			ic.PricePerHour, ic.Cost = &p, &cost
			out.Total += cost
		} else {
			out.Unpriced++
		}
		out.IdleSeconds += ic.IdleSeconds
		out.Instances = append(out.Instances, ic)
	}
	return out, nil
}

// goneAt is when a wait of the run first saw instance gone or stopped
// (steps.RecordGoneAt), and false when none did.
func goneAt(nodes []state.Node, instance string) (time.Time, bool) {
	var first time.Time
	for _, n := range nodes {
		var gone map[string]string
		if json.Unmarshal([]byte(n.Facts[steps.RecordGoneAt]), &gone) != nil {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, gone[instance])
		if err == nil && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	return first, !first.IsZero()
}

// busy is how long, within [from, to], a job of the run ran on instance:
// the union of its run and wait nodes' spans (a node still running counts
// until to).
func busy(nodes []state.Node, instance string, from, to time.Time) time.Duration {
	type span struct{ a, b time.Time }
	var spans []span
	for _, n := range nodes {
		if n.Instance != instance || n.StartedAt.IsZero() {
			continue
		}
		if u := n.Facts[FactUses]; u != plan.KindRun && u != plan.KindWait {
			continue
		}
		end := n.EndedAt
		if end.IsZero() || end.After(to) {
			end = to
		}
		start := n.StartedAt
		if start.Before(from) {
			start = from
		}
		if end.After(start) {
			spans = append(spans, span{start, end})
		}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].a.Before(spans[j].a) })
	var total time.Duration
	var cur span
	for i, s := range spans {
		switch {
		case i == 0:
			cur = s
		case !s.a.After(cur.b):
			if s.b.After(cur.b) {
				cur.b = s.b
			}
		default:
			total += cur.b.Sub(cur.a)
			cur = s
		}
	}
	if len(spans) > 0 {
		total += cur.b.Sub(cur.a)
	}
	return total
}

// UnpricedNote is what a cost total leaves out, to follow it: " + 2
// instances of unknown price"; "" when every instance is priced.
func (c RunCost) UnpricedNote() string {
	switch c.Unpriced {
	case 0:
		return ""
	case 1:
		return " + 1 instance of unknown price"
	}
	return " + " + strconv.Itoa(c.Unpriced) + " instances of unknown price"
}

package pricing

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
)

// This file picks the instance types of the instances a plan creates on a
// platform with a catalogue (brev search), and estimates from their list
// prices what a run costs: before it starts (plan's preview, the budget's
// floor) and while it runs (uptime × price).

// Candidates are the instance types one created instance may get: its
// type chain, in the order create tries them, and what the catalogue says
// of them.
type Candidates struct {
	Instance string
	// Chain is the types, in the order brev create tries them.
	Chain []string
	// Offers are the catalogue's entries of the chain's types, in chain
	// order; a type the catalogue does not list (a type: written in the
	// plan) has none, and no price.
	Offers []platform.Offer
	// Filter is what the plan's create: asked for.
	Filter platform.Filter
}

// Offer returns the catalogue's entry of type typ.
func (c *Candidates) Offer(typ string) (platform.Offer, bool) {
	for _, o := range c.Offers {
		if o.Type == typ {
			return o, true
		}
	}
	return platform.Offer{}, false
}

// Priced reports whether every type of the chain has a price (false for
// nil candidates).
func (c *Candidates) Priced() bool {
	return c != nil && len(c.Chain) > 0 && len(c.Offers) == len(c.Chain)
}

// first is the offer of the chain's first type: what create most likely
// gets. dearest is its most expensive type: what it costs at most.
func (c *Candidates) first() platform.Offer { return c.Offers[0] }

func (c *Candidates) dearest() platform.Offer {
	d := c.Offers[0]
	for _, o := range c.Offers[1:] {
		if o.PricePerHour > d.PricePerHour {
			d = o
		}
	}
	return d
}

func (c *Candidates) cheapest() platform.Offer {
	d := c.Offers[0]
	for _, o := range c.Offers[1:] {
		if o.PricePerHour < d.PricePerHour {
			d = o
		}
	}
	return d
}

// Selection is the types of every instance a plan creates on a platform
// with a catalogue, in plan order. The zero value selects nothing (a plan
// on another platform, or that creates nothing).
type Selection struct {
	Instances []*Candidates
	// Unpriced, when not empty, says why the types a plan names have no
	// price: brev search failed (its CLI is missing, say). Only a plan
	// without filters gets this far without a search.
	Unpriced string
	// NotRun, when not empty, names the program the plan chose as its
	// brev CLI (platform.binary) that runner.Select did not run, searching with
	// brev from PATH in its place (runner.SelectOptions).
	NotRun string
}

// For returns the candidates of instance name, nil when it has none.
func (s *Selection) For(name string) *Candidates {
	if s == nil {
		return nil
	}
	for _, c := range s.Instances {
		if c.Instance == name {
			return c
		}
	}
	return nil
}

// filterOf is the catalogue filter of a plan's create:.
func filterOf(in *plan.Instance) platform.Filter {
	f := platform.Filter{GPU: in.Select.GPU, GPUs: in.Select.GPUs, MinVRAM: in.Select.MinVRAM, MinDisk: in.Select.MinDisk,
		MaxPrice: in.Select.MaxPrice, Stoppable: in.Select.Stoppable, Provider: in.Select.Provider}
	if t := strings.TrimSpace(in.CreateType); t != "" {
		f.Types = strings.Split(t, ",")
	}
	return f
}

// Select asks searcher, the plan's platform's catalogue (`brev search
// --json`, stdin /dev/null), for the types of every instance the plan
// creates: those that pass create:'s filters, cheapest first (or in the
// order type: gives them). A plan that names its types and no filter gets
// them as written, with the prices the catalogue has; when the search
// fails it still goes on, unpriced (the reason in Unpriced). notRun is the
// plan's own brev CLI that searcher does not run (Selection.NotRun), ""
// when none. Every error is the plan's, refused as written (a filter that
// nothing passes, or a search that fails for a plan with filters): nothing
// has been created. Nothing is created here.
func Select(ctx context.Context, p *plan.Plan, searcher platform.Searcher, notRun string) (*Selection, error) {
	sel := &Selection{NotRun: notRun}
	cache := map[string][]platform.Offer{}
	search := func(f platform.Filter) ([]platform.Offer, error) {
		key := fmt.Sprintf("%#v", f)
		if got, ok := cache[key]; ok {
			return got, nil
		}
		got, err := searcher.Search(ctx, f)
		if err == nil {
			cache[key] = got
		}
		return got, err
	}
	for _, in := range p.Billed() {
		f := filterOf(in)
		c := &Candidates{Instance: in.Name, Filter: f}
		sel.Instances = append(sel.Instances, c)
		if f.IsZero() {
			c.Chain = f.Types
			offers, err := search(platform.Filter{Types: f.Types})
			if err != nil {
				sel.Unpriced = err.Error()
				continue
			}
			c.Offers = offers
			continue
		}
		offers, err := search(f)
		if err != nil {
			return nil, fmt.Errorf("%s: error: instance %s: cannot pick its instance types: %w%s", in.Pos, in.Name, err, sel.notRunNote())
		}
		if len(offers) == 0 {
			return nil, noMatch(in, f, search)
		}
		c.Offers = offers
		for _, o := range offers {
			c.Chain = append(c.Chain, o.Type)
		}
	}
	return sel, nil
}

// notRunNote says, after a failed search, that the plan's own brev CLI
// was not run and how to have it run.
func (s *Selection) notRunNote() string {
	if s.NotRun == "" {
		return ""
	}
	return fmt.Sprintf(" (searched with brev from PATH: the plan's platform.binary %s is a program the plan chose, and a preview never runs one; name it yourself to use it: --brev-binary %s)", s.NotRun, s.NotRun)
}

// noMatch explains a create: that no type passes: the three cheapest types
// with its GPU (or of the whole catalogue when none has it), each with the
// filter that excluded it.
func noMatch(in *plan.Instance, f platform.Filter, search func(platform.Filter) ([]platform.Offer, error)) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: error: instance %s: no Brev instance type matches create: {%s}", in.Pos, in.Name, describeFilter(f))
	near, err := search(platform.Filter{GPU: f.GPU})
	if err == nil && len(near) == 0 && f.GPU != "" {
		fmt.Fprintf(&b, "; no type has a GPU named like %q", f.GPU)
		near, err = search(platform.Filter{})
	}
	if err == nil && len(near) > 0 {
		b.WriteString("; the nearest offers:")
		for _, o := range near[:min(3, len(near))] {
			why := f.Excludes(o)
			if why == "" && f.Types != nil && !slices.Contains(f.Types, o.Type) {
				why = "type: it is not in the types given"
			}
			fmt.Fprintf(&b, "\n  %s (%s) %s/h: excluded by %s", o.Type, describeOffer(o), platform.Dollars(o.PricePerHour), why)
		}
	}
	b.WriteString("\nloosen a filter, or see the types with `brev search`")
	return fmt.Errorf("%s", b.String())
}

// describeFilter writes f as the plan's create: keys.
func describeFilter(f platform.Filter) string {
	var parts []string
	add := func(k string, v any) { parts = append(parts, fmt.Sprintf("%s: %v", k, v)) }
	if f.Types != nil {
		add("type", strings.Join(f.Types, ","))
	}
	if f.GPU != "" {
		add("gpu", f.GPU)
	}
	if f.GPUs > 0 {
		add("gpus", f.GPUs)
	}
	if f.MinVRAM > 0 {
		add("min_vram", f.MinVRAM)
	}
	if f.MinDisk > 0 {
		add("min_disk", f.MinDisk)
	}
	if f.MaxPrice > 0 {
		add("max_price", f.MaxPrice)
	}
	if f.Stoppable {
		add("stoppable", true)
	}
	if f.Provider != "" {
		add("provider", f.Provider)
	}
	return strings.Join(parts, ", ")
}

// DescribeFilter writes a create:'s filters as the plan does ("gpu: A100,
// max_price: 3"), types left out.
func DescribeFilter(f platform.Filter) string {
	f.Types = nil
	return describeFilter(f)
}

// describeOffer says what an offer has: "1x A100-80GB 80 GB, lambda-labs,
// not stoppable".
func describeOffer(o platform.Offer) string {
	s := fmt.Sprintf("%dx %s %g GB, %s", o.GPUs, o.GPU, o.VRAM, o.Provider)
	if !o.Stoppable {
		s += ", not stoppable"
	}
	return s
}

// Estimate is what a plan's run may cost, from the list prices of its
// candidate types. Every figure is an estimate in US dollars.
type Estimate struct {
	// Instances is how many created instances are priced.
	Instances int
	// PerHour is the hourly price of every created instance together, each
	// at the first type of its chain (what create most likely gets).
	PerHour float64
	// Bound is the most the run costs if every wait runs to its timeout
	// (and every instance gets the dearest type of its chain), counting
	// each instance's boot; valid only when Unbounded is empty.
	Bound float64
	// Unbounded says why there is no bound: the waits on billed
	// instances without a timeout.
	Unbounded []string
	// Min is the least the run costs: each instance at its cheapest type
	// for its boot time, billed before any step runs.
	Min float64
	// Unpriced are the created instances with a type of no known price;
	// UnpricedReason says why, when brev search failed.
	Unpriced       []string
	UnpricedReason string
}

// Estimated prices the plan of graph g with the types of sel.
func Estimated(g *engine.Graph, sel *Selection) Estimate {
	var e Estimate
	if sel == nil {
		return e
	}
	e.UnpricedReason = sel.Unpriced
	p := g.Plan
	// hours[i]: the longest the waits that may run on instance i take.
	hours := map[string]float64{}
	noTimeout := map[string]bool{}
	waits := map[string]map[string]int{} // step → instance → nodes that may run there
	for _, n := range g.Nodes {
		if n.Step.Uses != plan.KindWait {
			continue
		}
		pool := n.Pool
		if n.Instance != "" {
			pool = []string{n.Instance}
		}
		for _, i := range pool {
			if sel.For(i) == nil {
				continue
			}
			if waits[n.Step.ID] == nil {
				waits[n.Step.ID] = map[string]int{}
			}
			waits[n.Step.ID][i]++
		}
	}
	for _, s := range p.AllSteps() {
		per := waits[s.ID]
		if per == nil {
			continue
		}
		limit := waitLimit(g, s)
		if limit <= 0 {
			if !noTimeout[s.ID] {
				noTimeout[s.ID] = true
				e.Unbounded = append(e.Unbounded, s.ID)
			}
			continue
		}
		for i, nodes := range per {
			slots := 1
			if in := p.Instance(i); in != nil && in.Slots > 0 {
				slots = in.Slots
			}
			waves := (nodes + slots - 1) / slots
			hours[i] += float64(waves*(s.Retries+1)) * limit.Hours()
		}
	}
	for _, c := range sel.Instances {
		if !c.Priced() {
			e.Unpriced = append(e.Unpriced, c.Instance)
			continue
		}
		e.Instances++
		e.PerHour += c.first().PricePerHour
		d := c.dearest()
		boot := 0.0
		for _, o := range c.Offers {
			boot = math.Max(boot, o.Boot.Hours())
		}
		e.Bound += d.PricePerHour * (hours[c.Instance] + boot)
		ch := c.cheapest()
		e.Min += ch.PricePerHour * ch.Boot.Hours()
	}
	return e
}

// waitLimit is how long a wait step's node may run: the shorter of its
// timeout and its jobs' timeout (with.timeout, as written when it holds no
// cell expression); 0 for none.
func waitLimit(g *engine.Graph, s *plan.Step) time.Duration {
	limit := s.Timeout
	if nodes := g.StepNodes(s.ID); len(nodes) > 0 {
		if v := g.With(nodes[0], engine.Scope{}).Get("timeout"); v != nil {
			if d, err := time.ParseDuration(v.Text); err == nil && d > 0 && (limit == 0 || d < limit) {
				limit = d
			}
		}
	}
	return limit
}

// CheckBudget refuses a plan whose least cost already
// exceeds its budget's max_cost, or that creates instances of no known
// price under max_cost without budget.unpriced: allow (max_cost could not
// count what they cost).
func CheckBudget(p *plan.Plan, e Estimate) error {
	if p.Budget.MaxCost > 0 && e.Min > p.Budget.MaxCost {
		return fmt.Errorf("%s: error: budget.max_cost is %s, but booting the plan's instances alone costs at least %s (list prices): raise it, or pick cheaper types", p.Budget.Pos, platform.Dollars(p.Budget.MaxCost), platform.Dollars(e.Min))
	}
	if p.Budget.MaxCost > 0 && !p.Budget.AllowUnpriced && len(e.Unpriced) > 0 {
		why := "Brev's catalogue (brev search) does not list a type of their chain"
		if e.UnpricedReason != "" {
			why = "brev search failed: " + e.UnpricedReason
		}
		return fmt.Errorf("%s: error: budget.max_cost is %s, but no list price is known for instance %s (%s), so max_cost could not count what %s: nothing was created; name types brev search lists, or add unpriced: allow to budget to create %s all the same, uncounted",
			p.Budget.Pos, platform.Dollars(p.Budget.MaxCost), strings.Join(e.Unpriced, ", "), why,
			map[bool]string{true: "it costs", false: "they cost"}[len(e.Unpriced) == 1], map[bool]string{true: "it", false: "them"}[len(e.Unpriced) == 1])
	}
	return nil
}

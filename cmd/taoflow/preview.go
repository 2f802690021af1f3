package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
	"github.com/taoflow/taoflow/pricing"
	"github.com/taoflow/taoflow/steps"
)

// preview is what plan shows by default: what apply would create, use and
// delete, the nodes of each step, the secrets and the warnings.
type preview struct {
	Instances []previewInstance `json:"instances"`
	Steps     []previewStep     `json:"steps"`
	Secrets   []previewSecret   `json:"secrets"`
	Warnings  []diagnosticJSON  `json:"warnings"`
	Summary   previewSummary    `json:"summary"`
	// Cost is the estimate from the candidate types' list prices; nil
	// when the plan creates nothing that bills.
	Cost     *previewCost        `json:"cost,omitempty"`
	warnings []plan.Diagnostic   // as printed
	nodes    map[string][]string // step id → node lines
}

type previewInstance struct {
	Name string `json:"name"`
	// Action is create (this run makes it: a brev instance or a local
	// sandbox) or use (an existing brev instance, an ssh host).
	Action   string `json:"action"`
	Type     string `json:"type,omitempty"` // brev: the type chain, first available wins
	Existing string `json:"existing,omitempty"`
	Host     string `json:"host,omitempty"`
	Slots    int    `json:"slots"`
	Billed   bool   `json:"billed"` // bills from creation (brev)
	// Filters are create:'s filters as written ("gpu: A100, max_price:
	// 3"); empty for a plan that names its types.
	Filters string `json:"filters,omitempty"`
	// Candidates are the types of the chain, in the order create tries
	// them, with their list prices; a type the catalogue does not list
	// has no price.
	Candidates []previewOffer `json:"candidates,omitempty"`
	// DeletedAtTeardown: the run deletes it when its steps are done (a
	// created instance without keep: true).
	DeletedAtTeardown bool `json:"deleted_at_teardown"`
	// Autostop is the instance's autostop (docs/design.md §8.8); absent
	// when it has none.
	Autostop *previewAutostop `json:"autostop,omitempty"`
}

// previewAutostop is an instance's autostop as the plan sets it.
type previewAutostop struct {
	After    string `json:"after"`
	MaxAfter string `json:"max_after,omitempty"`
	// Command is what the watchdog runs; "" when there is none, and then
	// the autostop does nothing (inert).
	Command string `json:"command,omitempty"`
	Inert   bool   `json:"inert"`
	line    string
}

type previewOffer struct {
	Type      string   `json:"type"`
	GPU       string   `json:"gpu,omitempty"`
	GPUs      int      `json:"gpus,omitempty"`
	VRAM      float64  `json:"vram_gb,omitempty"`
	Provider  string   `json:"provider,omitempty"`
	Stoppable *bool    `json:"stoppable,omitempty"`
	Price     *float64 `json:"price_per_hour"` // null: not listed by brev search
}

// previewCost is the plan's cost estimate, in US dollars at list prices.
type previewCost struct {
	Currency string `json:"currency"` // USD
	// PerHour: every created instance at the first type of its chain.
	PerHour   float64 `json:"per_hour"`
	Instances int     `json:"instances"` // priced created instances
	// AtMost: if every wait runs to its timeout, at the dearest types;
	// null when some wait on a billed instance has no timeout (named in
	// unbounded_waits).
	AtMost         *float64 `json:"at_most"`
	UnboundedWaits []string `json:"unbounded_waits,omitempty"`
	// Minimum: booting every instance at its cheapest type.
	Minimum float64 `json:"minimum"`
	// Unpriced: created instances with a type of no known price, and why.
	Unpriced       []string `json:"unpriced,omitempty"`
	UnpricedReason string   `json:"unpriced_reason,omitempty"`
	// BrevNotRun is the plan's own brev CLI (platform.binary), which a
	// preview does not run: brev from PATH searched in its place.
	BrevNotRun string  `json:"brev_binary_not_run,omitempty"`
	MaxCost    float64 `json:"budget_max_cost,omitempty"`
	// MaxCostLeavesOut: under budget.unpriced: allow, the Unpriced
	// instances max_cost does not count.
	MaxCostLeavesOut []string `json:"budget_uncounted,omitempty"`
	MaxDuration      string   `json:"budget_max_duration,omitempty"`
}

type previewStep struct {
	ID      string `json:"id"`
	Uses    string `json:"uses"`
	Finally bool   `json:"finally,omitempty"`
	Nodes   int    `json:"nodes"`
	Where   string `json:"where"`
	Timeout string `json:"timeout,omitempty"` // the step's timeout per attempt; empty: none
	// JobTimeout is a wait step's with.timeout: the job is canceled after it.
	JobTimeout string `json:"job_timeout,omitempty"`
	Retries    int    `json:"retries"`
	// Sends are what each node of a send step copies from this machine.
	Sends []previewSend `json:"sends,omitempty"`
}

// previewSend is what one send node copies, counted on this machine.
type previewSend struct {
	Node string `json:"node"`
	steps.SendSize
	// Error says why it could not be counted (a from that does not exist
	// yet); the counts are then zero.
	Error string `json:"error,omitempty"`
}

// line is the send as the preview prints it: "sends 6 files, 1.2 MB from
// DIR".
func (s previewSend) line() string {
	if s.Error != "" {
		return "sends ?: " + s.Error
	}
	out := fmt.Sprintf("sends %d file%s, %s", s.Files, plural(int(s.Files)), formatSize(s.Bytes))
	if s.Links > 0 {
		out += fmt.Sprintf(", %d symlink%s", s.Links, plural(int(s.Links)))
	}
	out += " from " + s.From
	if s.Repo {
		out += " (git work tree: tracked and not-ignored files)"
	}
	return out
}

// formatSize is n bytes in decimal units: "512 B", "1.2 kB", "3.4 MB",
// "5.0 GB".
func formatSize(n int64) string {
	const k = 1000
	if n < k {
		return fmt.Sprintf("%d B", n)
	}
	v, unit := float64(n)/k, "kB"
	for _, u := range []string{"MB", "GB", "TB"} {
		if v < k {
			break
		}
		v, unit = v/k, u
	}
	return fmt.Sprintf("%.1f %s", v, unit)
}

type previewSecret struct {
	Name string `json:"name"`
	Set  bool   `json:"set"` // set (and not empty) in this environment
}

type previewSummary struct {
	Create            int `json:"create"`
	Use               int `json:"use"`
	Nodes             int `json:"nodes"`
	DeletedAtTeardown int `json:"deleted_at_teardown"`
}

// sendSize, when not nil, counts what a send node copies.
func newPreview(g *engine.Graph, diags plan.Diagnostics, lookupEnv func(string) (string, bool), sel *pricing.Selection, sendSize func(*engine.Node) (steps.SendSize, error)) *preview {
	p := g.Plan
	pv := &preview{Instances: []previewInstance{}, Steps: []previewStep{}, Secrets: []previewSecret{}, Warnings: []diagnosticJSON{}, nodes: map[string][]string{}}
	for _, in := range p.Instances {
		pi := previewInstance{Name: in.Name, Slots: in.Slots, Action: "use", Existing: in.Existing, Host: in.Host}
		if in.RunCreates(p.Platform.Kind) {
			pi.Action = "create"
			pi.Type = in.CreateType
			pi.Billed = in.Bills(p.Platform.Kind)
			pi.DeletedAtTeardown = !in.Keep
		}
		if a := in.Autostop; a != nil && a.After > 0 {
			cmd := in.AutostopCommand(p.Platform.Kind)
			pa := &previewAutostop{After: plan.ShortDuration(a.After), Command: cmd, Inert: cmd == ""}
			if a.MaxAfter > 0 {
				pa.MaxAfter = plan.ShortDuration(a.MaxAfter)
			}
			pa.line = "stops itself " + a.Describe() + ": " + cmd
			if cmd == "" {
				pa.line = "does nothing (autostop never touches a machine it didn't create unless command: is given)"
			}
			pi.Autostop = pa
		}
		if c := sel.For(in.Name); c != nil {
			pi.Type = strings.Join(c.Chain, ",")
			pi.Filters = pricing.DescribeFilter(c.Filter)
			for _, t := range c.Chain {
				po := previewOffer{Type: t}
				if o, ok := c.Offer(t); ok {
					price, stop := o.PricePerHour, o.Stoppable
					po.GPU, po.GPUs, po.VRAM, po.Provider, po.Stoppable, po.Price = o.GPU, o.GPUs, o.VRAM, o.Provider, &stop, &price
				}
				pi.Candidates = append(pi.Candidates, po)
			}
		}
		if pi.Action == "create" {
			pv.Summary.Create++
		} else {
			pv.Summary.Use++
		}
		if pi.DeletedAtTeardown {
			pv.Summary.DeletedAtTeardown++
		}
		pv.Instances = append(pv.Instances, pi)
	}
	count := map[string]int{}
	sends := map[string][]previewSend{}
	for _, n := range g.Nodes {
		count[n.Step.ID]++
		where := "on " + n.Instance
		if n.Cell != nil {
			where = "on one of " + strings.Join(n.Pool, ", ")
			if n.Root != "" {
				where = "where " + n.Root + " ran"
			}
		}
		line := n.ID + "\t" + where
		if n.Step.Uses == plan.KindSend && sendSize != nil {
			ps := previewSend{Node: n.ID}
			var err error
			if ps.SendSize, err = sendSize(n); err != nil {
				ps.Error = err.Error()
			}
			sends[n.Step.ID] = append(sends[n.Step.ID], ps)
			line += "\t" + ps.line()
		}
		pv.nodes[n.Step.ID] = append(pv.nodes[n.Step.ID], line)
	}
	for _, s := range p.AllSteps() {
		ps := previewStep{ID: s.ID, Uses: s.Uses, Finally: s.Finally, Nodes: count[s.ID], Retries: s.Retries, Sends: sends[s.ID]}
		if s.Timeout > 0 {
			ps.Timeout = s.Timeout.String()
		}
		if nodes := g.StepNodes(s.ID); s.Uses == plan.KindWait && len(nodes) > 0 {
			if v := g.With(nodes[0], engine.Scope{}).Get("timeout"); v != nil {
				ps.JobTimeout = v.Text
			}
		}
		switch root := p.MatrixRoot(s); {
		case root == s:
			ps.Where = fmt.Sprintf("one per cell, placed on %s", strings.Join(p.Pool(s), ", "))
		case root != nil:
			ps.Where = "one per cell of " + root.ID
		default:
			ps.Where = "one per instance: " + strings.Join(p.Pool(s), ", ")
		}
		pv.Steps = append(pv.Steps, ps)
	}
	for _, name := range p.SecretNames() {
		v, ok := lookupEnv(name)
		pv.Secrets = append(pv.Secrets, previewSecret{Name: name, Set: ok && v != ""})
	}
	for _, d := range diags {
		if d.Severity == plan.Warning {
			pv.warnings = append(pv.warnings, d)
			pv.Warnings = append(pv.Warnings, diagnosticJSON{File: d.Pos.File, Line: d.Pos.Line, Col: d.Pos.Col, Severity: d.Severity.String(), Message: d.Message})
		}
	}
	pv.Summary.Nodes = len(g.Nodes)
	if len(sel.Instances) > 0 || p.Budget.MaxCost > 0 || p.Budget.MaxDuration > 0 {
		e := pricing.Estimated(g, sel)
		c := &previewCost{Currency: "USD", PerHour: e.PerHour, Instances: e.Instances, UnboundedWaits: e.Unbounded,
			Minimum: e.Min, Unpriced: e.Unpriced, UnpricedReason: sel.Unpriced, BrevNotRun: sel.NotRun, MaxCost: p.Budget.MaxCost}
		if len(e.Unbounded) == 0 {
			c.AtMost = &e.Bound
		}
		if p.Budget.MaxDuration > 0 {
			c.MaxDuration = p.Budget.MaxDuration.String()
		}
		if p.Budget.MaxCost > 0 && p.Budget.AllowUnpriced {
			c.MaxCostLeavesOut = e.Unpriced
		}
		pv.Cost = c
	}
	return pv
}

// printPreview prints the preview, the node details (with --commands), and
// the summary line last.
func printPreview(w io.Writer, g *engine.Graph, pv *preview, details *previewer) error {
	p := g.Plan
	fmt.Fprintf(w, "plan %s (%s), platform %s\n", p.Name, p.File, p.Platform.Kind)

	fmt.Fprintf(w, "\nInstances:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, in := range pv.Instances {
		var what string
		switch {
		case in.Action == "create" && in.Filters != "":
			what = "create, " + in.Filters
		case in.Action == "create" && in.Type != "":
			what = "create, type " + in.Type
		case in.Action == "create":
			what = "create, a local sandbox"
		case in.Existing != "":
			what = "use existing " + in.Existing
		case in.Host != "":
			what = "use host " + in.Host
		default:
			what = "use"
		}
		end := "kept (keep: true): bills until taoflow destroy"
		switch {
		case in.DeletedAtTeardown:
			end = "deleted at teardown"
		case in.Action == "use":
			end = "never deleted"
		}
		mark := "="
		if in.Action == "create" {
			mark = "+"
		}
		fmt.Fprintf(tw, "  %s %s\t%s\t%d slot%s\t%s\n", mark, in.Name, what, in.Slots, plural(in.Slots), end)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := printAutostop(w, pv); err != nil {
		return err
	}
	if err := printCandidates(w, pv); err != nil {
		return err
	}

	for _, final := range []bool{false, true} {
		head := "\nSteps:\n"
		if final {
			head = "\nFinally (after the steps on each instance):\n"
		}
		printed := false
		for _, s := range pv.Steps {
			if s.Finally != final {
				continue
			}
			if !printed {
				fmt.Fprint(w, head)
				printed = true
			}
			timeout := "no timeout"
			if s.Timeout != "" {
				timeout = "timeout " + s.Timeout
			}
			switch {
			case s.Uses == plan.KindWait && s.JobTimeout != "":
				timeout += ", jobs canceled after " + s.JobTimeout
			case s.Uses == plan.KindWait:
				timeout += ", no job timeout"
			}
			fmt.Fprintf(w, "  %s (%s): %d node%s, %s; %s, %d retr%s\n", s.ID, s.Uses, s.Nodes, plural(s.Nodes), s.Where, timeout, s.Retries, map[bool]string{true: "y", false: "ies"}[s.Retries == 1])
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			for _, line := range pv.nodes[s.ID] {
				fmt.Fprintf(tw, "      %s\n", line)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
		}
	}

	if details != nil {
		fmt.Fprintf(w, "\nNodes:\n")
		if err := printNodes(w, g, details); err != nil {
			return err
		}
	}

	if len(pv.Secrets) > 0 {
		fmt.Fprintf(w, "\nSecrets (values from this environment):\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, s := range pv.Secrets {
			state := "set"
			if !s.Set {
				state = "NOT SET: apply refuses until it is exported"
			}
			fmt.Fprintf(tw, "  %s\t%s\n", s.Name, state)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(pv.warnings) > 0 {
		fmt.Fprintf(w, "\nWarnings:\n")
		for _, d := range pv.warnings {
			fmt.Fprintf(w, "  %s\n", d)
		}
	}
	printCost(w, pv.Cost)
	s := pv.Summary
	fmt.Fprintf(w, "\nPlan: %d instance%s to create, %d to use, %d node%s; deleted at teardown: %d\n",
		s.Create, plural(s.Create), s.Use, s.Nodes, plural(s.Nodes), s.DeletedAtTeardown)
	return nil
}

// printCandidates lists, per created instance, the types create tries in
// order, with their list prices.
func printCandidates(w io.Writer, pv *preview) error {
	printed := false
	for _, in := range pv.Instances {
		if len(in.Candidates) == 0 {
			continue
		}
		if !printed {
			fmt.Fprintf(w, "\nInstance types, in the order create tries them (Brev list prices):\n")
			printed = true
		}
		fmt.Fprintf(w, "  %s:\n", in.Name)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, o := range in.Candidates {
			if o.Price == nil {
				fmt.Fprintf(tw, "    %s\tnot listed by brev search\t\tprice unknown\n", o.Type)
				continue
			}
			what := fmt.Sprintf("%dx %s %g GB, %s", o.GPUs, o.GPU, o.VRAM, o.Provider)
			stop := "stoppable"
			if !*o.Stoppable {
				stop = "not stoppable"
			}
			fmt.Fprintf(tw, "    %s\t%s\t%s\t%s/h\n", o.Type, what, stop, platform.Dollars(*o.Price))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// printCost prints the cost estimate: the hourly price while every created
// instance runs and the bound if every wait runs to its timeout.
func printCost(w io.Writer, c *previewCost) {
	if c == nil {
		return
	}
	fmt.Fprintf(w, "\nCost (estimates from Brev's list prices):\n")
	if c.Instances > 0 {
		line := fmt.Sprintf("~%s/h while all %d instance%s run", platform.Dollars(c.PerHour), c.Instances, plural(c.Instances))
		switch {
		case c.AtMost != nil:
			line += fmt.Sprintf("; at most %s if every wait runs to its timeout", platform.Dollars(*c.AtMost))
		default:
			line += fmt.Sprintf("; no upper bound: wait step%s %s %s no timeout", plural(len(c.UnboundedWaits)), strings.Join(c.UnboundedWaits, ", "), map[bool]string{true: "has", false: "have"}[len(c.UnboundedWaits) == 1])
		}
		fmt.Fprintf(w, "  %s\n", line)
	}
	if c.BrevNotRun != "" {
		fmt.Fprintf(w, "  types and prices from brev on PATH: the plan's platform.binary %s was not run (a preview never runs a program the plan names; --brev-binary %s runs it)\n", c.BrevNotRun, c.BrevNotRun)
	}
	if len(c.Unpriced) > 0 {
		why := ""
		if c.UnpricedReason != "" {
			why = " (" + c.UnpricedReason + ")"
		}
		fmt.Fprintf(w, "  no price known for %s%s\n", strings.Join(c.Unpriced, ", "), why)
	}
	if c.MaxCost > 0 || c.MaxDuration != "" {
		var limits []string
		if c.MaxCost > 0 {
			limits = append(limits, "max_cost "+platform.Dollars(c.MaxCost))
		}
		if c.MaxDuration != "" {
			limits = append(limits, "max_duration "+c.MaxDuration)
		}
		fmt.Fprintf(w, "  budget: %s; apply cancels the run and tears down when it is crossed\n", strings.Join(limits, ", "))
		if len(c.MaxCostLeavesOut) > 0 {
			fmt.Fprintf(w, "  max_cost does not count %s: no price is known (budget.unpriced: allow), so the budget does not limit what %s\n",
				strings.Join(c.MaxCostLeavesOut, ", "), map[bool]string{true: "it costs", false: "they cost"}[len(c.MaxCostLeavesOut) == 1])
		}
	}
}

// printAutostop lists the instances' autostop, one line each.
func printAutostop(w io.Writer, pv *preview) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := false
	for _, in := range pv.Instances {
		if in.Autostop == nil {
			continue
		}
		if !head {
			fmt.Fprintf(tw, "\nAutostop (when taoflow stops renewing the lease):\n")
			head = true
		}
		fmt.Fprintf(tw, "  %s\t%s\n", in.Name, in.Autostop.line)
	}
	return tw.Flush()
}

package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/plan"
)

// preview is what plan shows by default: what apply would create, use and
// delete, the nodes of each step, the secrets and the warnings.
type preview struct {
	Instances []previewInstance   `json:"instances"`
	Steps     []previewStep       `json:"steps"`
	Secrets   []previewSecret     `json:"secrets"`
	Warnings  []diagnosticJSON    `json:"warnings"`
	Summary   previewSummary      `json:"summary"`
	warnings  []plan.Diagnostic   // as printed
	nodes     map[string][]string // step id → node lines
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
	// DeletedAtTeardown: the run deletes it when its steps are done (a
	// created instance without keep: true).
	DeletedAtTeardown bool `json:"deleted_at_teardown"`
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

func newPreview(g *engine.Graph, diags plan.Diagnostics, lookupEnv func(string) (string, bool)) *preview {
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
	for _, n := range g.Nodes {
		count[n.Step.ID]++
		where := "on " + n.Instance
		if n.Cell != nil {
			where = "on one of " + strings.Join(n.Pool, ", ")
			if n.Root != "" {
				where = "where " + n.Root + " ran"
			}
		}
		pv.nodes[n.Step.ID] = append(pv.nodes[n.Step.ID], n.ID+"\t"+where)
	}
	for _, s := range p.AllSteps() {
		ps := previewStep{ID: s.ID, Uses: s.Uses, Finally: s.Finally, Nodes: count[s.ID], Retries: s.Retries}
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
	s := pv.Summary
	fmt.Fprintf(w, "\nPlan: %d instance%s to create, %d to use, %d node%s; deleted at teardown: %d\n",
		s.Create, plural(s.Create), s.Use, s.Nodes, plural(s.Nodes), s.DeletedAtTeardown)
	return nil
}

package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/plan"
)

func newValidateCmd(io stdio) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "validate PLAN...",
		Short: "Check plans and list every problem with its position",
		Long: `Validate checks each plan against the plan schema and the static rules
(unique ids, known needs/instances/vars/matrix keys, no cycles, durations,
platform-specific instance keys, expressions, no inline secrets, uploads
ordered before deletes) and prints every problem at once, sorted by position:

  plan.yaml:12:7: error: unknown step "pul" in needs (did you mean "pull"?)
  plan.yaml:30:9: warning: run step "train" has no wait step after it ...

It touches nothing. Exit status 0 when no plan has an error (warnings don't
count), 2 otherwise. --json prints one object per plan for editors and CI.`,
		Example: `  taoflow validate plan.yaml
  taoflow validate examples/plans/*.yaml
  taoflow validate --json plan.yaml | jq '.[].diagnostics'`,
		Args:              argsRange(1, -1),
		ValidArgsFunction: planFileCompletion,
		RunE: func(cmd *cobra.Command, args []string) error {
			failed := false
			var reports []validateReport
			for _, path := range args {
				p, diags := plan.Load(path, plan.Options{})
				if !diags.HasErrors() && p != nil {
					if _, err := engine.Expand(p, engine.Options{}); err != nil {
						diags = append(diags, plan.Diagnostic{Pos: plan.Pos{File: path}, Message: err.Error()})
					}
				}
				if diags.HasErrors() {
					failed = true
				}
				if asJSON {
					reports = append(reports, newValidateReport(path, diags))
					continue
				}
				for _, d := range diags {
					fmt.Fprintln(io.err, d)
				}
				if !diags.HasErrors() {
					fmt.Fprintf(io.out, "%s: ok\n", path)
				}
			}
			if asJSON {
				enc := json.NewEncoder(io.out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(reports); err != nil {
					return err
				}
			}
			if failed {
				return silent(exitUsage)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the results as JSON")
	return cmd
}

type validateReport struct {
	File        string           `json:"file"`
	Valid       bool             `json:"valid"`
	Diagnostics []diagnosticJSON `json:"diagnostics"`
}

type diagnosticJSON struct {
	File     string `json:"file"`
	Line     int    `json:"line"`
	Col      int    `json:"col"`
	Severity string `json:"severity"`
	Message  string `json:"message"`
}

func newValidateReport(path string, diags plan.Diagnostics) validateReport {
	r := validateReport{File: path, Valid: !diags.HasErrors(), Diagnostics: []diagnosticJSON{}}
	for _, d := range diags {
		r.Diagnostics = append(r.Diagnostics, diagnosticJSON{File: d.Pos.File, Line: d.Pos.Line, Col: d.Pos.Col, Severity: d.Severity.String(), Message: d.Message})
	}
	return r
}

// loadPlan loads and expands a plan for the commands that show it,
// printing diagnostics; errors become exit 2.
func loadPlan(io stdio, path string, vars []string) (*plan.Plan, *engine.Graph, error) {
	overrides, err := plan.ParseVarFlags(vars)
	if err != nil {
		return nil, nil, usageError(err)
	}
	p, diags := plan.Load(path, plan.Options{Vars: overrides})
	for _, d := range diags {
		fmt.Fprintln(io.err, d)
	}
	if diags.HasErrors() || p == nil {
		return nil, nil, silent(exitUsage)
	}
	g, err := engine.Expand(p, engine.Options{})
	if err != nil {
		return nil, nil, usageError(err)
	}
	return p, g, nil
}

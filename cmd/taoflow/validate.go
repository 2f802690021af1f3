package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/runner"
)

func newValidateCmd(io stdio) *cobra.Command {
	var asJSON, snippet bool
	var vf varFlags
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
count), 2 otherwise. --json prints one object per plan for editors and CI.
With --snippet (the default when stderr is a terminal) each problem is
followed by its source line and a caret under its column:

  plan.yaml:12:7: error: unknown step "pul" in needs (did you mean "pull"?)
     12 |     needs: [pul]
        |             ^`,
		Example: `  taoflow validate plan.yaml
  taoflow validate examples/plans/*.yaml
  taoflow validate --json plan.yaml | jq '.[].diagnostics'`,
		Args:              argsRange(1, -1),
		ValidArgsFunction: planFileCompletion,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, fileDiags, err := vf.options()
			if err != nil {
				return usageError(err)
			}
			failed := false
			var reports []validateReport
			dp := newDiagPrinter(io.err, snippet)
			for _, path := range args {
				p, diags := plan.Load(path, opts)
				diags = append(fileDiags, diags...)
				if !diags.HasErrors() && p != nil {
					if g, err := engine.Expand(p, engine.Options{}); err != nil {
						diags = append(diags, plan.Diagnostic{Pos: plan.Pos{File: path}, Message: err.Error()})
					} else {
						// Each node's settings as its step reads them at run
						// time (placeholders for run.id): found here, not
						// after the training.
						diags = append(diags, runner.CheckSettings(g, opts.StateDir)...).Sort()
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
					dp.print(d)
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
	cmd.Flags().BoolVar(&snippet, "snippet", false, "show each problem's source line with a caret under it (on by default when stderr is a terminal)")
	vf.register(cmd)
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

// varFlags are --var, --var-file and --strict, which validate, plan, graph
// and apply take.
type varFlags struct {
	vars   []string
	files  []string
	strict bool
	cmd    *cobra.Command // for --state, which no fetch may replace
}

func (v *varFlags) register(cmd *cobra.Command) {
	v.cmd = cmd
	cmd.Flags().StringArrayVar(&v.vars, "var", nil, "override a var: `NAME=VALUE` (repeatable; beats --var-file)")
	cmd.Flags().StringArrayVar(&v.files, "var-file", nil, "override vars from a YAML `FILE` of NAME: VALUE lines (repeatable; a later file wins)")
	cmd.Flags().BoolVar(&v.strict, "strict", false, "treat warnings as errors")
}

// options turns the flags into load options: the files in order, then
// --var. Problems in a file are diagnostics; a malformed --var is an error.
func (v *varFlags) options() (plan.Options, plan.Diagnostics, error) {
	vars, sources, diags := plan.ReadVarFiles(v.files)
	flags, err := plan.ParseVarFlags(v.vars)
	if err != nil {
		return plan.Options{}, diags, err
	}
	for k, val := range flags {
		vars[k] = val
		delete(sources, k)
	}
	opts := plan.Options{Vars: vars, Sources: sources, Strict: v.strict}
	if v.cmd != nil {
		if f := v.cmd.Flag("state"); f != nil {
			opts.StateDir = f.Value.String()
		}
	}
	return opts, diags, nil
}

// loadPlan loads and expands a plan for the commands that show it,
// printing diagnostics; errors become exit 2.
func loadPlan(io stdio, path string, vf varFlags) (*plan.Plan, *engine.Graph, error) {
	p, g, _, err := loadPlanDiags(io, path, vf, true)
	return p, g, err
}

// loadPlanDiags is loadPlan that returns the diagnostics, printing the
// warnings only when asked to (plan shows them in its preview).
func loadPlanDiags(io stdio, path string, vf varFlags, printWarnings bool) (*plan.Plan, *engine.Graph, plan.Diagnostics, error) {
	opts, fileDiags, err := vf.options()
	if err != nil {
		return nil, nil, nil, usageError(err)
	}
	p, diags := plan.Load(path, opts)
	diags = append(fileDiags, diags...)
	dp := newDiagPrinter(io.err, false)
	for _, d := range diags {
		if printWarnings || d.Severity == plan.Error || diags.HasErrors() {
			dp.print(d)
		}
	}
	if diags.HasErrors() || p == nil {
		return nil, nil, diags, silent(exitUsage)
	}
	g, err := engine.Expand(p, engine.Options{})
	if err != nil {
		return nil, nil, diags, usageError(err)
	}
	// What a step would refuse when it runs, found before anything is
	// created: plan exits 2 rather than print "invalid settings", apply
	// refuses (runner.CheckSettings).
	if bad := runner.CheckSettings(g, opts.StateDir); len(bad) > 0 {
		for _, d := range bad {
			dp.print(d)
		}
		return nil, nil, append(diags, bad...), silent(exitUsage)
	}
	return p, g, diags, nil
}

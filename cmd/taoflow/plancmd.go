package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/pricing"
	"github.com/taoflow/taoflow/runner"
	"github.com/taoflow/taoflow/secret"
	"github.com/taoflow/taoflow/steps"
)

func newPlanCmd(sio stdio, gf *globals) *cobra.Command {
	var vf varFlags
	var asJSON, commands, noCommands bool
	var brevBinary string
	cmd := &cobra.Command{
		Use:   "plan PLAN",
		Short: "Preview what apply would create, run and delete, touching nothing",
		Long: `Plan loads and checks PLAN (with its vars as --var and --var-file set them)
and previews what apply would do: the instances it creates (name, type
chain, slots), uses, and deletes at teardown; each step with its nodes,
timeout and retries; the secrets it needs and whether each is set in this
environment; what each send copies from this machine ("sends 6 files,
1.2 MB from DIR", counted here: in a git work tree, the tracked files and
the untracked ones .gitignore leaves; never .git or the state directory);
the warnings; and a last line such as

  Plan: 3 instances to create, 0 to use, 24 nodes; deleted at teardown: 3

--commands adds, for each node, its dependencies, its job id, its with:
values with every ${{ }} expression resolved, and the exact remote commands
it sends to its instance, in order (the shell text; secrets travel on stdin
and only their names appear). ${{ run.id }} stays as written (the run id is
made by apply); job ids and commands show RUN in its place, INSTANCE for the
instance a cell will be placed on, and HOST:PID for the apply process.
Secret values never appear: any value of a declared secret found in the
output is shown as ***. --json prints all of it as one object (the commands
with --commands).

For each brev instance the plan creates, plan runs 'brev search --json' (no
login needed) to pick its types (create: filters such as gpu, gpus, min_vram,
max_price) and price them: it lists the candidate types in the order create
tries them with their list prices, and the cost:

  ~$4.35/h while all 3 instances run; at most $52.20 if every wait runs to its timeout

Every figure is an estimate from Brev's list prices. plan runs brev from
PATH, or the program --brev-binary names, never one the plan names: a plan
whose platform.binary is another program (a tools/brev shipped beside it)
is priced with brev from PATH, and the preview says so; name the program
yourself with --brev-binary to have it run.

It contacts no instance and starts nothing. Exit status 2 when the plan has
errors, when no instance type matches an instance's filters (the nearest
offers are listed, each with the filter that excluded it), when its least
cost already exceeds budget.max_cost, or when under budget.max_cost it
creates an instance whose type has no known list price (max_cost could not
count it; budget: {unpriced: allow} lets it run, uncounted, and plan says so).`,
		Example: `  taoflow plan examples/plans/quickstart.yaml
  taoflow plan sweep.yaml --var image=nvcr.io/nvidia/tao/tao-toolkit:7.2.0-pyt
  taoflow plan --commands sweep.yaml          # and the exact remote shell
  taoflow plan --json sweep.yaml | jq '.preview.summary'`,
		Args:              argsRange(1, 1),
		ValidArgsFunction: planFileCompletion,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, g, diags, err := loadPlanDiags(sio, args[0], vf, false)
			if err != nil {
				return err
			}
			// The types of created brev instances, from brev search: a
			// filter nothing passes is exit 2 here, as at apply.
			sel, err := runner.Select(cmd.Context(), p, runner.SelectOptions{BrevBinary: absProgram(brevBinary)})
			if err != nil {
				return err
			}
			if err := runner.CheckBudget(p, pricing.Estimated(g, sel)); err != nil {
				return err
			}
			red := secretRedactor(p)
			w := secret.NewWriter(sio.out, red)
			defer w.Close()
			var pv *previewer
			if commands && !noCommands {
				pv = newPreviewer(g)
			}
			sum := newPreview(g, diags, os.LookupEnv, sel, sendSizer(cmd.Context(), g, gf.stateDir))
			if asJSON {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				out := planJSON(g, pv)
				out.Preview = sum
				return enc.Encode(out)
			}
			// Matrix values, vars, the commands and brev search's
			// answers are escaped as apply and status escape them (JSON's
			// own escaping covers --json).
			return printPreview(escapeWriter{w}, g, sum, pv)
		},
	}
	vf.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the expanded graph as JSON")
	cmd.Flags().BoolVar(&commands, "commands", false, "show each node's resolved with: values and the exact remote commands")
	cmd.Flags().StringVar(&brevBinary, "brev-binary", "", "the brev `PROGRAM` that searches types and prices (default: brev on PATH; the plan's platform.binary is never run by a preview)")
	cmd.Flags().BoolVar(&noCommands, "no-commands", false, "leave out the remote commands (the default; kept for scripts)")
	_ = cmd.Flags().MarkHidden("no-commands")
	return cmd
}

// absProgram makes a program path given on the command line absolute
// (from the working directory); a bare name, looked up in PATH, stays.
func absProgram(bin string) string {
	if !strings.ContainsRune(bin, '/') {
		return bin
	}
	if abs, err := filepath.Abs(bin); err == nil {
		return abs
	}
	return bin
}

// secretRedactor redacts the values of the plan's secrets that are set in
// taoflow's environment.
func secretRedactor(p *plan.Plan) *secret.Redactor {
	var values []string
	for _, n := range p.SecretNames() {
		if v, ok := os.LookupEnv(n); ok && v != "" {
			values = append(values, v)
		}
	}
	return secret.NewRedactor(values...)
}

// printNodes prints each node's details: where it runs, its needs, job,
// resolved with: values and remote commands (plan --commands).
func printNodes(w io.Writer, g *engine.Graph, pv *previewer) error {
	for _, n := range g.Nodes {
		fmt.Fprintf(w, "\n%s\n", n.ID)
		where := "on " + n.Instance
		if n.Cell != nil {
			where = "placed at run time on one of: " + strings.Join(n.Pool, ", ")
			if n.Root != "" {
				where = "on the instance of " + n.Root
			}
		}
		kind := "step"
		if n.Finally {
			kind = "finally"
		}
		fmt.Fprintf(w, "  %s: %s (uses %s), %s\n", kind, n.Step.ID, n.Step.Uses, where)
		if n.Cell != nil {
			fmt.Fprintf(w, "  cell: %s (index %d)\n", n.Cell.ID, n.Cell.Index)
		}
		if len(n.Needs) > 0 {
			fmt.Fprintf(w, "  needs: %s\n", strings.Join(depStrings(n.Needs), ", "))
		}
		if n.Finally {
			fmt.Fprintf(w, "  after: every step on its instance has ended\n")
		}
		if n.JobID != "" {
			fmt.Fprintf(w, "  job: %s\n", n.JobID)
		}
		if with := g.With(n, engine.Scope{}); with != nil {
			var out strings.Builder
			enc := yaml.NewEncoder(&out)
			enc.SetIndent(2)
			if err := enc.Encode(with.Node()); err != nil {
				return err
			}
			fmt.Fprintf(w, "  with:\n")
			for _, line := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n") {
				fmt.Fprintf(w, "    %s\n", line)
			}
		}
		if pv == nil {
			continue
		}
		cmds, err := pv.commands(n)
		if err != nil {
			fmt.Fprintf(w, "  commands: not shown: %v\n", err)
			continue
		}
		fmt.Fprintf(w, "  commands:\n")
		for _, c := range cmds {
			head := "# " + c.What
			if len(c.Stdin) > 0 {
				head += "; stdin: " + strings.Join(c.Stdin, ", ")
			}
			if c.Repeats != "" {
				head += "; " + c.Repeats
			}
			fmt.Fprintf(w, "    %s\n", head)
			for _, line := range strings.Split(strings.TrimRight(c.Script, "\n"), "\n") {
				fmt.Fprintf(w, "    %s\n", line)
			}
		}
	}
	return nil
}

// sendSizer returns what counts the files a send node copies from this
// machine, as send would list them (steps.SendSize: a walk of the
// directory and git's own listing of a work tree; nothing the plan names
// runs).
func sendSizer(ctx context.Context, g *engine.Graph, stateDir string) func(*engine.Node) (steps.SendSize, error) {
	cwd, _ := os.Getwd()
	st := steps.New(steps.Config{Plan: g.Plan, RunID: "RUN", BaseDir: cwd, Owner: "HOST:PID", StateDir: stateDir})
	return func(n *engine.Node) (steps.SendSize, error) {
		return st.SendSize(ctx, runner.PreviewRequest(g, "RUN", n))
	}
}

// previewer renders the remote commands of a plan's nodes.
type previewer struct {
	g     *engine.Graph
	steps *steps.Steps
}

func newPreviewer(g *engine.Graph) *previewer {
	cwd, _ := os.Getwd()
	return &previewer{g: g, steps: steps.New(steps.Config{Plan: g.Plan, RunID: "RUN", BaseDir: cwd, Owner: "HOST:PID"})}
}

// commands returns the remote commands of node n, with RUN for the run id
// and INSTANCE for a cell's instance.
func (pv *previewer) commands(n *engine.Node) ([]steps.Command, error) {
	req := runner.PreviewRequest(pv.g, "RUN", n)
	return pv.steps.Preview(req)
}

func depStrings(deps []engine.Dep) []string {
	out := make([]string, len(deps))
	for i, d := range deps {
		out[i] = d.String()
	}
	return out
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

type nodeJSON struct {
	ID       string         `json:"id"`
	Step     string         `json:"step"`
	Uses     string         `json:"uses"`
	Instance string         `json:"instance,omitempty"`
	Pool     []string       `json:"pool,omitempty"`
	Follows  string         `json:"follows,omitempty"`
	Cell     *cellJSON      `json:"cell,omitempty"`
	Finally  bool           `json:"finally,omitempty"`
	Needs    []depJSON      `json:"needs"`
	Job      string         `json:"job,omitempty"`
	With     map[string]any `json:"with,omitempty"`
	// Commands are the remote commands the node sends, in order.
	Commands      []steps.Command `json:"commands,omitempty"`
	CommandsError string          `json:"commands_error,omitempty"`
}

type cellJSON struct {
	ID     string            `json:"id"`
	Index  int               `json:"index"`
	Values map[string]string `json:"values"`
}

type depJSON struct {
	Kind string `json:"kind"` // node, placed, instance
	Node string `json:"node,omitempty"`
	Step string `json:"step,omitempty"`
}

type planOut struct {
	Preview   *preview       `json:"preview"`
	Name      string         `json:"name"`
	File      string         `json:"file"`
	Hash      string         `json:"hash"`
	Platform  string         `json:"platform"`
	Instances []instanceJSON `json:"instances"`
	Nodes     []nodeJSON     `json:"nodes"`
}

type instanceJSON struct {
	Name     string `json:"name"`
	Slots    int    `json:"slots"`
	Create   string `json:"create,omitempty"`
	Existing string `json:"existing,omitempty"`
	Host     string `json:"host,omitempty"`
	Keep     bool   `json:"keep,omitempty"`
}

func planJSON(g *engine.Graph, pv *previewer) planOut {
	p := g.Plan
	out := planOut{Name: p.Name, File: p.File, Hash: p.Hash, Platform: p.Platform.Kind, Instances: []instanceJSON{}, Nodes: []nodeJSON{}}
	for _, in := range p.Instances {
		out.Instances = append(out.Instances, instanceJSON{Name: in.Name, Slots: in.Slots, Create: in.CreateType, Existing: in.Existing, Host: in.Host, Keep: in.Keep})
	}
	for _, n := range g.Nodes {
		nj := nodeJSON{ID: n.ID, Step: n.Step.ID, Uses: n.Step.Uses, Instance: n.Instance, Pool: n.Pool, Follows: n.Root, Finally: n.Finally, Job: n.JobID, Needs: []depJSON{}}
		if n.Cell != nil {
			c := &cellJSON{ID: n.Cell.ID, Index: n.Cell.Index, Values: map[string]string{}}
			for _, v := range n.Cell.Values {
				c.Values[v.Key] = v.Value
			}
			nj.Cell = c
		}
		for _, d := range n.Needs {
			kind := map[engine.DepKind]string{engine.DepNode: "node", engine.DepPlaced: "placed", engine.DepInstance: "instance"}[d.Kind]
			nj.Needs = append(nj.Needs, depJSON{Kind: kind, Node: d.Node, Step: d.Step})
		}
		if with := g.With(n, engine.Scope{}); with != nil {
			nj.With, _ = with.JSON().(map[string]any)
		}
		if pv != nil {
			if cmds, err := pv.commands(n); err != nil {
				nj.CommandsError = err.Error()
			} else {
				nj.Commands = cmds
			}
		}
		out.Nodes = append(out.Nodes, nj)
	}
	return out
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/internal/progress"
	"github.com/taoflow/taoflow/pricing"
	"github.com/taoflow/taoflow/runner"
	"github.com/taoflow/taoflow/state"
)

func newStatusCmd(sio stdio, g *globals) *cobra.Command {
	var (
		asJSON  bool
		tagArgs []string
		rf      resultFlags
	)
	cmd := &cobra.Command{
		Use:   "status [RUN]",
		Short: "Show runs, their nodes and the resources that may still exist",
		Long: `Without RUN, status lists the runs in the state directory, newest first.
With RUN (an id or a unique prefix of one, or "latest"), it shows the run's
nodes — instance, state, attempts, time, exit code, last message or training
progress — and every resource (instance, job) that may still exist, then
the run's name, tags and provenance (git commit, who ran it, image
digests) and its results table (see 'taoflow results'; --sort METRIC,
--csv). --tag KEY=VALUE lists only the runs with that tag.

It reads the state while an apply is writing it, so it can watch a run in
progress. --json prints the same as one JSON object for scripts.`,
		Example: `  taoflow status
  taoflow status latest
  taoflow status quickstart-1203 --json | jq '.nodes[] | select(.state=="failed")'`,
		Args:              argsRange(0, 1),
		ValidArgsFunction: runCompletion(g, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			tags, err := parseTags(tagArgs)
			if err != nil {
				return err
			}
			if len(tags) > 0 && len(args) > 0 {
				return usageError(fmt.Errorf("--tag filters the list of runs; give it without RUN"))
			}
			if asJSON && rf.csv {
				return usageError(fmt.Errorf("--json and --csv can't both be given"))
			}
			store, err := openState(g.stateDir)
			if err != nil {
				return err
			}
			if store == nil {
				// No state yet: no runs, not an error (docs/design.md §2).
				if len(args) == 1 {
					return runner.UnknownRun(args[0], nil)
				}
				return listRuns(ctx, sio.out, nil, asJSON, tags)
			}
			defer store.Close()
			if len(args) == 0 {
				return listRuns(ctx, sio.out, store, asJSON, tags)
			}
			run, err := runner.FindRun(ctx, store, args[0])
			if err != nil {
				return err
			}
			return showRun(ctx, sio.out, store, run, asJSON, rf)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&rf.sort, "sort", "", "sort the results table by `METRIC`, best first")
	cmd.Flags().BoolVar(&rf.csv, "csv", false, "print the run's results table as CSV")
	cmd.Flags().StringArrayVar(&tagArgs, "tag", nil, "list only the runs tagged `KEY=VALUE` (repeatable: all must match)")
	return cmd
}

// runJSON is a run as status --json prints it (docs/json.md).
type runJSON struct {
	state.Run
	// RunRecord adds run_name, tags and provenance.
	state.RunRecord
	Alive bool `json:"apply_alive"`
	// ApplyGone: the state says running, but its apply died; Next are the
	// commands that go on from there.
	ApplyGone bool             `json:"apply_gone,omitempty"`
	Next      []string         `json:"next,omitempty"`
	Nodes     []nodeStatusJSON `json:"nodes,omitempty"`
	Resources []state.Resource `json:"resources,omitempty"`
	// Results is the run's results table (status RUN only).
	Results *runner.ResultTable `json:"results,omitempty"`
	// Cost is what its created brev instances cost, at list prices
	// (status RUN only; absent when it created none).
	Cost *pricing.RunCost `json:"cost,omitempty"`
}

// nodeStatusJSON is a node as status --json prints it: its facts as JSON values
// (not JSON in strings), its cell with its values, its progress figures as
// recorded (Node.ProgressFigures).
type nodeStatusJSON struct {
	state.Node
	Cell    *cellStatusJSON   `json:"cell,omitempty"`
	Facts   map[string]any    `json:"facts,omitempty"`
	Figures *progress.Figures `json:"progress_figures,omitempty"`
	// FailedJob is the run node whose job failed, when this node (a wait)
	// saw it fail; LogsCommand prints this node's log.
	FailedJob   string `json:"failed_job,omitempty"`
	LogsCommand string `json:"logs_command"`
}

type cellStatusJSON struct {
	ID     string            `json:"id"`
	Values map[string]string `json:"values,omitempty"`
}

// newRunJSON is run r for status --json; alive are its resources that may
// still exist.
func newRunJSON(r state.Run, alive []state.Resource) runJSON {
	j := runJSON{Run: r, Alive: runner.ApplyAlive(r), ApplyGone: runner.ApplyGone(r)}
	if j.ApplyGone {
		j.Next = runner.NextSteps(r, alive)
	}
	return j
}

func newNodesJSON(run string, nodes []state.Node) []nodeStatusJSON {
	cells := map[string]map[string]string{}
	for _, n := range nodes {
		if v, ok := n.Facts[runner.FactCellValues]; ok {
			var vals map[string]string
			if json.Unmarshal([]byte(v), &vals) == nil {
				cells[n.Cell] = vals
			}
		}
	}
	out := make([]nodeStatusJSON, 0, len(nodes))
	for _, n := range nodes {
		j := nodeStatusJSON{Node: n, Figures: n.ProgressFigures, FailedJob: n.Facts[runner.FactFailedJob], LogsCommand: runner.LogsCommand(run, n.ID)}
		if n.Cell != "" {
			j.Cell = &cellStatusJSON{ID: n.Cell, Values: cells[n.Cell]}
		}
		if len(n.Facts) > 0 {
			j.Facts = map[string]any{}
			for k, v := range n.Facts {
				j.Facts[k] = factValue(v)
			}
		}
		out = append(out, j)
	}
	return out
}

// factValue is a fact as JSON: an object or array stored as text is
// itself; any other text is a string.
func factValue(v string) any {
	if t := strings.TrimSpace(v); strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") {
		if json.Valid([]byte(t)) {
			return json.RawMessage(t)
		}
	}
	return v
}

// openState opens the state in dir for reading; a dir with no state gives
// a nil store and no error.
func openState(dir string) (*state.Store, error) {
	store, err := state.OpenReadOnly(dir)
	if errors.Is(err, state.ErrNoState) {
		return nil, nil
	}
	return store, err
}

// findRun resolves id in the state in dir, opened for reading: a dir with
// no state knows no run.
func findRun(ctx context.Context, dir, id string) (state.Run, error) {
	store, err := openState(dir)
	if err != nil {
		return state.Run{}, err
	}
	if store == nil {
		return state.Run{}, runner.UnknownRun(id, nil)
	}
	defer store.Close()
	return runner.FindRun(ctx, store, id)
}

// listRuns lists the runs of store (nil: there is no state).
func listRuns(ctx context.Context, w io.Writer, store *state.Store, asJSON bool, tags map[string]string) error {
	var runs []state.Run
	records := map[string]state.RunRecord{}
	if store != nil {
		var err error
		if runs, err = store.Runs(ctx); err != nil {
			return err
		}
		if records, err = store.RunRecords(ctx); err != nil {
			return err
		}
	}
	runs = slices.DeleteFunc(runs, func(r state.Run) bool { return !matchTags(records[r.ID].Tags, tags) })
	if asJSON {
		out := []runJSON{}
		for _, r := range runs {
			alive, err := store.Alive(ctx, r.ID)
			if err != nil {
				return err
			}
			j := newRunJSON(r, alive)
			j.RunRecord = records[r.ID]
			out = append(out, j)
		}
		return writeJSON(w, out)
	}
	if len(runs) == 0 {
		if len(tags) > 0 {
			fmt.Fprintf(w, "no runs tagged %s\n", formatTags(tags))
			return nil
		}
		fmt.Fprintln(w, "no runs")
		return nil
	}
	tw := tabwriter.NewWriter(escapeWriter{w}, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tPLAN\tSTATE\tSTARTED\tTIME\tALIVE\tNAME\tTAGS")
	for _, r := range runs {
		alive, _ := store.Alive(ctx, r.ID)
		st := r.State
		if runner.ApplyGone(r) {
			st += " (apply gone)"
		}
		rec := records[r.ID]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, r.Name, st, r.StartedAt.Local().Format("2006-01-02 15:04:05"), runTime(r), len(alive), rec.Label, formatTags(rec.Tags))
	}
	return tw.Flush()
}

func runTime(r state.Run) string {
	end := r.EndedAt
	if end.IsZero() {
		end = time.Now()
	}
	return elapsed(end.Sub(r.StartedAt))
}

func showRun(ctx context.Context, w io.Writer, store *state.Store, r state.Run, asJSON bool, rf resultFlags) error {
	nodes, err := store.Nodes(ctx, r.ID)
	if err != nil {
		return err
	}
	alive, err := store.Alive(ctx, r.ID)
	if err != nil {
		return err
	}
	rec, err := store.RunRecord(ctx, r.ID)
	if err != nil {
		return err
	}
	results, err := runner.Results(ctx, store, r.ID)
	if err != nil {
		return err
	}
	if rf.sort != "" {
		if err := results.Sort(rf.sort); err != nil {
			return usageError(err)
		}
	}
	if rf.csv {
		return writeResultsCSV(w, results)
	}
	cost, err := pricing.Costs(ctx, store, r.ID, time.Now())
	if err != nil {
		return err
	}
	if asJSON {
		j := newRunJSON(r, alive)
		j.RunRecord = rec
		j.Nodes, j.Resources, j.Results = newNodesJSON(r.ID, nodes), alive, &results
		if len(cost.Instances) > 0 {
			j.Cost = &cost
		}
		return writeJSON(w, j)
	}
	gone := runner.ApplyGone(r)
	w = escapeWriter{w}
	fmt.Fprintf(w, "run %s (plan %s, %s)\n", r.ID, r.Name, r.PlanFile)
	resources, err := store.Resources(ctx, r.ID)
	if err != nil {
		return err
	}
	showRecord(w, rec, nodes, resources)
	if gone {
		// Not "state: running" with frozen progress: the apply died.
		fmt.Fprintf(w, "state: not running: its apply (pid %d) died without ending the run; started %s\n", r.PID, r.StartedAt.Local().Format("2006-01-02 15:04:05"))
		next := runner.NextSteps(r, alive)
		fmt.Fprintf(w, "continue it:        %s\nor tear it down:    %s\n", next[0], next[1])
	} else {
		fmt.Fprintf(w, "state: %s, started %s, %s", r.State, r.StartedAt.Local().Format("2006-01-02 15:04:05"), runTime(r))
		if !r.EndedAt.IsZero() {
			fmt.Fprintf(w, ", exit %d", r.ExitCode)
		}
		fmt.Fprintln(w)
		if r.Message != "" {
			fmt.Fprintf(w, "%s\n", r.Message)
		}
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tINSTANCE\tSTATE\tTRIES\tTIME\tEXIT\tMESSAGE")
	for _, n := range nodes {
		t := ""
		if !n.StartedAt.IsZero() {
			end := n.EndedAt
			if end.IsZero() {
				end = time.Now()
			}
			t = elapsed(end.Sub(n.StartedAt))
		}
		code := ""
		if n.ExitCode != nil {
			code = fmt.Sprint(*n.ExitCode)
		}
		msg := n.Message
		if n.Progress != "" && (engine.NodeState(n.State) == engine.Running || msg == "") {
			msg = n.Progress
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", n.ID, n.Instance, n.State, n.Attempts, t, code, clipText(firstLine(msg), 100))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(results.Rows) > 0 {
		fmt.Fprintln(w)
		if err := writeResults(w, results); err != nil {
			return err
		}
	}
	printFailures(w, r.ID, nodes)
	if len(cost.Instances) > 0 {
		fmt.Fprintf(w, "\ncost (estimates from Brev's list prices):\n")
		for _, line := range costLines(&cost) {
			fmt.Fprintf(w, "  %s\n", line)
		}
	}
	if len(alive) > 0 {
		fmt.Fprintf(w, "\nresources that may still exist:\n")
		for _, res := range alive {
			fmt.Fprintf(w, "  %s %s on %s (%s)\n", res.Kind, res.Name, res.Instance, res.State)
		}
		if !runner.ApplyAlive(r) && !gone {
			fmt.Fprintf(w, "remove them with: %s\n", runner.DestroyCommand(r.ID, alive))
		}
	}
	return nil
}

// printFailures names what failed, by the job's run step where a wait saw
// it, with the command that shows its log.
func printFailures(w io.Writer, run string, nodes []state.Node) {
	first := true
	for _, n := range nodes {
		if st := engine.NodeState(n.State); st != engine.Failed && st != engine.TimedOut {
			continue
		}
		if first {
			fmt.Fprintf(w, "\nfailed:\n")
			first = false
		}
		f := runner.Failure{Node: n.ID, Job: n.Facts[runner.FactFailedJob], Instance: n.Instance, State: n.State}
		fmt.Fprintf(w, "  %s: %s\n    its log: %s\n", f.Title(), clipText(firstLine(n.Message), 200), runner.LogsCommand(run, n.ID))
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

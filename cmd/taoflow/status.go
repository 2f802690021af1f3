package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
		all     bool
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

The state is --state, else $TAOFLOW_STATE, else the nearest .taoflow in the
working directory or a parent (said on stderr when it is a parent's). --all
lists the runs of every state apply has used, newest first, each with its
state directory: the index of states in $XDG_STATE_HOME/taoflow/states
(else ~/.local/state/taoflow/states), plus this one.

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
			if all && len(args) > 0 {
				return usageError(fmt.Errorf("--all lists the runs of every state; give it without RUN (status RUN --state DIR shows one)"))
			}
			if asJSON && rf.csv {
				return usageError(fmt.Errorf("--json and --csv can't both be given"))
			}
			if all {
				dirs, err := allStates(g)
				if err != nil {
					fmt.Fprintf(escapeWriter{sio.err}, "taoflow: the index of states: %v\n", err)
				}
				if lerr := listAllRuns(ctx, sio.out, sio.err, dirs, asJSON, tags); lerr != nil || err != nil {
					return cmp.Or(lerr, silent(exitFailed))
				}
				return nil
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
	cmd.Flags().BoolVar(&all, "all", false, "list the runs of every state directory apply has used (this user's index of states)")
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
	// StateDir is the run's state directory (status --all only).
	StateDir string `json:"state_dir,omitempty"`
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
	// Autostop is each armed instance's autostop and what its watchdog
	// decided (status RUN only; docs/design.md §8.8).
	Autostop []runner.Autostop `json:"autostop,omitempty"`
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
	store, r, err := openRun(ctx, dir, id)
	if err != nil {
		return state.Run{}, err
	}
	store.Close()
	return r, nil
}

// openRun opens the state in dir for reading and resolves id in it (a dir
// with no state knows no run); the caller closes the store.
func openRun(ctx context.Context, dir, id string) (*state.Store, state.Run, error) {
	store, err := openState(dir)
	if err != nil {
		return nil, state.Run{}, err
	}
	if store == nil {
		return nil, state.Run{}, runner.UnknownRun(id, nil)
	}
	r, err := runner.FindRun(ctx, store, id)
	if err != nil {
		store.Close()
		return nil, state.Run{}, err
	}
	return store, r, nil
}

// listedRun is a run as the list of runs shows it.
type listedRun struct {
	run   state.Run
	rec   state.RunRecord
	alive []state.Resource
	dir   string // its state directory (status --all)
}

// storeRuns are the runs of store (nil: there is no state) that carry
// tags, newest first; dir is recorded in each.
func storeRuns(ctx context.Context, store *state.Store, dir string, tags map[string]string) ([]listedRun, error) {
	if store == nil {
		return nil, nil
	}
	runs, err := store.Runs(ctx)
	if err != nil {
		return nil, err
	}
	records, err := store.RunRecords(ctx)
	if err != nil {
		return nil, err
	}
	var out []listedRun
	for _, r := range runs {
		if !matchTags(records[r.ID].Tags, tags) {
			continue
		}
		alive, err := store.Alive(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, listedRun{run: r, rec: records[r.ID], alive: alive, dir: dir})
	}
	return out, nil
}

// listRuns lists the runs of store (nil: there is no state).
func listRuns(ctx context.Context, w io.Writer, store *state.Store, asJSON bool, tags map[string]string) error {
	runs, err := storeRuns(ctx, store, "", tags)
	if err != nil {
		return err
	}
	return printRuns(w, runs, asJSON, tags, false)
}

// listAllRuns lists the runs of every state in dirs (status --all),
// newest first, each with its state directory. A state that cannot be
// read is said on errw and skipped; the command then exits 1.
func listAllRuns(ctx context.Context, w, errw io.Writer, dirs []string, asJSON bool, tags map[string]string) error {
	var runs []listedRun
	failed := false
	for _, dir := range dirs {
		store, err := openState(dir)
		if err == nil && store != nil {
			var some []listedRun
			some, err = storeRuns(ctx, store, dir, tags)
			store.Close()
			runs = append(runs, some...)
		}
		if err != nil {
			failed = true
			fmt.Fprintf(escapeWriter{errw}, "taoflow: skipping the state in %s: %v\n", dir, err)
		}
	}
	slices.SortStableFunc(runs, func(a, b listedRun) int { return b.run.StartedAt.Compare(a.run.StartedAt) })
	if err := printRuns(w, runs, asJSON, tags, true); err != nil {
		return err
	}
	if failed {
		return silent(exitFailed)
	}
	return nil
}

// allStates are the state directories status --all reads: the
// command's own (when it exists), then those in this user's index of
// states, each once.
func allStates(g *globals) ([]string, error) {
	var dirs []string
	seen := map[string]bool{}
	add := func(d string) {
		if abs, err := filepath.Abs(d); err == nil && !seen[abs] {
			seen[abs] = true
			dirs = append(dirs, abs)
		}
	}
	if fi, err := os.Stat(g.stateDir); err == nil && fi.IsDir() {
		add(g.stateDir)
	}
	indexed, err := state.Indexed(state.IndexFile(os.Getenv))
	for _, d := range indexed {
		add(d)
	}
	return dirs, err
}

// printRuns prints runs as status lists them; withDir adds each one's
// state directory.
func printRuns(w io.Writer, runs []listedRun, asJSON bool, tags map[string]string, withDir bool) error {
	if asJSON {
		out := []runJSON{}
		for _, r := range runs {
			j := newRunJSON(r.run, r.alive)
			j.RunRecord = r.rec
			j.StateDir = r.dir
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
	head := "RUN\tPLAN\tSTATE\tSTARTED\tTIME\tALIVE\tNAME\tTAGS"
	if withDir {
		head += "\tSTATE DIRECTORY"
	}
	fmt.Fprintln(tw, head)
	for _, lr := range runs {
		r := lr.run
		st := r.State
		if runner.ApplyGone(r) {
			st += " (apply gone)"
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s", r.ID, r.Name, st, r.StartedAt.Local().Format("2006-01-02 15:04:05"), runTime(r), len(lr.alive), lr.rec.Label, formatTags(lr.rec.Tags))
		if withDir {
			line += "\t" + lr.dir
		}
		fmt.Fprintln(tw, line)
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
		j.Autostop = runner.Autostops(nodes)
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
		if err := writeResultsBy(w, results, rf.sort); err != nil {
			return err
		}
	}
	printFailures(w, r.ID, nodes)
	printRunAutostop(w, r, nodes)
	if results.GPUHours > 0 {
		fmt.Fprintf(w, "\nGPU-hours: %.3f (each Slurm job's elapsed time × its GPUs)\n", results.GPUHours)
	}
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

// rememberState adds the state directory dir to this user's index of
// states (state.IndexFile), which status --all and reap read. Not being
// able to is said, not fatal: the run goes on, unlisted.
func rememberState(w io.Writer, dir string) {
	index := state.IndexFile(os.Getenv)
	if err := state.Remember(index, dir); err != nil {
		fmt.Fprintf(escapeWriter{w}, "taoflow: could not add %s to the index of states %s (status --all and reap will not see it): %v\n", dir, index, err)
	}
}

// printRunAutostop shows each armed instance's autostop, and whether it
// stopped itself (docs/design.md §8.8).
func printRunAutostop(w io.Writer, r state.Run, nodes []state.Node) {
	as := runner.Autostops(nodes)
	if len(as) == 0 {
		return
	}
	fmt.Fprintf(w, "\nautostop:\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, a := range as {
		line := a.Armed
		if !r.EndedAt.IsZero() && a.Fired == nil {
			line += " (disarmed at teardown)"
		}
		fmt.Fprintf(tw, "  %s\t%s\n", a.Instance, line)
		if a.Fired != nil {
			fmt.Fprintf(tw, "  %s\t%s\n", a.Instance, a.Fired.Text)
		}
	}
	_ = tw.Flush()
}

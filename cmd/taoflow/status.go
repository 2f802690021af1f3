package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

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
progress — and every resource (instance, job) that may still exist.

It reads the state while an apply is writing it, so it can watch a run in
progress. --json prints the same as one JSON object for scripts.`,
		Example: `  taoflow status
  taoflow status latest
  taoflow status quickstart-1203 --json | jq '.nodes[] | select(.state=="failed")'`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: runCompletion(g, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			store, err := state.OpenReadOnly(g.stateDir)
			if err != nil {
				return usageError(err)
			}
			defer store.Close()
			tags, err := parseTags(tagArgs)
			if err != nil {
				return err
			}
			if len(args) == 0 {
				return listRuns(ctx, sio.out, store, asJSON, tags)
			}
			if len(tags) > 0 {
				return usageError(fmt.Errorf("--tag filters the list of runs; give it without RUN"))
			}
			if asJSON && rf.csv {
				return usageError(fmt.Errorf("--json and --csv can't both be given"))
			}
			run, err := runner.FindRun(ctx, store, args[0])
			if err != nil {
				return usageError(err)
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

type runJSON struct {
	state.Run
	state.RunRecord
	Alive     bool                `json:"apply_alive"`
	Results   *runner.ResultTable `json:"results,omitempty"`
	Nodes     []state.Node        `json:"nodes,omitempty"`
	Resources []state.Resource    `json:"resources,omitempty"`
}

func listRuns(ctx context.Context, w io.Writer, store *state.Store, asJSON bool, tags map[string]string) error {
	runs, err := store.Runs(ctx)
	if err != nil {
		return err
	}
	records, err := store.RunRecords(ctx)
	if err != nil {
		return err
	}
	runs = slices.DeleteFunc(runs, func(r state.Run) bool { return !matchTags(records[r.ID].Tags, tags) })
	if asJSON {
		out := []runJSON{}
		for _, r := range runs {
			out = append(out, runJSON{Run: r, RunRecord: records[r.ID], Alive: runner.ApplyAlive(r)})
		}
		return writeJSON(w, out)
	}
	if len(runs) == 0 {
		if len(tags) > 0 {
			fmt.Fprintf(w, "no runs tagged %s\n", formatTags(tags))
			return nil
		}
		fmt.Fprintln(w, "no runs yet")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tPLAN\tSTATE\tSTARTED\tTIME\tALIVE\tNAME\tTAGS")
	for _, r := range runs {
		alive, _ := store.Alive(ctx, r.ID)
		rec := records[r.ID]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, r.Name, r.State, r.StartedAt.Local().Format("2006-01-02 15:04:05"), runTime(r), len(alive), rec.Label, formatTags(rec.Tags))
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
	if asJSON {
		return writeJSON(w, runJSON{Run: r, RunRecord: rec, Alive: runner.ApplyAlive(r), Nodes: nodes, Resources: alive, Results: &results})
	}
	fmt.Fprintf(w, "run %s (plan %s, %s)\n", r.ID, r.Name, r.PlanFile)
	showRecord(w, rec, nodes)
	fmt.Fprintf(w, "state: %s, started %s, %s", r.State, r.StartedAt.Local().Format("2006-01-02 15:04:05"), runTime(r))
	if !r.EndedAt.IsZero() {
		fmt.Fprintf(w, ", exit %d", r.ExitCode)
	}
	fmt.Fprintln(w)
	if r.Message != "" {
		fmt.Fprintf(w, "%s\n", r.Message)
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
		if n.Progress != "" && (n.State == state.NodeRunning || msg == "") {
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
	if len(alive) > 0 {
		fmt.Fprintf(w, "\nresources that may still exist:\n")
		for _, res := range alive {
			fmt.Fprintf(w, "  %s %s on %s (%s)\n", res.Kind, res.Name, res.Instance, res.State)
		}
		if !runner.ApplyAlive(r) {
			fmt.Fprintf(w, "remove them with: taoflow destroy %s --yes\n", r.ID)
		}
	}
	return nil
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

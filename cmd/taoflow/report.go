package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/taoflow/taoflow/state"
	"github.com/taoflow/taoflow/web"
)

func newReportCmd(sio stdio, g *globals) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "report RUN -o FILE",
		Short: "Write a run's page as one self-contained HTML file",
		Long: `Report writes the page 'taoflow ui' shows of RUN (an id, a unique prefix,
a --name, or "latest") as one HTML file to attach to a pull request or send
to a colleague: its summary (state, plan, vars, tags, git commit), one row
per cell with its matrix values, epoch and metrics, the charts, the node
graph, the instances with uptime, cost and GPU-idle time, what failed with
the last lines of its log, and the results table with where the results
are.

The file stands alone: its CSS is inline, its charts are inline SVG, it has
no script and refers to nothing outside itself (its Content-Security-Policy
forbids loading anything), so it opens the same offline and anywhere. Like
everything taoflow shows, it holds only the redacted text of the state.

-o - (the default) writes it to stdout. 'apply --report FILE' writes it at
the end of a run.`,
		Example: `  taoflow report latest -o report.html
  taoflow report sweep-1203-041523-a1b2 -o - | gzip > report.html.gz`,
		Args:              argsRange(1, 1),
		ValidArgsFunction: runCompletion(g, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			store, r, err := openRun(ctx, g.stateDir, args[0])
			if err != nil {
				return err
			}
			defer store.Close()
			if out == "-" || out == "" {
				return web.WriteReport(ctx, sio.out, store, absDir(g.stateDir), r.ID, web.ReportConfig{})
			}
			return writeReport(ctx, store, g.stateDir, r.ID, out)
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "-", "the `FILE` to write (- for stdout)")
	return cmd
}

func absDir(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}

// writeReport writes the report of run into file: whole or not at all (a
// temporary file beside it, renamed over it).
func writeReport(ctx context.Context, store *state.Store, dir, run, file string) error {
	// Mode 0666 less the umask, as any file the user writes: a report is
	// for sharing.
	tmp, err := os.OpenFile(filepath.Join(filepath.Dir(file), ".taoflow-report-"+web.NewToken()[:12]), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename: gone already
	err = web.WriteReport(ctx, tmp, store, absDir(dir), run, web.ReportConfig{})
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// reportAfterApply writes apply --report's file from the state in dir; a
// failure is said on w and does not change apply's exit status.
func reportAfterApply(ctx context.Context, w io.Writer, dir, run, file string) {
	store, err := state.OpenReadOnly(dir)
	if err == nil {
		err = writeReport(context.WithoutCancel(ctx), store, dir, run, file)
		store.Close()
	}
	if err != nil {
		fmt.Fprintf(escapeWriter{w}, "taoflow: --report %s: %v\n", file, err)
		return
	}
	fmt.Fprintf(escapeWriter{w}, "taoflow: the run's report: %s\n", file)
}

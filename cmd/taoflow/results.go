package main

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/runner"
	"github.com/taoflow/taoflow/state"
)

// resultFlags are the results table's options, on status RUN, results and
// apply.
type resultFlags struct {
	sort     string
	csv      bool
	series   bool     // results --csv: the series, long-form
	cells    []string // results: only these cells
	download string   // results: bring the uploads back into this directory
	endpoint []string // results: the S3 endpoints confirmed for --download
}

func newResultsCmd(sio stdio, g *globals) *cobra.Command {
	var (
		f      resultFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "results RUN [CELL...]",
		Short: "Show a run's results table (metrics per cell, where results went)",
		Long: `Results prints one row per job of RUN (an id, a name given with apply
--name, a unique prefix, or "latest"): its matrix values, state, time, final
epoch, the last value of every numeric metric its status.json (or other JSON
lines in its results directory) held, and where its results went: each
upload's destination and each fetch's local directory.
Give CELL ids to show only those cells.

--sort METRIC puts the best first (the lowest for a loss or an error, the
highest otherwise). --json prints last and best values, and each job's
series: every metric value it reported while it ran (status.json lines,
"epoch 3/10 loss 0.21" output lines), at most 4096 per metric, thinned
evenly beyond; --csv the same table as CSV for a notebook, and --csv
--series the series long-form, one row per point (run, step, cell, matrix
values, metric, epoch, global_step, time, value).

The table shows the main metric's curve (the --sort metric, else a loss)
as a sparkline column, e.g. "LOSS CURVE ▇▅▃▂▁", drawn with block characters
when LC_ALL, LC_CTYPE or LANG names UTF-8 and with ASCII ("#*+=-,._")
otherwise.

--download DIR brings the uploaded results back (of the CELLs given, or of
every cell) from where their manifests say they went: s3:// through the
AWS CLI here (with the upload's endpoint_url and region, and the AWS_*
credentials of this environment), file:// by copying. Each copy lands in
DIR/CELL/STEP (DIR/@INSTANCE/STEP without a matrix) and is checked against
its taoflow-run.json: every file's sha256, or the file count and bytes
where the manifest has no checksums. A copy that does not match is an
error (exit 1), naming the files. Where each copy landed is recorded in
the state: the results table, --json and the web UI list it beside the
upload's URL (a later download of the same upload replaces it).

The state may have come from elsewhere (a committed .taoflow/), so what it
says steers nothing unchecked: DIR must be yours alone to write (owned by
you, not writable by group or others; made 0700 when missing), every copy
is written through DIR (a fresh private directory beside its place, renamed
into it; an earlier download there is replaced, anything else is refused),
cell and step names that are not ids taoflow makes are refused, and an S3
upload that recorded an endpoint_url is downloaded only when you confirm
that endpoint with --endpoint-url URL (exit 2 names it): the AWS CLI sends
your signed requests there.`,
		Example: `  taoflow results latest --sort loss
  taoflow results sweep-1203 --csv > results.csv
  taoflow results sweep-1203 --csv --series > curves.csv
  taoflow results latest lr-0.01 --download ./back`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: runCompletion(g, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			if asJSON && f.csv {
				return usageError(fmt.Errorf("--json and --csv can't both be given"))
			}
			if f.series && !f.csv {
				return usageError(fmt.Errorf("--series goes with --csv (--json has the series already)"))
			}
			ctx := cmd.Context()
			store, run, err := openRun(ctx, g.stateDir, args[0])
			if err != nil {
				return err
			}
			defer store.Close()
			t, err := runner.Results(ctx, store, run.ID)
			if err != nil {
				return err
			}
			f.cells = args[1:]
			if err := pickCells(&t, f.cells); err != nil {
				return usageError(err)
			}
			if f.download != "" {
				return download(ctx, sio, store, g.stateDir, run.ID, runner.DownloadOptions{Cells: f.cells, Dir: f.download, EndpointURLs: f.endpoint})
			}
			if f.sort != "" {
				if err := t.Sort(f.sort); err != nil {
					return usageError(err)
				}
			}
			switch {
			case asJSON:
				return writeJSON(sio.out, t)
			case f.csv && f.series:
				return writeSeriesCSV(sio.out, t)
			case f.csv:
				return writeResultsCSV(sio.out, t)
			}
			if len(t.Rows) == 0 {
				fmt.Fprintf(sio.out, "run %s launched no jobs\n", run.ID)
				return nil
			}
			return writeResultsBy(escapeWriter{sio.out}, t, f.sort)
		},
	}
	cmd.Flags().StringVar(&f.sort, "sort", "", "sort by `METRIC`, best first")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&f.csv, "csv", false, "print CSV")
	cmd.Flags().BoolVar(&f.series, "series", false, "with --csv: print every job's metric series, one row per point")
	cmd.Flags().StringVar(&f.download, "download", "", "bring the uploaded results back into `DIR`, verified against their manifests")
	cmd.Flags().StringArrayVar(&f.endpoint, "endpoint-url", nil, "confirm the S3 endpoint `URL` the state says an upload used (repeatable; --download asks for it)")
	return cmd
}

// pickCells keeps the rows of the given cells (all when none).
func pickCells(t *runner.ResultTable, cells []string) error {
	if len(cells) == 0 {
		return nil
	}
	var rows []runner.ResultRow
	for _, c := range cells {
		found := false
		for _, r := range t.Rows {
			if r.Cell == c {
				rows, found = append(rows, r), true
			}
		}
		if !found {
			return fmt.Errorf("run %s has no cell %q", t.RunID, c)
		}
	}
	t.Rows = rows
	return nil
}

// metricText shows a number with at most four significant digits.
func metricText(v float64) string {
	return strconv.FormatFloat(v, 'g', 4, 64)
}

func epochText(r runner.ResultRow) string {
	if r.Epoch == nil {
		return ""
	}
	s := strconv.FormatFloat(*r.Epoch, 'f', -1, 64)
	if r.MaxEpoch != nil {
		s += "/" + strconv.FormatFloat(*r.MaxEpoch, 'f', -1, 64)
	}
	return s
}

// rowName is the row's cell, or its step and instance without a matrix.
func rowName(r runner.ResultRow, steps int) string {
	name := r.Cell
	if name == "" {
		name = "@" + r.Instance
	}
	if steps > 1 {
		name = r.Step + "[" + name + "]"
	}
	return name
}

func distinctSteps(t runner.ResultTable) int {
	seen := map[string]bool{}
	for _, r := range t.Rows {
		seen[r.Step] = true
	}
	return len(seen)
}

// writeResults prints the table for a person: last values of the metrics.
func writeResults(w io.Writer, t runner.ResultTable) error {
	return writeResultsBy(w, t, "")
}

// writeResultsBy is writeResults with the curve of metric main (else
// t.MainMetric's) in a sparkline column, when a row has its series.
func writeResultsBy(w io.Writer, t runner.ResultTable, main string) error {
	main = t.MainMetric(main)
	curves := map[string][]float64{}
	for _, c := range t.Curves(main) {
		curves[c.Step+"\x00"+c.Name] = c.Y
	}
	glyphs := sparkGlyphs(os.Getenv)
	tao := false
	for _, r := range t.Rows {
		tao = tao || r.NetworkArch != ""
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := append([]string{"CELL"}, t.Keys...)
	head = append(head, "STATE", "TIME", "EPOCH")
	if tao {
		head = append(head, "TAO")
	}
	head = append(head, t.Metrics...)
	if len(curves) > 0 {
		head = append(head, strings.ToUpper(main)+" CURVE")
	}
	if t.GPUHours > 0 {
		head = append(head, "GPU-H")
	}
	head = append(head, "RESULTS")
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	steps := distinctSteps(t)
	for _, r := range t.Rows {
		line := []string{rowName(r, steps)}
		for _, k := range t.Keys {
			line = append(line, r.Matrix[k])
		}
		d := ""
		if r.Seconds > 0 || r.State == string(engine.Succeeded) {
			d = elapsed(r.Duration)
		}
		line = append(line, r.State, d, epochText(r))
		if tao {
			line = append(line, strings.TrimSpace(r.NetworkArch+" "+r.Action))
		}
		for _, m := range t.Metrics {
			v, ok := r.Last[m]
			if ok {
				line = append(line, metricText(v))
			} else {
				line = append(line, "")
			}
		}
		if len(curves) > 0 {
			name := r.Cell
			if name == "" {
				name = "@" + r.Instance
			}
			line = append(line, sparkline(curves[r.Step+"\x00"+name], sparkWidth, glyphs))
		}
		if t.GPUHours > 0 {
			line = append(line, gpuHoursText(r.GPUHours))
		}
		res := strings.Join(r.Results, " ")
		if r.Partial {
			// Salvaged after a budget stop, Ctrl-C or failure
			// (docs/design.md §8.6): what the job had written so far.
			res += " (partial)"
		}
		line = append(line, res)
		fmt.Fprintln(tw, strings.Join(line, "\t"))
	}
	return tw.Flush()
}

// writeResultsCSV prints the table as CSV: every metric's last and best
// value, numbers in full precision; partial is "true" for results salvaged
// after a node before them did not succeed (§8.6), with why.
func writeResultsCSV(w io.Writer, t runner.ResultTable) error {
	cw := csv.NewWriter(w)
	head := []string{"step", "cell", "instance"}
	head = append(head, t.Keys...)
	head = append(head, "state", "duration_s", "epoch", "max_epoch", "network_arch", "action")
	for _, m := range t.Metrics {
		head = append(head, m, m+"_best")
	}
	head = append(head, "results", "partial", "partial_why")
	if err := cw.Write(csvFields(head)); err != nil {
		return err
	}
	num := func(v float64, ok bool) string {
		if !ok {
			return ""
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	ptr := func(p *float64) string {
		if p == nil {
			return ""
		}
		return num(*p, true)
	}
	for _, r := range t.Rows {
		line := []string{r.Step, r.Cell, r.Instance}
		for _, k := range t.Keys {
			line = append(line, r.Matrix[k])
		}
		line = append(line, r.State, num(r.Seconds, true), ptr(r.Epoch), ptr(r.MaxEpoch), r.NetworkArch, r.Action)
		for _, m := range t.Metrics {
			v, ok := r.Last[m]
			b, okb := r.Best[m]
			line = append(line, num(v, ok), num(b, okb))
		}
		partial := ""
		if r.Partial {
			partial = "true"
		}
		line = append(line, strings.Join(r.Results, " "), partial, r.PartialWhy)
		if err := cw.Write(csvFields(line)); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// writeSeriesCSV prints every row's series long-form: one record per
// point, with the row's matrix values, numbers in full precision, times
// in RFC 3339 (UTC).
func writeSeriesCSV(w io.Writer, t runner.ResultTable) error {
	cw := csv.NewWriter(w)
	head := []string{"run", "step", "cell"}
	head = append(head, t.Keys...)
	head = append(head, "metric", "epoch", "global_step", "time", "value")
	if err := cw.Write(csvFields(head)); err != nil {
		return err
	}
	for _, r := range t.Rows {
		for _, p := range r.Series {
			line := []string{t.RunID, r.Step, r.Cell}
			for _, k := range t.Keys {
				line = append(line, r.Matrix[k])
			}
			epoch, step := "", ""
			if p.Epoch != nil {
				epoch = strconv.FormatFloat(*p.Epoch, 'g', -1, 64)
			}
			if p.Step != nil {
				step = strconv.FormatInt(*p.Step, 10)
			}
			line = append(line, p.Metric, epoch, step, p.Time.UTC().Format(time.RFC3339Nano), strconv.FormatFloat(p.Value, 'g', -1, 64))
			if err := cw.Write(csvFields(line)); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// csvFields escapes the control characters of each field (escapeControls),
// newlines included: a metric name or matrix value from a job's output
// cannot drive the terminal of whoever reads the CSV, and each record
// stays one line.
func csvFields(fields []string) []string {
	for i, f := range fields {
		fields[i] = escapeControls(f)
	}
	return fields
}

// download brings a run's uploaded results back, says how each went and
// records where the copies lie in the state in dir (store is that state,
// opened for reading).
func download(ctx context.Context, sio stdio, store *state.Store, dir, run string, opts runner.DownloadOptions) error {
	ds, err := runner.DownloadResults(ctx, store, run, opts)
	if err != nil {
		return usageError(err)
	}
	if len(ds) == 0 {
		return fmt.Errorf("run %s uploaded no results", run)
	}
	// Where the copies lie is worth a line in the results table, not the
	// download: a state this user may only read keeps them unrecorded.
	if err := recordDownloads(ctx, dir, run, ds); err != nil {
		fmt.Fprintf(escapeWriter{sio.err}, "taoflow: warning: where the results were downloaded is not recorded in the state: %v\n", err)
	}
	failed := 0
	for _, d := range ds {
		if d.Err != nil {
			failed++
			fmt.Fprintf(escapeWriter{sio.err}, "taoflow: %s from %s: %v\n", d.Node, d.From, d.Err)
			continue
		}
		how := "sha256 of every file checked"
		if d.Checked == "size" {
			how = "file count and bytes checked (the manifest has no checksums)"
		}
		fmt.Fprintf(escapeWriter{sio.out}, "%s: %d files (%d bytes) from %s in %s; %s\n", d.Node, d.Files, d.Bytes, d.From, d.To, how)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d downloads did not match their manifests", failed, len(ds))
	}
	return nil
}

// recordDownloads records ds in the state in dir, opened for writing.
func recordDownloads(ctx context.Context, dir, run string, ds []runner.Download) error {
	w, err := state.Open(dir)
	if err != nil {
		return err
	}
	defer w.Close()
	return runner.RecordDownloads(ctx, w, run, ds)
}

// gpuHoursText is a row's GPU-hours as the table shows them ("" for none).
func gpuHoursText(h *float64) string {
	if h == nil {
		return ""
	}
	return strconv.FormatFloat(*h, 'f', 3, 64)
}

package runner

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/state"
	"github.com/taoflow/taoflow/steps"
)

// ResultRow is one job of a run (a cell of a run step, or the step on one
// instance) in the results table.
type ResultRow struct {
	Step     string            `json:"step"`
	Cell     string            `json:"cell,omitempty"`
	Matrix   map[string]string `json:"matrix,omitempty"`
	Instance string            `json:"instance,omitempty"`
	Job      string            `json:"job,omitempty"`
	// State is the worst state among the nodes of the job's cell (its
	// run, wait and upload nodes): failed, timed-out, canceled, skipped,
	// running, pending, then succeeded.
	State       string             `json:"state"`
	Duration    time.Duration      `json:"-"`
	Seconds     float64            `json:"duration_s"`
	NetworkArch string             `json:"network_arch,omitempty"`
	Action      string             `json:"action,omitempty"`
	Epoch       *float64           `json:"epoch,omitempty"`
	MaxEpoch    *float64           `json:"max_epoch,omitempty"`
	Last        map[string]float64 `json:"last,omitempty"`
	Best        map[string]float64 `json:"best,omitempty"`
	// Results are where the cell's results were copied: each upload's
	// destination URL, and each fetch's absolute local directory.
	Results []string `json:"results,omitempty"`
	// Partial: an upload or fetch of the job salvaged its results after a
	// node before it did not succeed (docs/design.md §8.6); PartialWhy
	// says which and why.
	Partial    bool   `json:"partial,omitempty"`
	PartialWhy string `json:"partial_why,omitempty"`
	// Series are the metric values the job reported while it ran (its
	// cell's series, SeriesKey), by metric then arrival; at most
	// state.MaxPoints per metric, thinned evenly beyond.
	Series []state.Point `json:"series,omitempty"`
	// GPUHours is, for a Slurm job, its elapsed time × its pool's GPUs
	// (so far, while it runs); nil elsewhere.
	GPUHours *float64 `json:"gpu_hours,omitempty"`
}

// ResultTable is a run's results: its jobs with their metrics.
type ResultTable struct {
	RunID   string   `json:"run_id"`
	Keys    []string `json:"matrix_keys"` // the matrix keys, in the plan's order
	Metrics []string `json:"metrics"`     // every metric name, sorted
	// SeriesMetrics are the metric names of the rows' series, sorted.
	SeriesMetrics []string    `json:"series_metrics,omitempty"`
	Rows          []ResultRow `json:"rows"`
	// GPUHours is the sum of the rows' GPU-hours (Slurm); 0 when none.
	GPUHours float64 `json:"gpu_hours,omitempty"`
}

// stateRank orders node states for a row's state, worst first.
var stateRank = map[string]int{
	string(engine.Failed): 0, string(engine.TimedOut): 1, string(engine.Canceled): 2, string(engine.Skipped): 3,
	string(engine.Running): 4, string(engine.Pending): 5, string(engine.Succeeded): 6,
}

// Results builds the results table of run from the state: one row per
// node of a run step, in graph order.
func Results(ctx context.Context, store *state.Store, runID string) (ResultTable, error) {
	nodes, err := store.Nodes(ctx, runID)
	if err != nil {
		return ResultTable{}, err
	}
	t := ResultTable{RunID: runID, Keys: []string{}, Metrics: []string{}, Rows: []ResultRow{}}
	metrics := map[string]steps.Metrics{}
	gpuHours := map[string]float64{}
	for _, n := range nodes {
		if raw := n.Facts[steps.RecordGPUHours]; raw != "" {
			var h map[string]float64
			if json.Unmarshal([]byte(raw), &h) == nil {
				maps.Copy(gpuHours, h)
			}
		}
		if raw := n.Facts[steps.RecordMetrics]; raw != "" {
			var m map[string]steps.Metrics
			if json.Unmarshal([]byte(raw), &m) == nil {
				maps.Copy(metrics, m)
			}
		}
	}
	names := map[string]bool{}
	for _, n := range nodes {
		job := n.Facts[factJob]
		if job == "" || n.Finally {
			continue // not a run node (or one that never launched)
		}
		row := ResultRow{Step: n.Step, Cell: n.Cell, Instance: n.Instance, Job: job,
			NetworkArch: n.Facts[factNetworkArch], Action: n.Facts[factAction]}
		var vals []cellValue
		if json.Unmarshal([]byte(n.Facts[factMatrix]), &vals) == nil && len(vals) > 0 {
			row.Matrix = map[string]string{}
			for _, v := range vals {
				row.Matrix[v.Key] = v.Value
				if !slices.Contains(t.Keys, v.Key) {
					t.Keys = append(t.Keys, v.Key)
				}
			}
		}
		// The nodes of the same cell (or, without a matrix, the same
		// instance) make the job's state, time and results.
		var start, end time.Time
		row.State = n.State
		for _, o := range nodes {
			if o.Finally || o.Cell != n.Cell || (n.Cell == "" && o.Instance != n.Instance) {
				continue
			}
			if stateRank[o.State] < stateRank[row.State] {
				row.State = o.State
			}
			if !o.StartedAt.IsZero() && (start.IsZero() || o.StartedAt.Before(start)) {
				start = o.StartedAt
			}
			if o.EndedAt.After(end) {
				end = o.EndedAt
			}
			if to := o.Facts[factUploadedTo]; to != "" && o.State == string(engine.Succeeded) {
				row.Results = append(row.Results, to)
			}
			if to := o.Facts[steps.RecordFetchedTo]; to != "" && o.State == string(engine.Succeeded) {
				row.Results = append(row.Results, to)
			}
			if to := o.Facts[factDownloadedTo]; to != "" && o.State == string(engine.Succeeded) {
				row.Results = append(row.Results, to)
			}
			if why := o.Facts[factPartial]; why != "" && o.State == string(engine.Succeeded) {
				row.Partial, row.PartialWhy = true, why
			}
		}
		if !start.IsZero() {
			if end.IsZero() || row.State == string(engine.Running) {
				end = time.Now()
			}
			row.Duration = end.Sub(start).Round(time.Second)
			row.Seconds = row.Duration.Seconds()
		}
		if m, ok := metrics[job]; ok {
			row.Epoch, row.MaxEpoch, row.Last, row.Best = m.Epoch, m.MaxEpoch, m.Last, m.Best
			for k := range m.Last {
				names[k] = true
			}
		}
		if h, ok := gpuHours[job]; ok {
			row.GPUHours = &h
			t.GPUHours += h
		}
		t.Rows = append(t.Rows, row)
	}
	// An array, never null, when no job reported a metric (docs/json.md).
	t.Metrics = append(t.Metrics, slices.Sorted(maps.Keys(names))...)
	pts, err := store.Series(ctx, runID)
	if err != nil {
		return ResultTable{}, err
	}
	attachSeries(&t, pts)
	return t, nil
}

// Sort orders the rows by metric, best first (lowest first for a loss or
// an error, highest first otherwise); rows without the metric go last.
func (t *ResultTable) Sort(metric string) error {
	if !slices.Contains(t.Metrics, metric) {
		return fmt.Errorf("no metric %q in run %s (it has: %v)", metric, t.RunID, t.Metrics)
	}
	lower := steps.LowerIsBetter(metric)
	slices.SortStableFunc(t.Rows, func(a, b ResultRow) int {
		va, oka := a.Last[metric]
		vb, okb := b.Last[metric]
		switch {
		case !oka || !okb:
			return cmp.Compare(boolInt(!oka), boolInt(!okb))
		case lower:
			return cmp.Compare(va, vb)
		}
		return cmp.Compare(vb, va)
	})
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

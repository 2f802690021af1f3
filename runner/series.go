package runner

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/state"
)

// attachSeries gives each row of t the points of its series (SeriesKey of
// its cell or job), and adds the series' metric names to t.SeriesMetrics.
func attachSeries(t *ResultTable, pts []state.Point) {
	byKey := map[string][]state.Point{}
	names := map[string]bool{}
	for _, p := range pts {
		byKey[p.Cell] = append(byKey[p.Cell], p)
	}
	for i := range t.Rows {
		r := &t.Rows[i]
		r.Series = byKey[SeriesKey(r.Cell, r.Job, "")]
		for _, p := range r.Series {
			names[p.Metric] = true
		}
	}
	for n := range names {
		t.SeriesMetrics = append(t.SeriesMetrics, n)
	}
	slices.Sort(t.SeriesMetrics)
}

// MainMetric is the metric a one-line summary of t shows (the results
// table's sparkline, a chart's default): prefer, when t has it (as a final
// metric or a series), then "loss", then the first name holding "loss",
// then the first series metric, then the first final metric; "" when t
// has none.
func (t ResultTable) MainMetric(prefer string) string {
	all := slices.Concat(t.SeriesMetrics, t.Metrics)
	if prefer != "" && slices.Contains(all, prefer) {
		return prefer
	}
	if slices.Contains(all, "loss") {
		return "loss"
	}
	for _, m := range all {
		if strings.Contains(strings.ToLower(m), "loss") {
			return m
		}
	}
	if len(all) > 0 {
		return all[0]
	}
	return ""
}

// Curve is one row's series of one metric, ready to draw: its name (the
// cell, or @INSTANCE without a matrix), its matrix values, and its points
// as X (the epoch; else the step; else the arrival number) and Y.
type Curve struct {
	Name   string            `json:"name"`
	Step   string            `json:"step"`
	Matrix map[string]string `json:"matrix,omitempty"`
	State  string            `json:"state"`
	X      []float64         `json:"x"`
	Y      []float64         `json:"y"`
}

// Curves returns metric's series of every row of t that has one, in row
// order: what a chart of metric against epoch draws (colour by one matrix
// key, dash by another). A row's X is its epochs when every point has one,
// else its steps when every point has one, else 0, 1, 2… in arrival order.
func (t ResultTable) Curves(metric string) []Curve {
	var out []Curve
	for _, r := range t.Rows {
		var pts []state.Point
		for _, p := range r.Series {
			if p.Metric == metric {
				pts = append(pts, p)
			}
		}
		if len(pts) == 0 {
			continue
		}
		name := r.Cell
		if name == "" {
			name = "@" + r.Instance
		}
		c := Curve{Name: name, Step: r.Step, Matrix: r.Matrix, State: r.State, X: make([]float64, len(pts)), Y: make([]float64, len(pts))}
		epochs := !slices.ContainsFunc(pts, func(p state.Point) bool { return p.Epoch == nil })
		steps := !slices.ContainsFunc(pts, func(p state.Point) bool { return p.Step == nil })
		for i, p := range pts {
			switch {
			case epochs:
				c.X[i] = *p.Epoch
			case steps:
				c.X[i] = float64(*p.Step)
			default:
				c.X[i] = float64(p.Seq)
			}
			c.Y[i] = p.Value
		}
		out = append(out, c)
	}
	return out
}

// Span is one node's time on an instance: a bar of a run's timeline.
type Span struct {
	Node     string `json:"node"`
	Step     string `json:"step"`
	Cell     string `json:"cell,omitempty"`
	Instance string `json:"instance"`
	// Slot is the slot the node's cell held on its instance (-1: none,
	// the node had the instance to itself).
	Slot  int       `json:"slot"`
	State string    `json:"state"`
	Start time.Time `json:"start"`
	// End is when it ended; for a node still running, the time Timeline
	// was called.
	End time.Time `json:"end"`
}

// Timeline returns the nodes of run that started, as spans per instance
// and slot, ordered by instance, slot and start: what a Gantt chart of the
// run draws (the gaps between an instance's spans are its idle time).
// Finalizers are included; nodes never placed on an instance are not.
func Timeline(ctx context.Context, store *state.Store, run string) ([]Span, error) {
	nodes, err := store.Nodes(ctx, run)
	if err != nil {
		return nil, err
	}
	// A cell's slot is recorded on the node that launched its job; the
	// cell's other nodes ran in the same slot.
	slots := map[string]int{}
	for _, n := range nodes {
		if v, ok := n.Facts[factSlot]; ok && n.Cell != "" {
			if i, err := strconv.Atoi(v); err == nil {
				slots[n.Cell] = i
			}
		}
	}
	now := time.Now().UTC()
	var out []Span
	for _, n := range nodes {
		if n.StartedAt.IsZero() || n.Instance == "" {
			continue
		}
		s := Span{Node: n.ID, Step: n.Step, Cell: n.Cell, Instance: n.Instance, Slot: -1, State: n.State, Start: n.StartedAt, End: n.EndedAt}
		if i, ok := slots[n.Cell]; ok && n.Cell != "" {
			s.Slot = i
		}
		if s.End.IsZero() || n.State == string(engine.Running) {
			s.End = now
		}
		out = append(out, s)
	}
	slices.SortStableFunc(out, func(a, b Span) int {
		return cmp.Or(cmp.Compare(a.Instance, b.Instance), cmp.Compare(a.Slot, b.Slot), a.Start.Compare(b.Start))
	})
	return out, nil
}

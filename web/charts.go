package web

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/taoflow/taoflow/internal/progress"
	"github.com/taoflow/taoflow/runner"
	"github.com/taoflow/taoflow/state"
	"github.com/taoflow/taoflow/web/chart"
)

// Choice is what the page's chart controls chose (query ?metric=, ?color=,
// ?dash=, ?x=, ?y=) and its results' sort (?sort=); "" picks the default.
type Choice struct {
	Sort, Metric, Color, Dash, X, Y string
}

// choiceOf reads the choice from a query.
func choiceOf(q url.Values) Choice {
	return Choice{Sort: q.Get("sort"), Metric: q.Get("metric"), Color: q.Get("color"), Dash: q.Get("dash"), X: q.Get("x"), Y: q.Get("y")}
}

// Query is c as a query string ("" when all are defaults).
func (c Choice) Query() string {
	q := url.Values{}
	for k, v := range map[string]string{"sort": c.Sort, "metric": c.Metric, "color": c.Color, "dash": c.Dash, "x": c.X, "y": c.Y} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q.Encode()
}

// settle replaces what c chose that t does not have with defaults: the
// main metric (runner.ResultTable.MainMetric), colour by the first matrix
// key and dash by the second, the heat map over the first two keys.
func (c *Choice) settle(t runner.ResultTable) {
	// The page offers metric names cleaned (Clean): a name a job printed
	// with control characters in it comes back as its cleaned form.
	for _, m := range slices.Concat(t.SeriesMetrics, t.Metrics) {
		if c.Metric != m && c.Metric == Clean(m) {
			c.Metric = m
			break
		}
	}
	c.Metric = t.MainMetric(c.Metric)
	pick := func(v string, i int, not string) string {
		if v == "-" || (v != "" && slices.Contains(t.Keys, v)) {
			return v
		}
		for _, k := range t.Keys[min(i, len(t.Keys)):] {
			if k != not {
				return k
			}
		}
		return ""
	}
	c.Color = pick(c.Color, 0, "")
	c.Dash = pick(c.Dash, 1, c.Color)
	c.X = pick(c.X, 0, "")
	c.Y = pick(c.Y, 1, c.X)
	if c.Dash == "-" {
		c.Dash = ""
	}
}

// charts draws the run's charts (their titles are the page's captions): each series metric against epoch (the
// chosen one first), the heat map of the chosen metric's final values
// over two matrix keys, and the timeline of nodes per instance and slot.
func charts(ctx context.Context, store *state.Store, p *RunPage) []Chart {
	t := p.Results
	c := p.Choice
	var out []Chart
	metrics := slices.Clone(t.SeriesMetrics)
	if i := slices.Index(metrics, c.Metric); i > 0 {
		metrics = slices.Insert(slices.Delete(metrics, i, i+1), 0, c.Metric)
	}
	if !p.Report && len(metrics) > 1 {
		metrics = metrics[:1] // the page shows the chosen one; the report all
	}
	for _, m := range metrics {
		curves := t.Curves(m)
		lines := make([]chart.Line, 0, len(curves))
		for _, cv := range curves {
			lines = append(lines, chart.Line{Name: cv.Name, Matrix: cv.Matrix, X: cv.X, Y: cv.Y})
		}
		title := m + " by epoch"
		if c.Color != "" {
			title += ", colour by " + c.Color
		}
		if c.Dash != "" {
			title += ", dash by " + c.Dash
		}
		out = append(out, Chart{Title: title, SVG: chart.Lines(lines, chart.LinesOptions{XLabel: "epoch", YLabel: m, ColorBy: c.Color, DashBy: c.Dash})})
	}
	if c.X != "" && c.Y != "" && c.Metric != "" {
		var cells []chart.Cell
		for _, r := range t.Rows {
			v, ok := finalValue(r, c.Metric)
			if !ok || r.Matrix == nil {
				continue
			}
			cells = append(cells, chart.Cell{X: r.Matrix[c.X], Y: r.Matrix[c.Y], Value: v})
		}
		if len(cells) > 0 {
			title := fmt.Sprintf("final %s over %s × %s", c.Metric, c.X, c.Y)
			out = append(out, Chart{Title: title, SVG: chart.HeatMap(cells, chart.HeatMapOptions{XKey: c.X, YKey: c.Y, Metric: c.Metric, LowerIsBetter: lowerIsBetter(c.Metric)})})
		}
	}
	if spans, err := runner.Timeline(ctx, store, p.Run.ID); err == nil && len(spans) > 0 {
		bars := make([]chart.Bar, 0, len(spans))
		for _, s := range spans {
			row := s.Instance
			if s.Slot >= 0 {
				row = fmt.Sprintf("%s slot %d", s.Instance, s.Slot)
			}
			bars = append(bars, chart.Bar{Row: row, Label: s.Node, Start: s.Start, End: s.End, State: s.State})
		}
		title := "nodes per instance and slot (idle gaps hatched)"
		out = append(out, Chart{Title: title, SVG: chart.Gantt(bars, chart.GanttOptions{})})
	}
	return out
}

// finalValue is row's last value of metric: the recorded last value, else
// its series' last point.
func finalValue(r runner.ResultRow, metric string) (float64, bool) {
	if v, ok := r.Last[metric]; ok {
		return v, true
	}
	for i := len(r.Series) - 1; i >= 0; i-- {
		if r.Series[i].Metric == metric {
			return r.Series[i].Value, true
		}
	}
	return 0, false
}

// lowerIsBetter is the results table's rule for "best" (runner §7.3): a
// loss or an error is best lowest.
func lowerIsBetter(metric string) bool {
	m := strings.ToLower(metric)
	return progress.IsLoss(m) || strings.Contains(m, "err") || strings.Contains(m, "mae") || strings.Contains(m, "mse")
}

// sparkline is a cell's curve of metric, inline ("" when it has none).
func sparkline(r runner.ResultRow, metric string) string {
	var ys []float64
	for _, p := range r.Series {
		if p.Metric == metric {
			ys = append(ys, p.Value)
		}
	}
	if len(ys) < 2 {
		return ""
	}
	return chart.Sparkline(ys, 90, 18, fmt.Sprintf("%s %s → %s", metric, num(ys[0]), num(ys[len(ys)-1])))
}

// compareCharts overlays the chosen metric's curves of every run, coloured
// by run and dashed by the first matrix key they share.
func compareCharts(runs []*RunPage, metric string) (string, []Chart) {
	var metrics []string
	for _, p := range runs {
		for _, m := range p.Results.SeriesMetrics {
			if !slices.Contains(metrics, m) {
				metrics = append(metrics, m)
			}
		}
	}
	if len(metrics) == 0 {
		return "", nil
	}
	if !slices.Contains(metrics, metric) {
		metric = runner.ResultTable{SeriesMetrics: metrics}.MainMetric("")
	}
	dash := ""
	if len(runs) > 0 {
		for _, k := range runs[0].Results.Keys {
			if !slices.ContainsFunc(runs, func(p *RunPage) bool { return !slices.Contains(p.Results.Keys, k) }) {
				dash = k
				break
			}
		}
	}
	var lines []chart.Line
	for _, p := range runs {
		for _, cv := range p.Results.Curves(metric) {
			m := map[string]string{"run": p.Run.ID}
			for k, v := range cv.Matrix {
				m[k] = v
			}
			lines = append(lines, chart.Line{Name: p.Run.ID + " " + cv.Name, Matrix: m, X: cv.X, Y: cv.Y})
		}
	}
	title := metric + " by epoch, colour by run"
	if dash != "" {
		title += ", dash by " + dash
	}
	return metric, []Chart{{Title: title, SVG: chart.Lines(lines, chart.LinesOptions{XLabel: "epoch", YLabel: metric, ColorBy: "run", DashBy: dash})}}
}

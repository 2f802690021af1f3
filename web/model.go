package web

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/pricing"
	"github.com/taoflow/taoflow/runner"
	"github.com/taoflow/taoflow/state"
)

// RunPage is what the run page (and the report) shows of one run.
type RunPage struct {
	Key      string // the state directory's key in URLs
	Dir      string // the state directory
	Run      state.Run
	Record   state.RunRecord
	Git      Git
	Alive    bool // its apply is alive on this host: it can be interrupted
	Gone     bool // the state says running, but its apply died
	Duration string
	Cost     pricing.RunCost
	Keys     []string // matrix keys, in the plan's order
	Cells    []Cell
	Steps    []StepColumn
	// Instances are the instances the run used, with uptime and cost.
	Instances []Instance
	Failures  []Failure
	Results   runner.ResultTable
	Sort      string // the results' sort metric, "" for graph order
	Choice    Choice // the charts' and the sort's choices, settled
	// Metrics are the metrics the charts can show (the series' names).
	Metrics []string
	Left    []state.Resource
	Next    []string // what to run when the apply is gone
	Now     time.Time
	Report  bool // rendered as a report: no links to the server, no script
	Message string
	// Charts are the run's charts, as SVG markup: the series (none until
	// a job reported a metric), the heat map and the timeline.
	Charts []Chart
}

// Chart is one chart of the run page: a title and its SVG.
type Chart struct {
	Title string
	SVG   string // trusted markup, drawn by web/chart from escaped values
}

// Git is the git state a run started from.
type Git struct {
	Commit, Branch string
	Dirty, Repo    bool
}

// Cell is one row of the cell grid: a cell of a run step (or the step on
// one instance, without a matrix).
type Cell struct {
	ID       string
	Values   []string // by RunPage.Keys
	Step     string   // the step it is at: its running node's, else its latest
	Node     string   // that node's id (its log)
	Instance string
	Epoch    string // "3/10", "" when none reported
	Spark    string // the main metric's curve, inline SVG ("" without one)
	Metrics  []Metric
	State    string
	Time     string
}

// Metric is one named figure.
type Metric struct {
	Name  string
	Value string
}

// StepColumn is a step of the node graph with its nodes, in the order the
// run recorded them.
type StepColumn struct {
	Step  string
	Nodes []NodeBox
}

// NodeBox is one node of the graph.
type NodeBox struct {
	ID, State, Instance, Time string
}

// Instance is one instance of the run.
type Instance struct {
	Name, Platform, State, Type string
	Uptime, Cost, Idle, Price   string
}

// Failure is a node that failed, with its log's last lines.
type Failure struct {
	Node, Title, Message string
	Tail                 []string
}

// FailureTailLines is how many lines of a failed node's log the page shows.
const FailureTailLines = 20

// loadRun reads run id of store into a page.
func loadRun(ctx context.Context, store *state.Store, key, dir, id string, choice Choice, report bool, now time.Time) (*RunPage, error) {
	r, err := store.Run(ctx, id)
	if err != nil {
		return nil, err
	}
	nodes, err := store.Nodes(ctx, id)
	if err != nil {
		return nil, err
	}
	rec, err := store.RunRecord(ctx, id)
	if err != nil {
		return nil, err
	}
	results, err := runner.Results(ctx, store, id)
	if err != nil {
		return nil, err
	}
	for _, m := range results.Metrics {
		if choice.Sort != m && choice.Sort == Clean(m) {
			choice.Sort = m // as the page's form sends it back
		}
	}
	if choice.Sort != "" && slices.Contains(results.Metrics, choice.Sort) {
		if err := results.Sort(choice.Sort); err != nil {
			return nil, err
		}
	} else {
		choice.Sort = ""
	}
	choice.settle(results)
	cost, err := pricing.Costs(ctx, store, id, now)
	if err != nil {
		return nil, err
	}
	resources, err := store.Resources(ctx, id)
	if err != nil {
		return nil, err
	}
	alive, err := store.Alive(ctx, id)
	if err != nil {
		return nil, err
	}
	p := &RunPage{Key: key, Dir: dir, Run: r, Record: rec, Git: gitOf(rec.Provenance),
		Alive: runner.ApplyAlive(r), Gone: runner.ApplyGone(r), Duration: runDuration(r, now),
		Cost: cost, Keys: results.Keys, Results: results, Sort: choice.Sort, Choice: choice, Metrics: results.SeriesMetrics,
		Left: alive, Now: now, Report: report}
	if p.Gone {
		p.Next = runner.NextSteps(r, alive)
	}
	p.Cells = cells(nodes, results, choice.Metric)
	p.Steps = stepColumns(nodes, now)
	p.Instances = instances(resources, cost, now)
	for _, n := range nodes {
		if st := engine.NodeState(n.State); st != engine.Failed && st != engine.TimedOut {
			continue
		}
		f := runner.Failure{Node: n.ID, Job: n.Facts[runner.FactFailedJob], Instance: n.Instance, State: n.State}
		p.Failures = append(p.Failures, Failure{Node: n.ID, Title: f.Title(), Message: n.Message,
			Tail: runner.LogTail(store, id, n.ID, FailureTailLines)})
	}
	p.Charts = charts(ctx, store, p)
	return p, nil
}

func gitOf(prov json.RawMessage) Git {
	var p struct {
		Git *struct {
			Repo   bool   `json:"repo"`
			Commit string `json:"commit"`
			Branch string `json:"branch"`
			Dirty  bool   `json:"dirty"`
		} `json:"git"`
	}
	if json.Unmarshal(prov, &p) != nil || p.Git == nil {
		return Git{}
	}
	return Git{Commit: p.Git.Commit, Branch: p.Git.Branch, Dirty: p.Git.Dirty, Repo: p.Git.Repo}
}

// cells builds the cell grid: one row per results row, with the live
// figures of the cell's nodes (its wait's progress while the job runs).
func cells(nodes []state.Node, t runner.ResultTable, metric string) []Cell {
	var out []Cell
	for _, row := range t.Rows {
		c := Cell{ID: cmp.Or(row.Cell, row.Instance), Instance: row.Instance, State: row.State, Spark: sparkline(row, metric)}
		for _, k := range t.Keys {
			c.Values = append(c.Values, row.Matrix[k])
		}
		if row.Seconds > 0 {
			c.Time = elapsed(time.Duration(row.Seconds) * time.Second)
		}
		var at *state.Node // the node the cell is at
		var fig *state.Node
		for i := range nodes {
			n := &nodes[i]
			if n.Finally || n.Cell != row.Cell || (row.Cell == "" && n.Instance != row.Instance) {
				continue
			}
			if n.ProgressFigures != nil && (n.ProgressFigures.Epoch != nil || n.ProgressFigures.Value != nil) {
				fig = n
			}
			switch engine.NodeState(n.State) {
			case engine.Pending:
				continue
			case engine.Running:
				at = n
			default:
				if at == nil || engine.NodeState(at.State) != engine.Running {
					at = n
				}
			}
		}
		if at != nil {
			c.Step, c.Node = at.Step, at.ID
			if at.Instance != "" {
				c.Instance = at.Instance
			}
		}
		switch {
		case row.Epoch != nil:
			c.Epoch = num(*row.Epoch)
			if row.MaxEpoch != nil {
				c.Epoch += "/" + num(*row.MaxEpoch)
			}
		case fig != nil && fig.ProgressFigures.Epoch != nil:
			c.Epoch = num(*fig.ProgressFigures.Epoch)
			if fig.ProgressFigures.MaxEpoch != nil {
				c.Epoch += "/" + num(*fig.ProgressFigures.MaxEpoch)
			}
		}
		if fig != nil && engine.NodeState(fig.State) == engine.Running || len(row.Last) == 0 {
			if fig != nil && fig.ProgressFigures.Value != nil {
				c.Metrics = append(c.Metrics, Metric{fig.ProgressFigures.Metric, num(*fig.ProgressFigures.Value)})
			}
		}
		if len(c.Metrics) == 0 {
			for _, k := range slices.Sorted(maps.Keys(row.Last)) {
				c.Metrics = append(c.Metrics, Metric{k, num(row.Last[k])})
			}
		}
		// A job that prints plain epoch lines has no progress figures:
		// its series say where it is.
		if len(row.Series) > 0 && (c.Epoch == "" || len(c.Metrics) == 0) {
			last := map[string]float64{}
			var epoch *float64
			for _, p := range row.Series {
				last[p.Metric] = p.Value
				if p.Epoch != nil && (epoch == nil || *p.Epoch > *epoch) {
					epoch = p.Epoch
				}
			}
			if c.Epoch == "" && epoch != nil {
				c.Epoch = num(*epoch)
			}
			if len(c.Metrics) == 0 {
				for _, k := range slices.Sorted(maps.Keys(last)) {
					c.Metrics = append(c.Metrics, Metric{k, num(last[k])})
				}
			}
		}
		out = append(out, c)
	}
	return out
}

func stepColumns(nodes []state.Node, now time.Time) []StepColumn {
	var cols []StepColumn
	idx := map[string]int{}
	for _, n := range nodes {
		step := n.Step
		if n.Finally {
			step = "finally: " + n.Step
		}
		i, ok := idx[step]
		if !ok {
			i = len(cols)
			idx[step] = i
			cols = append(cols, StepColumn{Step: step})
		}
		b := NodeBox{ID: n.ID, State: n.State, Instance: n.Instance}
		if !n.StartedAt.IsZero() {
			end := n.EndedAt
			if end.IsZero() {
				end = now
			}
			b.Time = elapsed(end.Sub(n.StartedAt))
		}
		cols[i].Nodes = append(cols[i].Nodes, b)
	}
	return cols
}

// instances lists the run's instance resources with their uptime; cost,
// price and GPU-idle time where pricing knows them (instances created on a
// platform that bills).
func instances(resources []state.Resource, cost pricing.RunCost, now time.Time) []Instance {
	costs := map[string]pricing.InstanceCost{}
	for _, c := range cost.Instances {
		costs[c.Instance] = c
	}
	var out []Instance
	for _, r := range resources {
		if r.Kind != state.KindInstance {
			continue
		}
		in := Instance{Name: r.Instance, Platform: r.Platform, State: r.State}
		if in.Name == "" {
			in.Name = r.Name
		}
		end := now
		if r.State == state.ResourceDeleted {
			end = r.UpdatedAt
		}
		in.Uptime = elapsed(end.Sub(r.CreatedAt))
		if c, ok := costs[in.Name]; ok {
			in.Type = c.Type
			in.Uptime = elapsed(time.Duration(c.UptimeSeconds * float64(time.Second)))
			in.Idle = elapsed(time.Duration(c.IdleSeconds * float64(time.Second)))
			if c.Cost != nil {
				in.Cost = money(*c.Cost)
			}
			if c.PricePerHour != nil {
				in.Price = money(*c.PricePerHour) + "/h"
			}
		}
		out = append(out, in)
	}
	return out
}

// RunsRow is one run in the list of runs.
type RunsRow struct {
	Key, Dir string
	Run      state.Run
	Record   state.RunRecord
	Git      Git
	Duration string
	Cost     string
	Gone     bool
	Alive    int // resources that may still exist
}

// listRuns lists the runs of store carrying every tag of tags.
func listRuns(ctx context.Context, store *state.Store, key, dir string, tags map[string]string, now time.Time) ([]RunsRow, error) {
	runs, err := store.Runs(ctx)
	if err != nil {
		return nil, err
	}
	recs, err := store.RunRecords(ctx)
	if err != nil {
		return nil, err
	}
	var out []RunsRow
	for _, r := range runs {
		rec := recs[r.ID]
		if !hasTags(rec.Tags, tags) {
			continue
		}
		row := RunsRow{Key: key, Dir: dir, Run: r, Record: rec, Git: gitOf(rec.Provenance), Duration: runDuration(r, now), Gone: runner.ApplyGone(r)}
		if c, err := pricing.Costs(ctx, store, r.ID, now); err == nil && len(c.Instances) > 0 {
			row.Cost = money(c.Total)
			if c.Unpriced > 0 {
				row.Cost += fmt.Sprintf(" (+%d unpriced)", c.Unpriced)
			}
		}
		if alive, err := store.Alive(ctx, r.ID); err == nil {
			row.Alive = len(alive)
		}
		out = append(out, row)
	}
	return out, nil
}

func hasTags(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// parseTags reads tag filters KEY=VALUE; a bad one is left out.
func parseTags(q url.Values) map[string]string {
	tags := map[string]string{}
	for _, t := range q["tag"] {
		if k, v, ok := strings.Cut(t, "="); ok && k != "" {
			tags[k] = v
		}
	}
	return tags
}

func runDuration(r state.Run, now time.Time) string {
	end := r.EndedAt
	if end.IsZero() {
		end = now
	}
	return elapsed(end.Sub(r.StartedAt))
}

// elapsed is d for people: 42s, 3m05s, 2h04m.
func elapsed(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}

func money(v float64) string { return "$" + strconv.FormatFloat(v, 'f', 2, 64) }

// num is a figure as people read it: an integer without decimals, else
// four significant digits.
func num(v float64) string {
	if v == float64(int64(v)) && v < 1e15 && v > -1e15 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// SortQuery is the page's query with the results sorted by metric.
func (p *RunPage) SortQuery(metric string) string {
	c := p.Choice
	c.Sort = metric
	return "?" + c.Query()
}

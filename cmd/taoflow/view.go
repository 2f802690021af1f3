package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sourcegraph/conc"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/internal/progress"
	"github.com/taoflow/taoflow/platform"
	"github.com/taoflow/taoflow/pricing"
	"github.com/taoflow/taoflow/runner"
)

// applyView shows an apply: how it starts, every event, and how it ended.
// It owns all of apply's output after the plan is loaded. Close ends a
// live display; Outcome comes after it.
type applyView interface {
	engine.Observer
	Start(applyStart)
	Close()
	Outcome(runner.Outcome)
}

// applyStart is what an apply says before its first event.
type applyStart struct {
	RunID      string `json:"run_id"`
	Plan       string `json:"plan"`
	Resumed    bool   `json:"resumed"`
	DoneBefore int    `json:"done_before,omitempty"` // nodes an earlier attempt of a resumed run finished
	Nodes      int    `json:"nodes"`
	Instances  int    `json:"instances"`
	StateDir   string `json:"state_dir"`
}

// humanView is the plain or live view of the events, with the start and
// the outcome as "taoflow: " lines on stderr, and the results table of the
// outcome on stdout.
type humanView struct {
	engine.Observer
	out, errOut io.Writer
}

func (v *humanView) Start(s applyStart) {
	if s.Resumed {
		fmt.Fprintf(v.errOut, "taoflow: resuming run %s (%d of %d nodes succeeded before; %s); state in %s\n", s.RunID, s.DoneBefore, s.Nodes, count(s.Instances, "instance"), s.StateDir)
		return
	}
	fmt.Fprintf(v.errOut, "taoflow: run %s (%s on %s); state in %s\n", s.RunID, count(s.Nodes, "node"), count(s.Instances, "instance"), s.StateDir)
}

func (v *humanView) Close() {
	if c, ok := v.Observer.(interface{ Close() }); ok {
		c.Close()
	}
}

// Outcome says what failed and why (the last lines of its log and the
// command that shows the rest), what may remain, and the verdict; then
// prints the results table, when the run launched jobs.
func (v *humanView) Outcome(o runner.Outcome) {
	w := escapeWriter{v.errOut}
	for _, k := range o.Kept {
		if o.Bills {
			fmt.Fprintf(w, "taoflow: instance %s kept (keep: true); it bills until: %s\n", k, o.RemoveCommand)
		} else {
			fmt.Fprintf(w, "taoflow: instance %s kept (keep: true); remove it with: %s\n", k, o.RemoveCommand)
		}
	}
	for _, name := range o.Held {
		fmt.Fprintf(w, "taoflow: instance %s held, not deleted: a results upload or fetch on it failed, so it keeps the results (a local sandbox costs nothing); copy them, then remove it with: %s\n", name, o.RemoveCommand)
	}
	for _, f := range o.Failures {
		if f.Job != "" {
			// The job's run step first: users think "train failed".
			fmt.Fprintf(w, "taoflow: %s\n", f.Title())
			fmt.Fprintf(w, "taoflow:   %s %s: %s\n", f.Node, f.State, f.Message)
		} else {
			fmt.Fprintf(w, "taoflow: %s: %s\n", f.Title(), f.Message)
		}
		if len(f.LogTail) > 0 {
			fmt.Fprintf(w, "taoflow:   the last %s of its log:\n", count(len(f.LogTail), "line"))
			for _, l := range f.LogTail {
				fmt.Fprintf(w, "    | %s\n", l)
			}
		}
		fmt.Fprintf(w, "taoflow:   all of it: %s\n", f.LogsCommand)
	}
	for _, name := range o.Stopped {
		fmt.Fprintf(w, "taoflow: instance %s was stopped, not deleted: a results upload or fetch on it failed and its disk holds them; it bills for its disk until removed with: %s\n", name, o.RemoveCommand)
	}
	if len(o.Left) > 0 {
		if o.Bills {
			fmt.Fprintf(w, "taoflow: these may still exist (and bill): %s\n", strings.Join(o.Left, ", "))
		} else {
			fmt.Fprintf(w, "taoflow: these may still exist: %s\n", strings.Join(o.Left, ", "))
		}
		for _, err := range joined(o.Teardown) {
			fmt.Fprintf(w, "taoflow:   %v\n", err)
		}
		fmt.Fprintf(w, "taoflow: remove them with: %s\n", o.RemoveCommand)
	}
	printCostLines(w, o.Cost)
	fmt.Fprintf(w, "taoflow: run %s %s\n", o.RunID, o.Message)
	if o.StateErrors > 0 {
		fmt.Fprintf(w, "taoflow: %d writes to the state failed; 'taoflow status %s' may be incomplete\n", o.StateErrors, o.RunID)
	}
	if len(o.Results.Rows) > 0 {
		fmt.Fprintln(v.out)
		_ = writeResults(escapeWriter{v.out}, o.Results)
	}
}

// count is "1 node", "3 nodes".
func count(n int, what string) string {
	return fmt.Sprintf("%d %s%s", n, what, plural(n))
}

// jsonView prints one JSON object per line: the apply's start, every
// event with the run id and, for progress, its figures as numbers, and the
// outcome with the exit code last (docs/json.md).
type jsonView struct {
	mu  sync.Mutex
	enc *json.Encoder
	run string
}

func newJSONView(w io.Writer, run string) *jsonView {
	return &jsonView{enc: json.NewEncoder(w), run: run}
}

// jsonEvent is an engine event as the json view prints it: with the run
// id, and the event's progress figures (Event.Progress) after it, where
// they have always been printed.
type jsonEvent struct {
	engine.Event
	RunID    string            `json:"run_id"`
	Progress *progress.Figures `json:"progress,omitempty"`
}

func (v *jsonView) Event(e engine.Event) {
	v.encode(jsonEvent{Event: e, RunID: v.run, Progress: e.Progress})
}

func (v *jsonView) Start(s applyStart) {
	v.encode(struct {
		Time time.Time `json:"time"`
		Type string    `json:"type"`
		applyStart
	}{time.Now(), "apply-started", s})
}

func (v *jsonView) Close() {}

func (v *jsonView) Outcome(o runner.Outcome) {
	v.encode(struct {
		Time time.Time `json:"time"`
		Type string    `json:"type"`
		runner.Outcome
	}{time.Now(), string(engine.RunEnded), o})
}

func (v *jsonView) encode(x any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	_ = v.enc.Encode(x)
}

// plainView prints timestamped lines, for logs and CI.
type plainView struct {
	mu sync.Mutex
	w  io.Writer
}

func (v *plainView) Event(e engine.Event) {
	line := describe(e)
	if line == "" {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	fmt.Fprintf(v.w, "%s %s\n", e.Time.Format("15:04:05"), escapeText(line))
}

// describe renders an event as one human line ("" to leave it out).
func describe(e engine.Event) string {
	switch e.Type {
	case engine.RunStarted:
		return "run started: " + e.Message
	case engine.InstanceAcquire:
		return fmt.Sprintf("instance %s: preparing", e.Instance)
	case engine.InstanceReady:
		return fmt.Sprintf("instance %s: ready", e.Instance)
	case engine.InstanceProgress:
		return fmt.Sprintf("instance %s: %s", e.Instance, e.Message)
	case engine.InstanceFailed:
		return fmt.Sprintf("instance %s: FAILED: %s", e.Instance, e.Message)
	case engine.InstanceRelease:
		return fmt.Sprintf("instance %s: releasing (%s)", e.Instance, e.Message)
	case engine.InstanceReleased:
		return fmt.Sprintf("instance %s: %s", e.Instance, e.Message)
	case engine.InstanceLeft:
		return fmt.Sprintf("instance %s: NOT RELEASED: %s", e.Instance, e.Message)
	case engine.NodePlaced:
		return fmt.Sprintf("%s: placed on %s", e.Node, e.Instance)
	case engine.NodeStarted:
		if e.Attempt > 1 {
			return fmt.Sprintf("%s on %s: started (attempt %d)", e.Node, e.Instance, e.Attempt)
		}
		return fmt.Sprintf("%s on %s: started", e.Node, e.Instance)
	case engine.NodeRetrying, engine.NodeSalvage:
		return fmt.Sprintf("%s: %s", e.Node, e.Message)
	case engine.NodeLog:
		return fmt.Sprintf("%s | %s", e.Node, e.Message)
	case engine.NodeProgress:
		return fmt.Sprintf("%s: %s", e.Node, e.Message)
	case engine.NodeEnded:
		s := fmt.Sprintf("%s: %s", e.Node, e.State)
		if e.Instance != "" {
			s = fmt.Sprintf("%s on %s: %s", e.Node, e.Instance, e.State)
		}
		if e.Message != "" {
			s += ": " + e.Message
		}
		return s
	case engine.NodeMetrics:
		return "" // for the state's series; the progress line says it
	case engine.FinallyStarted:
		return "running finalizers"
	case engine.RunEnded:
		return "run ended: " + e.Message
	}
	return ""
}

// liveView redraws a table of nodes on a terminal: node, instance, state,
// elapsed time and the last log or progress line.
type liveView struct {
	mu      sync.Mutex
	w       io.Writer
	width   func() (int, int)
	rows    map[string]*liveRow
	order   []string
	lines   int // lines drawn last time
	notes   []string
	insts   map[string]string // instance → what it is doing, for the instances line
	iorder  []string
	stop    chan struct{}
	loop    conc.WaitGroup // the redraw loop; Close waits for it (and re-panics its panic)
	started time.Time
	// costs, when set, says what the created instances have cost so far;
	// asked at most every costEvery, its last answer shown in a line.
	costs     func() (pricing.RunCost, error)
	cost      *pricing.RunCost
	costAsked time.Time
}

// costEvery is how often the live view asks what the run has cost.
const costEvery = 5 * time.Second

type liveRow struct {
	node, instance, last string
	state                engine.NodeState
	start, end           time.Time
}

func newLiveView(w io.Writer, g *engine.Graph, size func() (int, int)) *liveView {
	v := &liveView{w: w, width: size, rows: map[string]*liveRow{}, insts: map[string]string{},
		stop: make(chan struct{}), started: time.Now()}
	for _, n := range g.Nodes {
		v.rows[n.ID] = &liveRow{node: n.ID, instance: n.Instance, state: engine.Pending}
		v.order = append(v.order, n.ID)
	}
	v.loop.Go(v.redraw)
	return v
}

func (v *liveView) Event(e engine.Event) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if e.Instance != "" && e.Node == "" {
		// What an instance event says, as the plain view words it, less
		// the "instance NAME: " the instances line already shows.
		if line, ok := strings.CutPrefix(describe(e), "instance "+e.Instance+": "); ok {
			if _, seen := v.insts[e.Instance]; !seen {
				v.iorder = append(v.iorder, e.Instance)
			}
			v.insts[e.Instance] = line
		}
	}
	row := v.rows[e.Node]
	switch e.Type {
	case engine.NodePlaced:
		row.instance = e.Instance
	case engine.NodeStarted:
		row.state, row.instance = engine.Running, e.Instance
		if row.start.IsZero() {
			row.start = e.Time
		}
	case engine.NodeLog, engine.NodeProgress, engine.NodeRetrying, engine.NodeSalvage:
		row.last = e.Message
	case engine.NodeEnded:
		row.state, row.end = e.State, e.Time
		if e.Message != "" {
			row.last = e.Message
		}
	case engine.InstanceFailed, engine.InstanceLeft, engine.InstanceReleased:
		v.notes = append(v.notes, escapeControls(describe(e)))
	default:
	}
}

func (v *liveView) redraw() {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			v.draw()
		case <-v.stop:
			v.draw()
			return
		}
	}
}

// showCosts has the view ask costs what the created instances have cost
// so far (at most every costEvery) and show its last answer.
func (v *liveView) showCosts(costs func() (pricing.RunCost, error)) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.costs = costs
}

// Close draws the final table and stops redrawing.
func (v *liveView) Close() {
	close(v.stop)
	v.loop.Wait()
}

func (v *liveView) draw() {
	v.mu.Lock()
	defer v.mu.Unlock()
	cols, rowsAvail := v.width()
	if cols < 40 {
		cols = 80
	}
	var out []string
	counts := map[engine.NodeState]int{}
	var active []*liveRow
	for _, id := range v.order {
		r := v.rows[id]
		counts[r.state]++
		active = append(active, r)
	}
	max := rowsAvail - 5 - len(v.notes)
	if max < 5 {
		max = 5
	}
	if len(active) > max {
		// Show what matters when everything doesn't fit: running and failed first.
		sort.SliceStable(active, func(i, j int) bool { return rank(active[i].state) < rank(active[j].state) })
		active = active[:max]
	}
	out = append(out, fmt.Sprintf("%-36s %-12s %-10s %7s  %s", "NODE", "INSTANCE", "STATE", "TIME", "LAST"))
	now := time.Now()
	for _, r := range active {
		el := ""
		if !r.start.IsZero() {
			end := r.end
			if end.IsZero() {
				end = now
			}
			el = elapsed(end.Sub(r.start))
		}
		line := fmt.Sprintf("%-36s %-12s %-10s %7s  %s", clipText(escapeControls(r.node), 36), clipText(escapeControls(r.instance), 12), r.state, el, escapeControls(r.last))
		out = append(out, clipText(line, cols-1))
	}
	var summary []string
	for _, st := range []engine.NodeState{engine.Running, engine.Pending, engine.Succeeded, engine.Failed, engine.Skipped, engine.Canceled, engine.TimedOut} {
		if counts[st] > 0 {
			summary = append(summary, fmt.Sprintf("%d %s", counts[st], st))
		}
	}
	out = append(out, fmt.Sprintf("%s elapsed — %s", elapsed(now.Sub(v.started)), strings.Join(summary, ", ")))
	if len(v.iorder) > 0 {
		var insts []string
		for _, name := range v.iorder {
			insts = append(insts, escapeControls(name+": "+v.insts[name]))
		}
		out = append(out, clipText("instances — "+strings.Join(insts, " · "), cols-1))
	}
	if v.costs != nil && now.Sub(v.costAsked) >= costEvery {
		v.costAsked = now
		if c, err := v.costs(); err == nil && len(c.Instances) > 0 {
			v.cost = &c
		}
	}
	if c := v.cost; c != nil {
		var parts []string
		for _, i := range c.Instances {
			part := fmt.Sprintf("%s up %s", i.Instance, seconds(i.UptimeSeconds))
			if i.Cost != nil {
				part += " " + platform.Dollars(*i.Cost)
			}
			parts = append(parts, part)
		}
		out = append(out, clipText(escapeControls(fmt.Sprintf("cost ~%s%s at list prices — %s", platform.Dollars(c.Total), c.UnpricedNote(), strings.Join(parts, " · "))), cols-1))
	}
	out = append(out, v.notes...)
	var b strings.Builder
	if v.lines > 0 {
		fmt.Fprintf(&b, "\x1b[%dA\x1b[J", v.lines)
	}
	for _, l := range out {
		b.WriteString(l + "\n")
	}
	v.lines = len(out)
	_, _ = io.WriteString(v.w, b.String())
}

func rank(state engine.NodeState) int {
	switch state {
	case engine.Running:
		return 0
	case engine.Failed, engine.TimedOut:
		return 1
	case engine.Pending:
		return 2
	default:
		return 3
	}
}

func clipText(s string, n int) string {
	r := []rune(strings.ReplaceAll(s, "\t", " "))
	if n <= 1 || len(r) <= n {
		return string(r)
	}
	return string(r[:n-1]) + "…"
}

// elapsed formats a duration for tables: 4s, 3m12s, 1h02m.
func elapsed(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// printCostLines prints, at the end of a run, what each created instance
// cost and its GPU-idle time, then the total.
func printCostLines(w io.Writer, c *pricing.RunCost) {
	if c == nil {
		return
	}
	for _, line := range costLines(c) {
		fmt.Fprintf(w, "taoflow: %s\n", line)
	}
}

// costLines says what each created instance cost (uptime × list price) and
// how long it was GPU-idle, then the total.
func costLines(c *pricing.RunCost) []string {
	var lines []string
	for _, i := range c.Instances {
		price, cost := "price unknown", "cost unknown"
		if i.PricePerHour != nil {
			price = platform.Dollars(*i.PricePerHour) + "/h"
			cost = platform.Dollars(*i.Cost)
		}
		still := ""
		if i.BilledUntil == nil {
			still = ", still billing"
		}
		lines = append(lines, fmt.Sprintf("instance %s (%s): up %s at %s = %s; GPU idle %s%s", i.Instance, orDash(i.Type),
			seconds(i.UptimeSeconds), price, cost, seconds(i.IdleSeconds), still))
	}
	return append(lines, fmt.Sprintf("cost ~%s%s at Brev list prices (an estimate); GPU idle %s in all", platform.Dollars(c.Total), c.UnpricedNote(), seconds(c.IdleSeconds)))
}

// seconds formats a number of seconds as a duration to the second.
func seconds(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(time.Second).String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// joined lists the errors an errors.Join holds (err itself when it holds no
// list; nil for nil).
func joined(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

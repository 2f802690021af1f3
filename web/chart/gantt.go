package chart

import (
	"slices"
	"strings"
	"time"
)

// Bar is one node's time on a row of a Gantt chart (a row is an instance,
// or one slot of it).
type Bar struct {
	Row   string
	Label string // the node
	Start time.Time
	End   time.Time
	// State picks its colour: succeeded, failed, timed-out, canceled,
	// running (others: grey).
	State string
}

// GanttOptions say how a Gantt chart looks.
type GanttOptions struct {
	Title string
	// MinIdle is the shortest gap between a row's bars shaded as idle
	// (default: a second).
	MinIdle time.Duration
	Width   int
}

// stateFill are the bar colours by node state.
var stateFill = map[string]string{
	"succeeded": "#59a14f", "failed": "#e15759", "timed-out": "#e15759",
	"canceled": "#bab0ac", "running": "#4e79a7", "skipped": "#dddddd",
}

// Gantt draws bars on one row each per Row value, in the order rows are
// first given, against a time axis: a bar per node (class "bar", its
// label and times in a <title>), and, between the bars of a row (from its
// first start to its last end), every gap of at least MinIdle shaded as
// idle (class "idle", hatched grey, its length in a <title>). A bar that
// ends before it starts is drawn as an instant.
func Gantt(bars []Bar, o GanttOptions) string {
	var rows []string
	for _, br := range bars {
		if !slices.Contains(rows, br.Row) {
			rows = append(rows, br.Row)
		}
	}
	minIdle := o.MinIdle
	if minIdle <= 0 {
		minIdle = time.Second
	}
	w := o.Width
	if w <= 0 {
		w = 720
	}
	const rowH, left, right, top = 26, 120, 16, 30
	h := top + max(len(rows), 1)*rowH + 36
	var t0, t1 time.Time
	for i, br := range bars {
		end := br.End
		if end.Before(br.Start) {
			end = br.Start
		}
		if i == 0 || br.Start.Before(t0) {
			t0 = br.Start
		}
		if i == 0 || end.After(t1) {
			t1 = end
		}
	}
	span := t1.Sub(t0).Seconds()
	if span <= 0 {
		span = 1
	}
	pw := float64(w - left - right)
	sx := func(t time.Time) float64 { return float64(left) + t.Sub(t0).Seconds()/span*pw }

	var b strings.Builder
	svgOpen(&b, "chart gantt", w, h, o.Title)
	b.WriteString(`<defs><pattern id="idle-hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">` +
		`<rect width="6" height="6" fill="#eeeeee"/><line x1="0" y1="0" x2="0" y2="6" stroke="#bbbbbb" stroke-width="2"/></pattern></defs>`)
	if o.Title != "" {
		b.WriteString(`<text class="title" x="` + num(float64(left)) + `" y="18" font-weight="bold">` + esc(clip(o.Title, 80)) + `</text>`)
	}
	// The time axis: ticks in seconds from the start, labelled as
	// durations.
	tv, _, _ := ticks(0, span, max(int(pw)/90, 2))
	axisY := float64(top + len(rows)*rowH)
	b.WriteString(`<g class="axes" stroke="#ccc">`)
	for _, v := range tv {
		if v > span+1e-9 {
			continue
		}
		x := num(float64(left) + v/span*pw)
		b.WriteString(`<line x1="` + x + `" y1="` + num(float64(top)) + `" x2="` + x + `" y2="` + num(axisY) + `"/>`)
	}
	b.WriteString(`</g><g class="ticks" fill="#333">`)
	for _, v := range tv {
		if v > span+1e-9 {
			continue
		}
		d := time.Duration(v * float64(time.Second)).Round(time.Second)
		b.WriteString(`<text x="` + num(float64(left)+v/span*pw) + `" y="` + num(axisY+16) + `" text-anchor="middle">` + esc(d.String()) + `</text>`)
	}
	b.WriteString(`</g>`)
	for i, row := range rows {
		y := float64(top + i*rowH)
		b.WriteString(`<text class="row" x="` + num(float64(left-6)) + `" y="` + num(y+rowH/2+4) + `" text-anchor="end">` + esc(clip(row, 18)) + `</text>`)
		var mine []Bar
		for _, br := range bars {
			if br.Row == row {
				if br.End.Before(br.Start) {
					br.End = br.Start
				}
				mine = append(mine, br)
			}
		}
		slices.SortStableFunc(mine, func(a, b Bar) int { return a.Start.Compare(b.Start) })
		// Idle: the gaps in the union of the row's bars.
		busyUntil := mine[0].End
		for _, br := range mine[1:] {
			if gap := br.Start.Sub(busyUntil); gap >= minIdle {
				b.WriteString(`<rect class="idle" x="` + num(sx(busyUntil)) + `" y="` + num(y+3) + `" width="` + num(sx(br.Start)-sx(busyUntil)) +
					`" height="` + num(rowH-6) + `" fill="url(#idle-hatch)"><title>` + esc(row+": idle "+gap.Round(time.Second).String()) + `</title></rect>`)
			}
			if br.End.After(busyUntil) {
				busyUntil = br.End
			}
		}
		for _, br := range mine {
			fill, ok := stateFill[br.State]
			if !ok {
				fill = "#9c9c9c"
			}
			x0, x1 := sx(br.Start), sx(br.End)
			tip := br.Label + " (" + br.State + ") " + br.Start.UTC().Format("15:04:05") + "–" + br.End.UTC().Format("15:04:05") +
				", " + br.End.Sub(br.Start).Round(time.Second).String()
			b.WriteString(`<rect class="bar" x="` + num(x0) + `" y="` + num(y+5) + `" width="` + num(max(x1-x0, 1)) + `" height="` + num(rowH-10) +
				`" fill="` + fill + `" fill-opacity="0.85" stroke="#fff"><title>` + esc(tip) + `</title></rect>`)
		}
	}
	if len(rows) == 0 {
		b.WriteString(`<text class="empty" x="` + num(float64(w)/2) + `" y="` + num(float64(top+rowH/2)) + `" text-anchor="middle" fill="#777">no data</text>`)
	}
	b.WriteString(`</svg>`)
	return b.String()
}

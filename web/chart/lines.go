package chart

import (
	"math"
	"slices"
	"strings"
)

// Line is one curve of a Lines chart: a cell's series of one metric.
type Line struct {
	// Name is the legend's text for it (a cell id).
	Name string
	// Matrix are its cell's matrix values, for LinesOptions.ColorBy and
	// DashBy.
	Matrix map[string]string
	// X and Y are its points, in order (X usually the epoch); a point
	// whose X or Y is NaN or infinite is left out.
	X, Y []float64
}

// LinesOptions say how a Lines chart looks. The zero value draws a
// 640 × 360 chart, each line in its own colour, all solid.
type LinesOptions struct {
	Title, XLabel, YLabel string
	// ColorBy is the matrix key whose value picks a line's colour (lines
	// with the same value share one); "" gives each line its own.
	ColorBy string
	// DashBy is the matrix key whose value picks a line's dash style; ""
	// draws every line solid.
	DashBy        string
	Width, Height int
}

// maxDrawn bounds the points drawn of one line: beyond, evenly spaced
// points are drawn (the first and last always), as many as the plot has
// pixels twice over.
func maxDrawn(plotWidth int) int { return max(2*plotWidth, 2) }

// Lines draws lines as an SVG chart: axes with nice ticks, a path per
// line (class "line", its name in a <title>), and a legend of the
// colours (by ColorBy's values, or by line) and dash styles (by DashBy's
// values). With no drawable point it draws the axes and "no data".
func Lines(lines []Line, o LinesOptions) string {
	w, h := o.Width, o.Height
	if w <= 0 {
		w = 640
	}
	if h <= 0 {
		h = 360
	}
	// Legend entries: colour keys, then dash keys.
	colorKey := func(i int, l Line) string {
		if o.ColorBy == "" {
			return l.Name
		}
		return o.ColorBy + "=" + l.Matrix[o.ColorBy]
	}
	dashKey := func(l Line) string {
		if o.DashBy == "" {
			return ""
		}
		return o.DashBy + "=" + l.Matrix[o.DashBy]
	}
	var colors, dashKeys []string
	for i, l := range lines {
		if k := colorKey(i, l); !slices.Contains(colors, k) {
			colors = append(colors, k)
		}
		if k := dashKey(l); k != "" && !slices.Contains(dashKeys, k) {
			dashKeys = append(dashKeys, k)
		}
	}
	const legendW = 150
	left, right, top, bottom := 60, 16+legendW, 28, 44
	pw, ph := w-left-right, h-top-bottom
	if pw < 40 || ph < 40 {
		left, right, top, bottom = 40, 8, 20, 30
		pw, ph = max(w-left-right, 10), max(h-top-bottom, 10)
	}

	// Ranges.
	first := true
	var xlo, xhi, ylo, yhi float64
	for _, l := range lines {
		for i := range min(len(l.X), len(l.Y)) {
			x, y := l.X[i], l.Y[i]
			if !finite(x) || !finite(y) {
				continue
			}
			if first {
				xlo, xhi, ylo, yhi, first = x, x, y, y, false
				continue
			}
			xlo, xhi, ylo, yhi = min(xlo, x), max(xhi, x), min(ylo, y), max(yhi, y)
		}
	}
	var b strings.Builder
	svgOpen(&b, "chart lines", w, h, o.Title)
	if o.Title != "" {
		b.WriteString(`<text class="title" x="` + num(float64(left)) + `" y="18" font-weight="bold">` + esc(clip(o.Title, 80)) + `</text>`)
	}
	if first {
		xlo, xhi, ylo, yhi = 0, 1, 0, 1
	}
	xt, x0, x1 := ticks(xlo, xhi, max(pw/80, 2))
	yt, y0, y1 := ticks(ylo, yhi, max(ph/50, 2))
	sx := func(x float64) float64 { return float64(left) + (x-x0)/(x1-x0)*float64(pw) }
	sy := func(y float64) float64 { return float64(top+ph) - (y-y0)/(y1-y0)*float64(ph) }
	axes(&b, left, top, pw, ph, xt, yt, sx, sy, o.XLabel, o.YLabel)
	if first {
		b.WriteString(`<text class="empty" x="` + num(float64(left+pw/2)) + `" y="` + num(float64(top+ph/2)) + `" text-anchor="middle" fill="#777">no data</text>`)
	}

	// Curves.
	for i, l := range lines {
		color := palette[slices.Index(colors, colorKey(i, l))%len(palette)]
		dash := ""
		if k := dashKey(l); k != "" {
			dash = dashes[slices.Index(dashKeys, k)%len(dashes)]
		}
		var d strings.Builder
		cmd := "M"
		for _, j := range drawn(min(len(l.X), len(l.Y)), maxDrawn(pw)) {
			x, y := l.X[j], l.Y[j]
			if !finite(x) || !finite(y) {
				cmd = "M" // a gap
				continue
			}
			d.WriteString(cmd + num(sx(x)) + " " + num(sy(y)))
			cmd = "L"
		}
		if d.Len() == 0 {
			continue
		}
		b.WriteString(`<path class="line" d="` + d.String() + `" fill="none" stroke="` + color + `" stroke-width="1.5"`)
		if dash != "" {
			b.WriteString(` stroke-dasharray="` + dash + `"`)
		}
		b.WriteString(`><title>` + esc(l.Name) + `</title></path>`)
	}

	// Legend.
	lx, ly := float64(w-right+12), float64(top+4)
	if right >= legendW {
		for i, k := range colors {
			y := ly + float64(i)*16
			if y > float64(h-10) {
				break
			}
			b.WriteString(`<g class="legend"><line x1="` + num(lx) + `" y1="` + num(y) + `" x2="` + num(lx+18) + `" y2="` + num(y) +
				`" stroke="` + palette[i%len(palette)] + `" stroke-width="3"/><text x="` + num(lx+24) + `" y="` + num(y+4) + `">` + esc(clip(k, 20)) + `</text></g>`)
		}
		ly += float64(len(colors))*16 + 8
		for i, k := range dashKeys {
			y := ly + float64(i)*16
			if y > float64(h-10) {
				break
			}
			b.WriteString(`<g class="legend"><line x1="` + num(lx) + `" y1="` + num(y) + `" x2="` + num(lx+18) + `" y2="` + num(y) +
				`" stroke="#333" stroke-width="1.5"`)
			if d := dashes[i%len(dashes)]; d != "" {
				b.WriteString(` stroke-dasharray="` + d + `"`)
			}
			b.WriteString(`/><text x="` + num(lx+24) + `" y="` + num(y+4) + `">` + esc(clip(k, 20)) + `</text></g>`)
		}
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// drawn are the indexes of the points drawn of n: all when n <= most,
// else most evenly spaced ones, the first and last among them.
func drawn(n, most int) []int {
	out := make([]int, 0, min(n, most))
	if n <= most {
		for i := range n {
			out = append(out, i)
		}
		return out
	}
	for i := range most {
		j := int(math.Round(float64(i) * float64(n-1) / float64(most-1)))
		if len(out) == 0 || out[len(out)-1] != j {
			out = append(out, j)
		}
	}
	return out
}

// axes draws the plot's frame, grid lines and tick labels, and the axis
// labels.
func axes(b *strings.Builder, left, top, pw, ph int, xt, yt []float64, sx, sy func(float64) float64, xlabel, ylabel string) {
	l, t, r, btm := float64(left), float64(top), float64(left+pw), float64(top+ph)
	b.WriteString(`<g class="axes" stroke="#ccc" stroke-width="1">`)
	for _, v := range yt {
		y := num(sy(v))
		b.WriteString(`<line x1="` + num(l) + `" y1="` + y + `" x2="` + num(r) + `" y2="` + y + `"/>`)
	}
	for _, v := range xt {
		x := num(sx(v))
		b.WriteString(`<line x1="` + x + `" y1="` + num(t) + `" x2="` + x + `" y2="` + num(btm) + `"/>`)
	}
	b.WriteString(`<rect x="` + num(l) + `" y="` + num(t) + `" width="` + num(r-l) + `" height="` + num(btm-t) + `" fill="none" stroke="#888"/></g>`)
	b.WriteString(`<g class="ticks" fill="#333">`)
	for _, v := range yt {
		b.WriteString(`<text x="` + num(l-4) + `" y="` + num(sy(v)+4) + `" text-anchor="end">` + esc(label(v)) + `</text>`)
	}
	for _, v := range xt {
		b.WriteString(`<text x="` + num(sx(v)) + `" y="` + num(btm+16) + `" text-anchor="middle">` + esc(label(v)) + `</text>`)
	}
	b.WriteString(`</g>`)
	if xlabel != "" {
		b.WriteString(`<text class="xlabel" x="` + num((l+r)/2) + `" y="` + num(btm+34) + `" text-anchor="middle">` + esc(clip(xlabel, 60)) + `</text>`)
	}
	if ylabel != "" {
		b.WriteString(`<text class="ylabel" transform="translate(14 ` + num((t+btm)/2) + `) rotate(-90)" text-anchor="middle">` + esc(clip(ylabel, 40)) + `</text>`)
	}
}

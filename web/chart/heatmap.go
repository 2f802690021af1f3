package chart

import (
	"math"
	"slices"
	"strconv"
	"strings"
)

// Cell is one square of a HeatMap: the final metric of the cell whose
// matrix values for the map's two keys are X and Y.
type Cell struct {
	X, Y  string
	Value float64
}

// HeatMapOptions say how a HeatMap looks.
type HeatMapOptions struct {
	Title string
	// XKey and YKey are the matrix keys along the axes (their names are
	// the axis labels); Metric names the value.
	XKey, YKey, Metric string
	// LowerIsBetter colours the lowest value best (dark), as for a loss;
	// otherwise the highest is.
	LowerIsBetter bool
	Width, Height int
}

// HeatMap draws cells as a grid of squares (class "cell", its value as
// text in it and in a <title>), X values along the bottom and Y values
// up the side, each in numeric order when all are numbers and else in
// the order first given. A square without a cell is left empty; two
// cells on one square: the later wins. A NaN or infinite value is drawn
// as an empty square.
func HeatMap(cells []Cell, o HeatMapOptions) string {
	var xs, ys []string
	for _, c := range cells {
		if !slices.Contains(xs, c.X) {
			xs = append(xs, c.X)
		}
		if !slices.Contains(ys, c.Y) {
			ys = append(ys, c.Y)
		}
	}
	sortValues(xs)
	sortValues(ys)
	at := map[[2]string]float64{}
	lo, hi, seen := 0.0, 0.0, false
	for _, c := range cells {
		if !finite(c.Value) {
			delete(at, [2]string{c.X, c.Y})
			continue
		}
		at[[2]string{c.X, c.Y}] = c.Value
	}
	for _, v := range at {
		if !seen {
			lo, hi, seen = v, v, true
		}
		lo, hi = min(lo, v), max(hi, v)
	}
	w, h := o.Width, o.Height
	if w <= 0 {
		w = 480
	}
	if h <= 0 {
		h = 360
	}
	left, top, right, bottom := 80, 30, 12, 44
	nx, ny := max(len(xs), 1), max(len(ys), 1)
	cw, ch := float64(w-left-right)/float64(nx), float64(h-top-bottom)/float64(ny)
	var b strings.Builder
	svgOpen(&b, "chart heatmap", w, h, o.Title)
	if o.Title != "" {
		b.WriteString(`<text class="title" x="` + num(float64(left)) + `" y="18" font-weight="bold">` + esc(clip(o.Title, 80)) + `</text>`)
	}
	for j, y := range ys {
		// The first Y value at the bottom, as on a plot.
		ry := float64(top) + float64(ny-1-j)*ch
		b.WriteString(`<text class="ylabel" x="` + num(float64(left-6)) + `" y="` + num(ry+ch/2+4) + `" text-anchor="end">` + esc(clip(y, 12)) + `</text>`)
		for i, x := range xs {
			rx := float64(left) + float64(i)*cw
			v, ok := at[[2]string{x, y}]
			tip := o.XKey + "=" + x + " " + o.YKey + "=" + y
			if !ok {
				b.WriteString(`<rect class="cell empty" x="` + num(rx) + `" y="` + num(ry) + `" width="` + num(cw) + `" height="` + num(ch) +
					`" fill="#f4f4f4" stroke="#fff"><title>` + esc(tip+": no value") + `</title></rect>`)
				continue
			}
			t := 0.5
			if hi > lo {
				t = (v - lo) / (hi - lo)
			}
			if o.LowerIsBetter {
				t = 1 - t
			}
			fill, ink := shade(t)
			b.WriteString(`<rect class="cell" x="` + num(rx) + `" y="` + num(ry) + `" width="` + num(cw) + `" height="` + num(ch) +
				`" fill="` + fill + `" stroke="#fff"><title>` + esc(tip+": "+o.Metric+" "+strconv.FormatFloat(v, 'g', -1, 64)) + `</title></rect>`)
			b.WriteString(`<text class="value" x="` + num(rx+cw/2) + `" y="` + num(ry+ch/2+4) + `" text-anchor="middle" fill="` + ink + `">` + esc(label(v)) + `</text>`)
		}
	}
	for i, x := range xs {
		b.WriteString(`<text class="xlabel" x="` + num(float64(left)+float64(i)*cw+cw/2) + `" y="` + num(float64(h-bottom+16)) + `" text-anchor="middle">` + esc(clip(x, 12)) + `</text>`)
	}
	b.WriteString(`<text class="xkey" x="` + num(float64(left)+float64(w-left-right)/2) + `" y="` + num(float64(h-8)) + `" text-anchor="middle" font-weight="bold">` + esc(clip(o.XKey, 30)) + `</text>`)
	b.WriteString(`<text class="ykey" transform="translate(14 ` + num(float64(top)+float64(h-top-bottom)/2) + `) rotate(-90)" text-anchor="middle" font-weight="bold">` + esc(clip(o.YKey, 30)) + `</text>`)
	if len(at) == 0 {
		b.WriteString(`<text class="empty" x="` + num(float64(w)/2) + `" y="` + num(float64(h)/2) + `" text-anchor="middle" fill="#777">no data</text>`)
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// sortValues orders matrix values numerically when every one is a
// number; otherwise it leaves them as given.
func sortValues(vs []string) {
	nums := make(map[string]float64, len(vs))
	for _, v := range vs {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsNaN(f) {
			return
		}
		nums[v] = f
	}
	slices.SortStableFunc(vs, func(a, b string) int {
		switch {
		case nums[a] < nums[b]:
			return -1
		case nums[a] > nums[b]:
			return 1
		}
		return 0
	})
}

// shade is the fill for t in 0 (worst, pale) .. 1 (best, dark blue) and
// the text colour legible on it.
func shade(t float64) (fill, ink string) {
	t = min(max(t, 0), 1)
	mix := func(a, b float64) int { return int(math.Round(a + (b-a)*t)) }
	r, g, bl := mix(0xf1, 0x08), mix(0xee, 0x30), mix(0xf6, 0x6b)
	fill = "#" + hex2(r) + hex2(g) + hex2(bl)
	if t > 0.55 {
		return fill, "#fff"
	}
	return fill, "#111"
}

func hex2(v int) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[v>>4&15], digits[v&15]})
}

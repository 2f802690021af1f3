package chart

import (
	"strconv"
	"strings"
)

// Sparkline draws ys in order as a small inline SVG of w × h (default
// 100 × 20): one polyline (class "spark"), scaled between the least and
// greatest value, a flat series at mid height, with at most 2w points
// (evenly spaced, the first and last among them); NaN and infinite values
// are left out. title is its tooltip (e.g. "loss 0.52 → 0.11"). No
// drawable value gives an empty SVG of the same size.
func Sparkline(ys []float64, w, h int, title string) string {
	if w <= 0 {
		w = 100
	}
	if h <= 0 {
		h = 20
	}
	var vals []float64
	for _, v := range ys {
		if finite(v) {
			vals = append(vals, v)
		}
	}
	var b strings.Builder
	b.WriteString(`<svg xmlns="http://www.w3.org/2000/svg" class="sparkline" viewBox="0 0 ` + strconv.Itoa(w) + ` ` + strconv.Itoa(h) +
		`" width="` + strconv.Itoa(w) + `" height="` + strconv.Itoa(h) + `" role="img"><title>` + esc(title) + `</title>`)
	if len(vals) > 0 {
		lo, hi := vals[0], vals[0]
		for _, v := range vals {
			lo, hi = min(lo, v), max(hi, v)
		}
		idx := drawn(len(vals), 2*w)
		var pts strings.Builder
		for k, i := range idx {
			x := float64(w-2)/2 + 1
			if len(idx) > 1 {
				x = 1 + float64(k)*float64(w-2)/float64(len(idx)-1)
			}
			y := float64(h) / 2
			if hi > lo {
				y = float64(h-2) - (vals[i]-lo)/(hi-lo)*float64(h-4)
			}
			if k > 0 {
				pts.WriteByte(' ')
			}
			pts.WriteString(num(x) + "," + num(y))
		}
		b.WriteString(`<polyline class="spark" points="` + pts.String() + `" fill="none" stroke="#4e79a7" stroke-width="1.5"/>`)
	}
	b.WriteString(`</svg>`)
	return b.String()
}

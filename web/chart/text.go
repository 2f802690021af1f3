package chart

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// esc makes s safe as SVG element text or a double-quoted attribute
// value: control characters (C0 but tab, DEL, C1), invalid UTF-8 and the
// non-characters XML forbids become U+FFFD, and & < > " ' are escaped.
func esc(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		switch {
		case r == utf8.RuneError && n <= 1,
			r < 0x20 && r != '\t', r >= 0x7f && r <= 0x9f,
			r == 0xfffe || r == 0xffff, r >= 0xd800 && r <= 0xdfff:
			b.WriteRune('\uFFFD')
		case r == '&':
			b.WriteString("&amp;")
		case r == '<':
			b.WriteString("&lt;")
		case r == '>':
			b.WriteString("&gt;")
		case r == '"':
			b.WriteString("&#34;")
		case r == '\'':
			b.WriteString("&#39;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// clip cuts s to at most n runes, with "…" when it cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// num formats a coordinate: at most two decimals, no trailing zeros.
func num(v float64) string {
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
}

// label formats a value for people: four significant digits.
func label(v float64) string {
	if v == 0 {
		return "0"
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// finite reports whether v is a number that can be drawn.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// palette are the series colours (Tableau 10): distinct for the colour
// blind in the common cases and legible on white.
var palette = []string{
	"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
	"#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
}

// dashes are the dash styles ("": solid).
var dashes = []string{"", "6 3", "2 3", "8 3 2 3", "1 2", "10 4"}

// ticks returns about n "nice" values (1, 2 or 5 times a power of ten
// apart) covering lo..hi, and the range they span.
func ticks(lo, hi float64, n int) (vals []float64, from, to float64) {
	if !finite(lo) || !finite(hi) {
		return []float64{0, 1}, 0, 1
	}
	if hi < lo {
		lo, hi = hi, lo
	}
	if hi == lo {
		d := math.Abs(lo) / 10
		if d == 0 {
			d = 1
		}
		lo, hi = lo-d, hi+d
	}
	step := niceStep((hi - lo) / float64(max(n-1, 1)))
	from, to = math.Floor(lo/step)*step, math.Ceil(hi/step)*step
	if !finite(from) || !finite(to) || (to-from)/step > 1000 {
		return []float64{lo, hi}, lo, hi
	}
	for v := from; v <= to+step/2; v += step {
		// Round away the float drift of the sum (0.30000000000000004).
		vals = append(vals, math.Round(v/step)*step)
	}
	return vals, from, to
}

// niceStep is the 1, 2 or 5 × 10^k nearest raw (Heckbert's "nice
// numbers").
func niceStep(raw float64) float64 {
	if raw <= 0 || !finite(raw) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	switch f := raw / p; {
	case f < 1.5:
		return p
	case f < 3:
		return 2 * p
	case f < 7:
		return 5 * p
	}
	return 10 * p
}

// svgOpen starts an SVG of w × h user units that scales to its container,
// with a title for screen readers and tooltips.
func svgOpen(b *strings.Builder, class string, w, h int, title string) {
	b.WriteString(`<svg xmlns="http://www.w3.org/2000/svg" class="` + esc(class) + `" viewBox="0 0 ` + strconv.Itoa(w) + ` ` + strconv.Itoa(h) +
		`" width="100%" preserveAspectRatio="xMidYMid meet" role="img" font-family="sans-serif" font-size="12">`)
	b.WriteString(`<title>` + esc(title) + `</title>`)
}

package main

import (
	"math"
	"strings"
)

// sparkWidth is how many characters a results table's sparkline takes.
const sparkWidth = 16

// Sparkline glyphs, lowest to highest: block characters where the
// terminal's locale is UTF-8, ASCII elsewhere.
const (
	sparkBlocks = "▁▂▃▄▅▆▇█"
	sparkASCII  = "_.,-=+*#"
)

// sparkGlyphs picks the sparkline's glyphs from the locale, as the C
// library does: the first of LC_ALL, LC_CTYPE and LANG that is set names
// the character set ("en_US.UTF-8", "C.utf8"); TERM=dumb gets ASCII.
func sparkGlyphs(getenv func(string) string) []rune {
	if getenv("TERM") == "dumb" {
		return []rune(sparkASCII)
	}
	for _, k := range []string{"LC_ALL", "LC_CTYPE", "LANG"} {
		if v := getenv(k); v != "" {
			v = strings.ToLower(v)
			if strings.Contains(v, "utf-8") || strings.Contains(v, "utf8") {
				return []rune(sparkBlocks)
			}
			break
		}
	}
	return []rune(sparkASCII)
}

// sparkline draws ys (in order) in at most width glyphs: evenly spaced
// samples (the first and the last always), each scaled between the
// samples' least and greatest value; a flat series is drawn at mid
// height. No values give "".
func sparkline(ys []float64, width int, glyphs []rune) string {
	if len(ys) == 0 || width <= 0 || len(glyphs) == 0 {
		return ""
	}
	n := min(len(ys), width)
	samples := make([]float64, n)
	for i := range samples {
		j := 0
		if n > 1 {
			j = int(math.Round(float64(i) * float64(len(ys)-1) / float64(n-1)))
		}
		samples[i] = ys[j]
	}
	lo, hi := samples[0], samples[0]
	for _, v := range samples {
		lo, hi = min(lo, v), max(hi, v)
	}
	top := len(glyphs) - 1
	var b strings.Builder
	for _, v := range samples {
		level := top / 2
		if hi > lo {
			level = int(math.Round((v - lo) / (hi - lo) * float64(top)))
		}
		b.WriteRune(glyphs[level])
	}
	return b.String()
}

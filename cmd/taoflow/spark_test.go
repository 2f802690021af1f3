package main

import (
	"testing"
	"unicode/utf8"
)

func TestSparkline(t *testing.T) {
	blocks := []rune(sparkBlocks)
	tests := map[string]struct {
		ys   []float64
		want string
	}{
		"falling":            {[]float64{3, 2, 1}, "█▅▁"},
		"flat at mid height": {[]float64{2, 2, 2, 2}, "▄▄▄▄"},
		"one value":          {[]float64{7}, "▄"},
		"none":               {nil, ""},
		"negative and big":   {[]float64{-1e300, 1e300}, "▁█"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := sparkline(tt.ys, 16, blocks); got != tt.want {
				t.Errorf("sparkline(%v) = %q, want %q", tt.ys, got, tt.want)
			}
		})
	}
	// Many values: width glyphs, the first and last values drawn.
	ys := make([]float64, 1000)
	for i := range ys {
		ys[i] = float64(i % 7)
	}
	ys[0], ys[999] = -5, 100
	got := []rune(sparkline(ys, 16, blocks))
	if len(got) != 16 || got[0] != '▁' || got[15] != '█' {
		t.Errorf("sparkline of 1000 values = %q, want 16 glyphs from ▁ to █", string(got))
	}
}

func TestSparkGlyphs(t *testing.T) {
	tests := map[string]struct {
		env  map[string]string
		utf8 bool
	}{
		"LANG UTF-8":                {map[string]string{"LANG": "en_US.UTF-8"}, true},
		"C.utf8":                    {map[string]string{"LC_CTYPE": "C.utf8"}, true},
		"LC_ALL wins":               {map[string]string{"LC_ALL": "C", "LANG": "en_US.UTF-8"}, false},
		"nothing set":               {map[string]string{}, false},
		"POSIX":                     {map[string]string{"LANG": "POSIX"}, false},
		"dumb terminal":             {map[string]string{"LANG": "en_US.UTF-8", "TERM": "dumb"}, false},
		"xterm with a UTF-8 LC_ALL": {map[string]string{"LC_ALL": "de_DE.UTF-8", "TERM": "xterm-256color"}, true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := sparkGlyphs(func(k string) string { return tt.env[k] })
			if multi := utf8.RuneLen(g[0]) > 1; multi != tt.utf8 {
				t.Errorf("glyphs %q for %v: want UTF-8 blocks %v", string(g), tt.env, tt.utf8)
			}
		})
	}
}

package chart

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// doc is an SVG as parsed back: its elements by name and class, every
// text and attribute value, and the elements themselves.
type doc struct {
	count map[string]int // "path.line", "rect.cell", "svg", …
	texts []string       // character data
	attrs []string       // attribute values
	elems []elem
}

type elem struct {
	name  string
	attrs map[string]string
	text  string // the character data directly inside
}

// parse reads an SVG strictly as XML, failing the test when it is not
// well-formed (an unescaped <, &, a control character) or holds a
// script, a style, an event handler or a link out.
func parse(t *testing.T, svg string) doc {
	t.Helper()
	d := doc{count: map[string]int{}}
	dec := xml.NewDecoder(strings.NewReader(svg))
	dec.Strict = true
	var stack []int
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, svg)
		}
		switch x := tok.(type) {
		case xml.StartElement:
			e := elem{name: x.Name.Local, attrs: map[string]string{}}
			for _, a := range x.Attr {
				e.attrs[a.Name.Local] = a.Value
				d.attrs = append(d.attrs, a.Value)
				if strings.HasPrefix(strings.ToLower(a.Name.Local), "on") || a.Name.Local == "style" || a.Name.Local == "href" {
					t.Errorf("attribute %s=%q", a.Name.Local, a.Value)
				}
			}
			if e.name == "script" || e.name == "style" || e.name == "foreignObject" {
				t.Errorf("element <%s>", e.name)
			}
			key := e.name
			if c := e.attrs["class"]; c != "" {
				key += "." + strings.Fields(c)[len(strings.Fields(c))-1]
			}
			d.count[key]++
			d.elems = append(d.elems, e)
			stack = append(stack, len(d.elems)-1)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			d.texts = append(d.texts, string(x))
			if len(stack) > 0 {
				d.elems[stack[len(stack)-1]].text += string(x)
			}
		}
	}
	if len(d.elems) == 0 || d.elems[0].name != "svg" {
		t.Fatalf("no <svg>:\n%s", svg)
	}
	return d
}

// hostile is a name no chart may pass on raw.
const hostile = "lr=<script>alert(\"x\")</script>&'\x1b[31m\x00\u009b\xff"

// safe checks that no text or attribute of d holds a control character
// or a raw markup character from hostile, and that hostile's visible
// part reads back (escaped, then unescaped by the parser).
func safe(t *testing.T, svg string, d doc) {
	t.Helper()
	if strings.Contains(svg, "<script") || strings.Contains(svg, "\x1b") || strings.Contains(svg, "\x00") {
		t.Errorf("raw hostile text in the SVG:\n%s", svg)
	}
	found := false
	for _, s := range append(d.texts, d.attrs...) {
		for _, r := range s {
			if r < 0x20 && r != '\t' || r >= 0x7f && r <= 0x9f {
				t.Errorf("control character %U in %q", r, s)
			}
		}
		if strings.Contains(s, `lr=<script>alert("x")</script>&'`) || strings.Contains(s, `lr=<script>alert("x…`) || strings.Contains(s, "lr=<script") {
			found = true
		}
	}
	if !found {
		t.Errorf("the hostile name does not read back from the SVG:\n%s", svg)
	}
}

func TestLines(t *testing.T) {
	var lines []Line
	for i, lr := range []string{"0.1", "0.01"} {
		for _, bs := range []string{"8", "16"} {
			l := Line{Name: "lr-" + lr + "-bs-" + bs, Matrix: map[string]string{"lr": lr, "bs": bs}}
			for e := 1; e <= 10; e++ {
				l.X = append(l.X, float64(e))
				l.Y = append(l.Y, float64(i+1)/float64(e))
			}
			lines = append(lines, l)
		}
	}
	svg := Lines(lines, LinesOptions{Title: "loss", XLabel: "epoch", YLabel: "loss", ColorBy: "lr", DashBy: "bs"})
	d := parse(t, svg)
	if d.count["path.line"] != 4 {
		t.Errorf("%d curves, want 4", d.count["path.line"])
	}
	// Two colours (by lr) and two dash styles (by bs) in the legend.
	if d.count["g.legend"] != 4 {
		t.Errorf("%d legend entries, want 2 colours + 2 dashes", d.count["g.legend"])
	}
	strokes, dashed := map[string]int{}, 0
	for _, e := range d.elems {
		if e.attrs["class"] == "line" {
			strokes[e.attrs["stroke"]]++
			if e.attrs["stroke-dasharray"] != "" {
				dashed++
			}
			if n := strings.Count(e.attrs["d"], "L") + 1; n != 10 {
				t.Errorf("curve %q has %d points, want 10", e.text, n)
			}
		}
	}
	if len(strokes) != 2 || dashed != 2 {
		t.Errorf("strokes %v, %d dashed: want 2 colours of 2 curves each, 2 dashed", strokes, dashed)
	}
	// Nice ticks on y: 0 .. 2 in steps of 0.2 or 0.5.
	var yticks []string
	for _, e := range d.elems {
		if e.name == "text" && e.attrs["text-anchor"] == "end" {
			yticks = append(yticks, e.text)
		}
	}
	for _, tk := range yticks {
		v, err := strconv.ParseFloat(tk, 64)
		if err != nil || math.Abs(v*10-math.Round(v*10)) > 1e-9 {
			t.Errorf("y tick %q is not a nice number (ticks %q)", tk, yticks)
		}
	}
	if len(yticks) < 3 || yticks[0] != "0" {
		t.Errorf("y ticks %q: want at least 3 from 0", yticks)
	}
}

func TestLinesManyPointsGapsAndEmpty(t *testing.T) {
	l := Line{Name: "big"}
	for i := range 100_000 {
		l.X = append(l.X, float64(i))
		l.Y = append(l.Y, math.Sin(float64(i)/1000))
	}
	l.Y[500] = math.NaN()
	svg := Lines([]Line{l, {Name: "none", X: []float64{math.Inf(1)}, Y: []float64{1}}}, LinesOptions{Width: 400, Height: 200})
	d := parse(t, svg)
	if d.count["path.line"] != 1 {
		t.Errorf("%d curves, want the one with points", d.count["path.line"])
	}
	for _, e := range d.elems {
		if e.attrs["class"] == "line" {
			if n := strings.Count(e.attrs["d"], "L") + strings.Count(e.attrs["d"], "M"); n > 2*400 || n < 100 {
				t.Errorf("%d points drawn of 100k on a 400 wide chart", n)
			}
		}
	}
	d = parse(t, Lines(nil, LinesOptions{}))
	if d.count["text.empty"] != 1 || d.count["path.line"] != 0 {
		t.Errorf("an empty chart: %v", d.count)
	}
}

func TestLinesHostile(t *testing.T) {
	l := Line{Name: hostile, Matrix: map[string]string{"k": hostile}, X: []float64{1, 2}, Y: []float64{1, 2}}
	svg := Lines([]Line{l}, LinesOptions{Title: hostile, XLabel: hostile, YLabel: hostile, ColorBy: "k", DashBy: "k"})
	safe(t, svg, parse(t, svg))
}

func TestHeatMap(t *testing.T) {
	var cells []Cell
	for _, lr := range []string{"0.1", "0.01", "0.001"} {
		for _, bs := range []string{"16", "8"} {
			v, _ := strconv.ParseFloat(lr, 64)
			cells = append(cells, Cell{X: lr, Y: bs, Value: v * 10})
		}
	}
	cells = cells[:5] // one square without a cell
	svg := HeatMap(cells, HeatMapOptions{Title: "final loss", XKey: "lr", YKey: "bs", Metric: "loss", LowerIsBetter: true})
	d := parse(t, svg)
	if d.count["rect.cell"] != 5 || d.count["rect.empty"] != 1 || d.count["text.value"] != 5 {
		t.Errorf("squares %v, want 5 with values and 1 empty", d.count)
	}
	var xs, ys []string
	fills := map[string]string{}
	for i, e := range d.elems {
		switch e.attrs["class"] {
		case "xlabel":
			xs = append(xs, e.text)
		case "ylabel":
			ys = append(ys, e.text)
		case "cell":
			fills[d.elems[i+1].text] = e.attrs["fill"] // the title
		}
	}
	// Numeric order, the first Y at the bottom (drawn last… but listed
	// first).
	if diff := cmp.Diff([]string{"0.001", "0.01", "0.1"}, xs); diff != "" {
		t.Errorf("x labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"8", "16"}, ys); diff != "" {
		t.Errorf("y labels (-want +got):\n%s", diff)
	}
	// Lower is better: the lowest loss is the darkest.
	best, worst := fills["lr=0.001 bs=16: loss 0.01"], fills["lr=0.1 bs=16: loss 1"]
	if best == "" || worst == "" || best >= worst {
		t.Errorf("fill of the best %q, of the worst %q: want the best darker", best, worst)
	}
	svg = HeatMap([]Cell{{X: hostile, Y: hostile, Value: 1}, {X: "a", Y: "b", Value: math.NaN()}}, HeatMapOptions{Title: hostile, XKey: hostile, YKey: hostile, Metric: hostile})
	d = parse(t, svg)
	safe(t, svg, d)
	if d.count["rect.cell"] != 1 {
		t.Errorf("a NaN cell drawn: %v", d.count)
	}
}

func TestGantt(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	bars := []Bar{
		{Row: "gpu-a/0", Label: "pull@gpu-a", Start: at(0), End: at(30), State: "succeeded"},
		{Row: "gpu-a/0", Label: "train[lr=1]", Start: at(90), End: at(300), State: "succeeded"},
		{Row: "gpu-a/0", Label: "eval[lr=1]", Start: at(300), End: at(320), State: "failed"}, // no gap
		{Row: "gpu-a/1", Label: "train[lr=2]", Start: at(40), End: at(200), State: "running"},
		{Row: "gpu-a/1", Label: "overlap", Start: at(100), End: at(150), State: "succeeded"},
		{Row: "gpu-a/1", Label: "late", Start: at(200), End: at(200).Add(500 * time.Millisecond), State: "x"}, // gap < MinIdle
		{Row: "gpu-b", Label: "backwards", Start: at(10), End: at(5), State: "canceled"},
	}
	svg := Gantt(bars, GanttOptions{Title: "timeline"})
	d := parse(t, svg)
	if d.count["rect.bar"] != len(bars) || d.count["text.row"] != 3 {
		t.Errorf("elements %v: want %d bars on 3 rows", d.count, len(bars))
	}
	var idle []string
	for i, e := range d.elems {
		if e.attrs["class"] == "idle" {
			idle = append(idle, d.elems[i+1].text)
		}
	}
	if diff := cmp.Diff([]string{"gpu-a/0: idle 1m0s"}, idle); diff != "" {
		t.Errorf("idle gaps (-want +got):\n%s", diff)
	}
	svg = Gantt([]Bar{{Row: hostile, Label: hostile, Start: at(0), End: at(1), State: hostile}}, GanttOptions{Title: hostile})
	safe(t, svg, parse(t, svg))
	if d := parse(t, Gantt(nil, GanttOptions{})); d.count["text.empty"] != 1 {
		t.Errorf("an empty Gantt: %v", d.count)
	}
}

func TestSparkline(t *testing.T) {
	tests := map[string]struct {
		ys   []float64
		want int // points drawn
	}{
		"some":           {[]float64{3, 2, 1.5, 1}, 4},
		"flat":           {[]float64{1, 1}, 2},
		"nan left out":   {[]float64{1, math.NaN(), math.Inf(-1), 2}, 2},
		"many":           {make([]float64, 10_000), 200},
		"none":           {nil, 0},
		"only nan":       {[]float64{math.NaN()}, 0},
		"one value only": {[]float64{5}, 1},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			svg := Sparkline(tt.ys, 100, 20, hostile)
			d := parse(t, svg)
			got := 0
			for _, e := range d.elems {
				if e.attrs["class"] == "spark" {
					got = len(strings.Fields(e.attrs["points"]))
					for _, p := range strings.Fields(e.attrs["points"]) {
						var x, y float64
						if _, err := fmt.Sscanf(p, "%g,%g", &x, &y); err != nil || x < 0 || x > 100 || y < 0 || y > 20 {
							t.Errorf("point %q outside 100×20", p)
						}
					}
				}
			}
			if got != tt.want {
				t.Errorf("%d points, want %d", got, tt.want)
			}
			safe(t, svg, d)
		})
	}
}

func TestTicks(t *testing.T) {
	tests := []struct {
		lo, hi float64
		want   []float64
	}{
		{0, 1, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
		{0.13, 0.91, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
		{1, 10, []float64{0, 2, 4, 6, 8, 10}},
		{5, 5, []float64{4.4, 4.6, 4.8, 5, 5.2, 5.4, 5.6}},
		{-3e-5, 7e-5, []float64{-4e-5, -2e-5, 0, 2e-5, 4e-5, 6e-5, 8e-5}},
	}
	for _, tt := range tests {
		got, _, _ := ticks(tt.lo, tt.hi, 5)
		if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-12 })); diff != "" {
			t.Errorf("ticks(%g, %g) (-want +got):\n%s", tt.lo, tt.hi, diff)
		}
	}
	if got, _, _ := ticks(math.NaN(), 1, 5); len(got) != 2 {
		t.Errorf("ticks of NaN: %v", got)
	}
}

func TestEsc(t *testing.T) {
	got := esc("a<b>&\"'\x1b\x00\u009b\xff\u2028é\t")
	want := "a&lt;b&gt;&amp;&#34;&#39;\uFFFD\uFFFD\uFFFD\uFFFD\u2028é\t"
	if got != want {
		t.Errorf("esc = %q, want %q", got, want)
	}
}

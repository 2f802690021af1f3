package steps

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/taoflow/taoflow/internal/progress"
	"github.com/taoflow/taoflow/secret"
)

// progressLine turns one line of a TAO status.json (a JSON object per line;
// see docs/design.md §12) into a progress report: a short line
//
//	epoch 3/10 loss 0.21 eta 0:04:00
//
// and its figures, the numbers of the line as it shows them (a value with
// four significant digits). Missing fields are left out; a line with none
// of epoch, loss, a kpi or eta shows its message. Anything that is not a
// JSON object gives a report with an empty Line. Texts the job wrote are
// redacted by red before they are clipped; the figures hold the same texts.
func progressLine(line string, red *secret.Redactor) (r progress.Report) {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "{") {
		return progress.Report{}
	}
	dec := json.NewDecoder(strings.NewReader(line))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || dec.InputOffset() != int64(len(line)) {
		// Not one whole object: a line cut at the start of the end of
		// the file the wait reads holds the tail of one.
		return progress.Report{}
	}
	var (
		parts []string
		f     progress.Figures
	)
	defer func() { r.Points = linePoints(m, f.Epoch, red) }()
	if ep, ok := number(m["epoch"]); ok {
		f.Epoch = figure(ep)
		if maxEp, ok := number(m["max_epoch"]); ok {
			f.MaxEpoch = figure(maxEp)
			parts = append(parts, "epoch "+ep+"/"+maxEp)
		} else {
			parts = append(parts, "epoch "+ep)
		}
	}
	if name, v, ok := metric(m, red); ok {
		f.Metric, f.Value = name, figure(v)
		if progress.IsLoss(name) {
			f.Loss = f.Value
		}
		parts = append(parts, name+" "+v)
	}
	if eta := etaText(m["eta"], red); eta != "" {
		f.ETA = eta
		parts = append(parts, "eta "+eta)
	}
	if len(parts) == 0 {
		if msg, ok := m["message"].(string); ok {
			f.Message = red.Clip(oneLine(msg), 100)
			return progress.Report{Line: f.Message, Figures: f}
		}
		return progress.Report{}
	}
	return progress.Report{Line: strings.Join(parts, " "), Figures: f}
}

// linePoints are the metrics of a status.json line as points of the
// series, at full precision: its top-level loss and every numeric kpi,
// names redacted by red.
func linePoints(m map[string]any, epoch *float64, red *secret.Redactor) []progress.Point {
	var pts []progress.Point
	add := func(name string, v any) {
		if x, ok := fullNumber(v); ok {
			pts = append(pts, progress.Point{Epoch: epoch, Metric: name, Value: x})
		}
	}
	add("loss", m["loss"])
	kpi, _ := m["kpi"].(map[string]any)
	for _, k := range slices.Sorted(maps.Keys(kpi)) {
		if k != "loss" || m["loss"] == nil {
			add(red.Clip(oneLine(k), 64), kpi[k])
		}
	}
	return pts
}

// fullNumber is a JSON number (or numeric string) as a float64, when it
// is a finite one.
func fullNumber(v any) (float64, bool) {
	var (
		f   float64
		err error
	)
	switch x := v.(type) {
	case json.Number:
		f, err = x.Float64()
	case string:
		f, err = strconv.ParseFloat(strings.TrimSpace(x), 64)
	default:
		return 0, false
	}
	return f, err == nil && !math.IsNaN(f) && !math.IsInf(f, 0)
}

// figure is a number as number formats it, read back as the value shown.
func figure(s string) *float64 {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil
	}
	return &v
}

// lossKeys are the loss names preferred, in order, among kpi keys.
var lossKeys = []string{"loss", "train_loss", "training_loss", "val_loss", "validation_loss"}

// metric picks the loss to show: a top-level loss, else a kpi loss (a
// preferred name, else the first key containing "loss"), else the first
// kpi by name.
func metric(m map[string]any, red *secret.Redactor) (name, value string, ok bool) {
	if v, ok := number(m["loss"]); ok {
		return "loss", v, true
	}
	kpi, _ := m["kpi"].(map[string]any)
	var keys []string
	for k, v := range kpi {
		if _, ok := number(v); ok {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return "", "", false
	}
	slices.Sort(keys)
	pick := ""
	for _, k := range lossKeys {
		if slices.Contains(keys, k) {
			pick = k
			break
		}
	}
	if pick == "" {
		for _, k := range keys {
			if strings.Contains(strings.ToLower(k), "loss") {
				pick = k
				break
			}
		}
	}
	if pick == "" {
		pick = keys[0]
	}
	v, _ := number(kpi[pick])
	return red.Redact(oneLine(pick)), v, true
}

// number formats a JSON number (or a numeric string) with at most four
// significant digits after the point.
func number(v any) (string, bool) {
	var f float64
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return strconv.FormatInt(i, 10), true
		}
		g, err := x.Float64()
		if err != nil {
			return "", false
		}
		f = g
	case string:
		g, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil {
			return "", false
		}
		f = g
	default:
		return "", false
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", false
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatFloat(f, 'f', -1, 64), true
	}
	return strconv.FormatFloat(f, 'g', 4, 64), true
}

var fracSeconds = regexp.MustCompile(`^(\d+:\d\d:\d\d)\.\d+$`)

// etaText shows an eta: a timedelta string ("0:04:00.123456", "1 day,
// 2:00:00") without fractions of a second, or a number of seconds as
// h:mm:ss.
func etaText(v any, red *secret.Redactor) string {
	switch x := v.(type) {
	case string:
		s := oneLine(strings.TrimSpace(x))
		if i := strings.LastIndexByte(s, ' '); i >= 0 {
			if m := fracSeconds.FindStringSubmatch(s[i+1:]); m != nil {
				return red.Redact(s[:i+1]) + m[1]
			}
		}
		if m := fracSeconds.FindStringSubmatch(s); m != nil {
			return m[1]
		}
		return red.Clip(s, 40)
	case json.Number:
		f, err := x.Float64()
		if err != nil || f < 0 || math.IsInf(f, 0) || f > 1e9 {
			return ""
		}
		sec := int64(f)
		return fmt.Sprintf("%d:%02d:%02d", sec/3600, sec/60%60, sec%60)
	}
	return ""
}

// oneLine replaces control characters, so that a progress line stays one
// line.
func oneLine(s string) string {
	return string(bytes.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, []byte(s)))
}

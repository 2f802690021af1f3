package progress

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Figures are what a progress line says, as numbers, in the shape
// docs/json.md calls Progress. A number is nil when the line does not
// give it.
type Figures struct {
	// Job is the job the figures are of, when a wait waits for several.
	Job      string   `json:"job,omitempty"`
	Epoch    *float64 `json:"epoch,omitempty"`
	MaxEpoch *float64 `json:"max_epoch,omitempty"`
	// Metric is the figure shown ("loss", a kpi name) and Value its value;
	// Loss repeats Value when Metric names a loss (IsLoss).
	Metric string   `json:"metric,omitempty"`
	Value  *float64 `json:"value,omitempty"`
	Loss   *float64 `json:"loss,omitempty"`
	ETA    string   `json:"eta,omitempty"`
	// Message is the status line's message, when it holds no figures.
	Message string `json:"message,omitempty"`
}

// Report is one progress report of a node: Line is what people read
// ("[JOB] epoch 3/10 loss 0.21 eta 0:04:00"), Figures what it says.
type Report struct {
	Line    string
	Figures Figures
	// Points are the metric values the report brings, for the run's
	// series: every status.json line read since the last report, or a
	// plain "epoch 3/10 loss 0.21" output line (ParseLine). A report may
	// bring points and no Line.
	Points []Point
}

// IsLoss says whether a metric's name names a loss, so that its value is
// Figures.Loss too.
func IsLoss(metric string) bool {
	return strings.Contains(strings.ToLower(metric), "loss")
}

// MapText returns the figures with fn applied to each of their texts (the
// job, the metric's name, the eta, the message), as the state does with its
// redactor before it stores them.
func (f Figures) MapText(fn func(string) string) Figures {
	f.Job, f.Metric, f.ETA, f.Message = fn(f.Job), fn(f.Metric), fn(f.ETA), fn(f.Message)
	return f
}

// Point is one value of one metric a job reported, at an epoch or step:
// what the state keeps of a run's metric series. Time is when taoflow read
// it (zero: the recorder fills in the time it records it).
type Point struct {
	// Job is the job that reported it (the wait sets it).
	Job    string    `json:"job,omitempty"`
	Epoch  *float64  `json:"epoch,omitempty"`
	Step   *int64    `json:"step,omitempty"`
	Time   time.Time `json:"time"`
	Metric string    `json:"metric"`
	Value  float64   `json:"value"`
}

// epochRE finds an epoch counter: "epoch 3", "Epoch 3/10", "epoch: 3 of 10",
// "[epoch=3]".
var epochRE = regexp.MustCompile(`(?i)(?:^|[^a-z0-9_])epoch\s*[:=]?\s*(\d+(?:\.\d+)?)(?:\s*(?:/|of)\s*(\d+))?`)

// stepRE finds a step counter: "step 1200", "iter: 1200/5000".
var stepRE = regexp.MustCompile(`(?i)(?:^|[^a-z0-9_])(?:step|iter|iteration|global_step)\s*[:=]?\s*(\d+)(?:\s*/\s*\d+)?`)

// pairRE finds a metric and its value: "loss 0.21", "loss=0.21",
// "val_acc: 0.93", "loss: 2.1e-3".
var pairRE = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_./-]*)\s*(?:[:=]\s*|\s+)([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)`)

// notMetrics are counters and clocks, not metrics.
var notMetrics = map[string]bool{
	"epoch": true, "epochs": true, "max_epoch": true, "step": true, "steps": true, "iter": true,
	"iteration": true, "global_step": true, "eta": true, "time": true, "of": true, "batch": true,
}

// ansiRE matches a terminal colour or cursor sequence, which a script's
// output may wrap its figures in.
var ansiRE = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)

// maxLine bounds the lines ParseLine reads: longer ones are not progress.
const maxLine = 1024

// ParseLine reads the points of a plain progress line a training script
// prints, such as
//
//	epoch 3/10 loss 0.21 acc 0.93
//	Epoch 3/10: loss=0.2100 val_acc: 0.93 eta=0:04:00
//	step 1200 loss 2.1e-3
//
// one point per metric, each with the line's epoch (and step); their Time
// is left zero. A line without an epoch or step counter, or without a
// metric after it, gives none. Counters and clocks (eta, time, batch) are
// not metrics; a value followed by ':' or '/' ("0:04:00", "3/10") is not
// a metric's; terminal colour sequences are ignored; NaN and infinities are dropped; names are at most 64 bytes.
func ParseLine(line string) []Point {
	if len(line) > maxLine {
		return nil
	}
	line = ansiRE.ReplaceAllString(line, "")
	var (
		epoch *float64
		step  *int64
		rest  string
	)
	if m := epochRE.FindStringSubmatchIndex(line); m != nil {
		v, err := strconv.ParseFloat(line[m[2]:m[3]], 64)
		if err != nil {
			return nil
		}
		epoch, rest = &v, line[m[1]:]
	}
	if m := stepRE.FindStringSubmatchIndex(line); m != nil {
		v, err := strconv.ParseInt(line[m[2]:m[3]], 10, 64)
		if err == nil {
			step = &v
			if epoch == nil || m[1] > len(line)-len(rest) {
				rest = line[m[1]:]
			}
		}
	}
	if epoch == nil && step == nil {
		return nil
	}
	var pts []Point
	seen := map[string]bool{}
	for _, m := range pairRE.FindAllStringSubmatchIndex(rest, -1) {
		name, num := rest[m[2]:m[3]], rest[m[4]:m[5]]
		if end := m[5]; end < len(rest) && (rest[end] == ':' || rest[end] == '/') {
			continue // a clock (0:04:00) or a counter (3/10)
		}
		key := strings.ToLower(name)
		if notMetrics[key] || strings.HasPrefix(key, "time_") || strings.HasSuffix(key, "_time") || len(name) > 64 || seen[name] {
			continue
		}
		v, err := strconv.ParseFloat(num, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		seen[name] = true
		pts = append(pts, Point{Epoch: epoch, Step: step, Metric: name, Value: v})
	}
	return pts
}

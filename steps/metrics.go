package steps

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// RecordMetrics is the Request.Record key under which a wait records the
// metrics its jobs wrote: a JSON object of job id → Metrics.
const RecordMetrics = "metrics"

// Metrics are the numbers a job wrote as JSON lines in its results
// directory (TAO's status.json, or any *.jsonl): for each numeric field, its
// last value and its best (the lowest for a name holding "loss" or "err",
// the highest otherwise).
type Metrics struct {
	Epoch    *float64           `json:"epoch,omitempty"`     // the last epoch written
	MaxEpoch *float64           `json:"max_epoch,omitempty"` // its max_epoch
	Last     map[string]float64 `json:"last,omitempty"`
	Best     map[string]float64 `json:"best,omitempty"`
	Lines    int                `json:"lines"` // JSON lines read
}

// LowerIsBetter reports whether a smaller value of metric name is better.
func LowerIsBetter(name string) bool {
	n := strings.ToLower(name)
	return strings.Contains(n, "loss") || strings.Contains(n, "err") || strings.Contains(n, "mae") || strings.Contains(n, "mse")
}

// notMetrics are status.json fields that are numbers but not results.
var notMetrics = map[string]bool{"epoch": true, "max_epoch": true, "eta": true, "time_per_epoch": true, "time_per_iter": true, "cur_iter": true, "max_iter": true, "date": true, "time": true, "verbosity": true}

// maxMetricBytes bounds what is read of a job's JSON lines.
const maxMetricBytes = 4 << 20

// metricsScript prints, for each status.json or *.jsonl file in a results
// directory (three levels deep at most, 20 files), "@file PATH" and its
// last maxMetricBytes/20 bytes (scripts/metrics.sh).
func metricsScript(results string) string {
	return script(Params{"tf_results": results, "tf_bytes": strconv.Itoa(maxMetricBytes / 20)}, "home", "metrics")
}

// parseMetrics reads the JSON lines metricsScript printed.
func parseMetrics(out []byte) Metrics {
	m := Metrics{Last: map[string]float64{}, Best: map[string]float64{}}
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "{") {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(line))
		dec.UseNumber()
		var obj map[string]any
		if dec.Decode(&obj) != nil {
			continue
		}
		m.Lines++
		if v, ok := numberValue(obj["epoch"]); ok {
			m.Epoch = &v
		}
		if v, ok := numberValue(obj["max_epoch"]); ok {
			m.MaxEpoch = &v
		}
		fields := map[string]any{}
		for k, v := range obj {
			if !notMetrics[k] {
				fields[k] = v
			}
		}
		if kpi, ok := obj["kpi"].(map[string]any); ok {
			delete(fields, "kpi")
			for k, v := range kpi {
				fields[k] = v
			}
		}
		for k, raw := range fields {
			v, ok := numberValue(raw)
			if !ok || k == "" || len(k) > 64 {
				continue
			}
			k = oneLine(k)
			m.Last[k] = v
			best, seen := m.Best[k]
			if !seen || (LowerIsBetter(k) && v < best) || (!LowerIsBetter(k) && v > best) {
				m.Best[k] = v
			}
		}
	}
	return m
}

// numberValue is a JSON number (not a numeric string: those are messages,
// ids or dates) as a finite float.
func numberValue(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// recordMetrics reads the JSON lines of the jobs that have a results
// directory and records their metrics. It never fails the wait: what it
// cannot read is said in the log.
func (s *Steps) recordMetrics(ctx context.Context, req Request, ws []*watched) {
	if req.Record == nil || ctx.Err() != nil {
		return
	}
	// Bounded: the metrics are a record, never a reason to hold the run.
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	all := map[string]Metrics{}
	for _, w := range ws {
		if w.job.Results == "" {
			continue
		}
		res, err := s.exec(ctx, w.inst, metricsScript(w.job.Results), nil)
		if err != nil || res.ExitCode != 0 {
			fmt.Fprintf(req.Log, "%sjob %s: could not read its metrics from %s\n", w.label, w.job.ID, w.job.Results)
			continue
		}
		if m := parseMetrics(res.Stdout); m.Lines > 0 {
			all[w.job.ID] = m
		}
	}
	if len(all) == 0 {
		return
	}
	b, err := json.Marshal(all)
	if err != nil {
		return
	}
	req.Record(RecordMetrics, string(b))
}

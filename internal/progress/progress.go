package progress

import "strings"

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

package steps

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/taoflow/taoflow/secret"
)

// TestParseProgress reads progress lines, as progressLine writes them from
// status.json, back into numbers.
func TestParseProgress(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	tests := map[string]struct {
		status string // a status.json line; the label is put before its progress line
		label  string
		want   Progress
	}{
		"TAO epoch line": {status: `{"epoch": 3, "max_epoch": 10, "eta": "0:04:00.1", "kpi": {"loss": 0.2134567}}`,
			want: Progress{Epoch: f(3), MaxEpoch: f(10), Metric: "loss", Value: f(0.2135), Loss: f(0.2135), ETA: "0:04:00"}},
		"kpi, not a loss":   {status: `{"epoch": 1, "max_epoch": 5, "kpi": {"acc": 0.25}}`, want: Progress{Epoch: f(1), MaxEpoch: f(5), Metric: "acc", Value: f(0.25)}},
		"epoch only":        {status: `{"epoch": 4}`, want: Progress{Epoch: f(4)}},
		"val loss":          {status: `{"kpi": {"val_loss": 1e-7}}`, want: Progress{Metric: "val_loss", Value: f(1e-7), Loss: f(1e-7)}},
		"eta with days":     {status: `{"eta": "1 day, 2:03:04.5"}`, want: Progress{ETA: "1 day, 2:03:04"}},
		"message":           {status: `{"message": "Starting Training Loop."}`, want: Progress{Message: "Starting Training Loop."}},
		"one word message":  {status: `{"message": "done"}`, want: Progress{Message: "done"}},
		"job label":         {status: `{"epoch": 2, "max_epoch": 3}`, label: "[tf-r-train-a] ", want: Progress{Job: "tf-r-train-a", Epoch: f(2), MaxEpoch: f(3)}},
		"message like data": {status: `{"message": "epoch x/y"}`, want: Progress{Message: "epoch x/y"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			line := tt.label + progressLine(tt.status, secret.NewRedactor())
			if diff := cmp.Diff(tt.want, ParseProgress(line)); diff != "" {
				t.Errorf("ParseProgress(%q) (-want +got):\n%s", line, diff)
			}
		})
	}
}

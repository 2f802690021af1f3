package steps

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/taoflow/taoflow/internal/progress"
	"github.com/taoflow/taoflow/secret"
)

// TestProgressFigures reads status.json lines into the figures a progress
// report carries beside its line: the numbers the line shows, its texts as
// they are, with no text to parse back.
func TestProgressFigures(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	tests := map[string]struct {
		status string // a status.json line
		want   progress.Figures
	}{
		"TAO epoch line": {status: `{"epoch": 3, "max_epoch": 10, "eta": "0:04:00.1", "kpi": {"loss": 0.2134567}}`,
			want: progress.Figures{Epoch: f(3), MaxEpoch: f(10), Metric: "loss", Value: f(0.2135), Loss: f(0.2135), ETA: "0:04:00"}},
		"kpi, not a loss":  {status: `{"epoch": 1, "max_epoch": 5, "kpi": {"acc": 0.25}}`, want: progress.Figures{Epoch: f(1), MaxEpoch: f(5), Metric: "acc", Value: f(0.25)}},
		"epoch only":       {status: `{"epoch": 4}`, want: progress.Figures{Epoch: f(4)}},
		"val loss":         {status: `{"kpi": {"val_loss": 1e-7}}`, want: progress.Figures{Metric: "val_loss", Value: f(1e-7), Loss: f(1e-7)}},
		"eta with days":    {status: `{"eta": "1 day, 2:03:04.5"}`, want: progress.Figures{ETA: "1 day, 2:03:04"}},
		"message":          {status: `{"message": "Starting Training Loop."}`, want: progress.Figures{Message: "Starting Training Loop."}},
		"one word message": {status: `{"message": "done"}`, want: progress.Figures{Message: "done"}},
		// The texts the old line could not give back: a message that reads
		// like figures, a metric name with a space or '=', an eta word.
		"message like data":    {status: `{"message": "epoch 3/4"}`, want: progress.Figures{Message: "epoch 3/4"}},
		"metric with a space":  {status: `{"kpi": {"val loss=x": 0.5}}`, want: progress.Figures{Metric: "val loss=x", Value: f(0.5), Loss: f(0.5)}},
		"metric named eta":     {status: `{"epoch": 1, "kpi": {"eta": 2}}`, want: progress.Figures{Epoch: f(1), Metric: "eta", Value: f(2)}},
		"big number, 4 digits": {status: `{"loss": 12345.678}`, want: progress.Figures{Metric: "loss", Value: f(12350), Loss: f(12350)}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			r := progressLine(tt.status, secret.NewRedactor())
			if r.Line == "" {
				t.Fatalf("no line for %s", tt.status)
			}
			if diff := cmp.Diff(tt.want, r.Figures); diff != "" {
				t.Errorf("figures of %s (line %q) (-want +got):\n%s", tt.status, r.Line, diff)
			}
		})
	}
}

// TestProgressFiguresRedacted: every text of the figures is redacted as the
// line is, the metric's name and an eta's words included.
func TestProgressFiguresRedacted(t *testing.T) {
	const sec = "s3cr3t-progress-value"
	set, err := secret.Resolve([]string{"S"}, func(string) (string, bool) { return sec, true })
	if err != nil {
		t.Fatal(err)
	}
	red := New(Config{Secrets: set, Owner: "test:1"}).redact
	for _, status := range []string{
		`{"message": "token ` + sec + `"}`,
		`{"kpi": {"loss_` + sec + `": 0.5}}`,
		`{"eta": "` + sec + ` 0:04:00.5"}`,
		`{"eta": "` + sec + `"}`,
	} {
		r := progressLine(status, red)
		f := r.Figures
		for _, text := range []string{r.Line, f.Job, f.Metric, f.ETA, f.Message} {
			if strings.Contains(text, sec) {
				t.Errorf("%s: %q holds the secret", status, text)
			}
		}
	}
}

// TestStatusLinePoints: a status.json line's points are its top-level
// loss and every numeric kpi (sorted, full precision, names redacted),
// with its epoch and step; a line that is not one whole object gives none
// (the cut first line of the file's end the wait reads).
func TestStatusLinePoints(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	i := func(v int64) *int64 { return &v }
	tests := map[string]struct {
		status string
		want   []progress.Point
	}{
		"loss and kpis": {`{"epoch": 3, "global_step": 1200, "loss": 0.2134567, "kpi": {"mAP": "0.5", "acc": 0.75, "bad": "x", "loss": 9}}`, []progress.Point{
			{Epoch: f(3), Step: i(1200), Metric: "loss", Value: 0.2134567},
			{Epoch: f(3), Step: i(1200), Metric: "acc", Value: 0.75},
			{Epoch: f(3), Step: i(1200), Metric: "mAP", Value: 0.5}}},
		"cur_iter, no epoch":         {`{"cur_iter": 7, "kpi": {"loss": 1e-3}}`, []progress.Point{{Step: i(7), Metric: "loss", Value: 0.001}}},
		"fractional step is no step": {`{"step": 1.5, "loss": 1}`, []progress.Point{{Metric: "loss", Value: 1}}},
		"tail of a cut line":         {`"x": 1}, "kpi": {"loss": 0.5}}`, nil},
		"two objects":                {`{"loss": 1} {"loss": 2}`, nil},
		"no metric":                  {`{"epoch": 1, "message": "starting"}`, nil},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := progressLine(tt.status, secret.NewRedactor()).Points
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("points of %s (-want +got):\n%s", tt.status, diff)
			}
		})
	}
}

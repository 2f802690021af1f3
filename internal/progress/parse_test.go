package progress

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseLine(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	i := func(v int64) *int64 { return &v }
	tests := map[string]struct {
		line string
		want []Point
	}{
		"plain": {"epoch 3/10 loss 0.21 acc 0.93", []Point{
			{Epoch: f(3), Metric: "loss", Value: 0.21}, {Epoch: f(3), Metric: "acc", Value: 0.93}}},
		"trainer": {"Epoch 1/2: loss=0.5000 time_per_epoch=0:00:00.100 eta=0:00:00.100", []Point{
			{Epoch: f(1), Metric: "loss", Value: 0.5}}},
		"colons": {"[train] epoch: 4 of 20 | val_loss: 2.5e-3 | val/acc: .75", []Point{
			{Epoch: f(4), Metric: "val_loss", Value: 0.0025}, {Epoch: f(4), Metric: "val/acc", Value: 0.75}}},
		"step": {"step 1200 loss -1.5 lr 0.001", []Point{
			{Step: i(1200), Metric: "loss", Value: -1.5}, {Step: i(1200), Metric: "lr", Value: 0.001}}},
		"epoch and step": {"epoch 2 step 300/900 loss 0.4", []Point{
			{Epoch: f(2), Step: i(300), Metric: "loss", Value: 0.4}}},
		"repeated name keeps the first": {"epoch 1 loss 0.5 loss 0.7", []Point{{Epoch: f(1), Metric: "loss", Value: 0.5}}},
		"no counter":                    {"loss 0.21 acc 0.93", nil},
		"counter only":                  {"Epoch 3/10", nil},
		"counters and clocks":           {"epoch 3 batch 7 eta 12 time 4 iteration 5", nil},
		"not a word epoch":              {"myepoch 3 loss 0.1", nil},
		"nan":                           {"epoch 3 loss nan acc inf", nil},
		"huge exponent":                 {"epoch 3 loss 1e999", nil},
		"too long":                      {"epoch 3 loss 0.1 " + strings.Repeat("x", maxLine), nil},
		"long name":                     {"epoch 3 " + strings.Repeat("a", 65) + " 0.1", nil},
		"control characters":            {"epoch 3 \x1b[31mloss 0.5\x1b[0m", []Point{{Epoch: f(3), Metric: "loss", Value: 0.5}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, ParseLine(tc.line)); d != "" {
				t.Errorf("ParseLine(%q) (-want +got):\n%s", tc.line, d)
			}
		})
	}
}

func FuzzParseLine(f *testing.F) {
	f.Add("epoch 3/10 loss 0.21 acc 0.93")
	f.Add("step 1 x=1e5")
	f.Fuzz(func(t *testing.T, line string) {
		for _, p := range ParseLine(line) {
			if p.Metric == "" || len(p.Metric) > 64 || (p.Epoch == nil && p.Step == nil) {
				t.Fatalf("ParseLine(%q): bad point %+v", line, p)
			}
		}
	})
}

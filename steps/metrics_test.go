package steps

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func fp(v float64) *float64 { return &v }

func TestParseMetrics(t *testing.T) {
	out := []byte(`@file /r/status.json
{"epoch": 1, "max_epoch": 3, "time_per_epoch": "0:00:01", "eta": "0:00:02", "date": "1/2/2026", "status": "RUNNING", "kpi": {"loss": 0.5, "val_accuracy": 0.7}}
not json
{"epoch": 2, "max_epoch": 3, "kpi": {"loss": 0.3, "val_accuracy": 0.9}, "message": "12"}
{"epoch": 3, "max_epoch": 3, "kpi": {"loss": 0.4, "val_accuracy": 0.8, "name": "x"}, "mAP_error": 0.2}
@file /r/eval.jsonl
{"mAP_error": 0.1, "step": 7, "nan": "NaN"}
`)
	want := Metrics{
		Epoch: fp(3), MaxEpoch: fp(3), Lines: 4,
		Last: map[string]float64{"loss": 0.4, "val_accuracy": 0.8, "mAP_error": 0.1, "step": 7},
		Best: map[string]float64{"loss": 0.3, "val_accuracy": 0.9, "mAP_error": 0.1, "step": 7},
	}
	if diff := cmp.Diff(want, parseMetrics(out)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestParseTAOCommand(t *testing.T) {
	for cmd, want := range map[string]TAOJob{
		"visual_changenet train -e /spec.yaml train.lr=0.1":                                        {"visual_changenet", "train"},
		"set -e\nCUDA_VISIBLE_DEVICES=0 classification_pyt evaluate --experiment_spec_file s.yaml": {"classification_pyt", "evaluate"},
		"tao model dino export -e s.yaml":                                                          {"dino", "export"},
		"python train.py -e 3":                                                                     {},
		"echo hi":                                                                                  {},
	} {
		got, ok := ParseTAOCommand(cmd)
		if got != want || ok != (want != TAOJob{}) {
			t.Errorf("ParseTAOCommand(%q) = %v, %v; want %v", cmd, got, ok, want)
		}
	}
}

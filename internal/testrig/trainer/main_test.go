package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

// TestParseTAO reads the TAO command line the example plans write.
func TestParseTAO(t *testing.T) {
	cfg, err := parse(strings.Fields("visual_changenet train -e /data/experiment.yaml results_dir=/results/lr-0.01 train.num_epochs=3 train.optim.lr=0.01 trainer.sleep=5ms trainer.fail_code=3"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.results != "/results/lr-0.01" || cfg.epochs != 3 || cfg.sleep != 5*time.Millisecond || cfg.failCode != 3 || cfg.failAt != -1 {
		t.Errorf("parsed %+v", cfg)
	}
	for _, bad := range []string{"visual_changenet evaluate", "visual_changenet train stray", "visual_changenet train train.num_epochs=x"} {
		if _, err := parse(strings.Fields(bad), io.Discard); err == nil {
			t.Errorf("%q parsed without error", bad)
		}
	}
	// The flag form still works.
	cfg, err = parse([]string{"-epochs", "4", "-results", "/r"}, io.Discard)
	if err != nil || cfg.epochs != 4 || cfg.results != "/r" {
		t.Errorf("flag form: %+v, %v", cfg, err)
	}
}

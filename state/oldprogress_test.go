package state

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/taoflow/taoflow/internal/progress"
)

// TestOldProgressFigures reads progress lines as taoflow stored them before
// schema version 5 back into figures (the cases the old parser's test held).
func TestOldProgressFigures(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	tests := map[string]struct {
		line string
		want progress.Figures
	}{
		"TAO epoch line":    {"epoch 3/10 loss 0.2135 eta 0:04:00", progress.Figures{Epoch: f(3), MaxEpoch: f(10), Metric: "loss", Value: f(0.2135), Loss: f(0.2135), ETA: "0:04:00"}},
		"kpi, not a loss":   {"epoch 1/5 acc 0.25", progress.Figures{Epoch: f(1), MaxEpoch: f(5), Metric: "acc", Value: f(0.25)}},
		"epoch only":        {"epoch 4", progress.Figures{Epoch: f(4)}},
		"val loss":          {"val_loss 1e-07", progress.Figures{Metric: "val_loss", Value: f(1e-7), Loss: f(1e-7)}},
		"eta with days":     {"eta 1 day, 2:03:04", progress.Figures{ETA: "1 day, 2:03:04"}},
		"message":           {"Starting Training Loop.", progress.Figures{Message: "Starting Training Loop."}},
		"one word message":  {"done", progress.Figures{Message: "done"}},
		"job label":         {"[tf-r-train-a] epoch 2/3", progress.Figures{Job: "tf-r-train-a", Epoch: f(2), MaxEpoch: f(3)}},
		"message like data": {"epoch x/y", progress.Figures{Message: "epoch x/y"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, oldProgressFigures(tt.line)); diff != "" {
				t.Errorf("oldProgressFigures(%q) (-want +got):\n%s", tt.line, diff)
			}
		})
	}
}

// TestMigrateProgressFigures: a state of schema version 4 (progress lines,
// no figures) opened by this taoflow has the figures of each line; a node
// without progress has none.
func TestMigrateProgressFigures(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	mustCreateRun(t, s, "r1")
	for _, n := range []Node{
		{RunID: "r1", ID: "wait@a", Step: "wait", State: "running", Progress: "[tf-r1-train-a] epoch 3/10 loss 0.2135 eta 0:04:00"},
		{RunID: "r1", ID: "prep@a", Step: "prep", State: "succeeded"},
	} {
		if err := s.PutNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	makeVersion4(t, dir)
	if _, err := OpenReadOnly(dir); err == nil {
		t.Fatal("OpenReadOnly of a version 4 state: no error")
	}

	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f := func(v float64) *float64 { return &v }
	want := map[string]*progress.Figures{
		"wait@a": {Job: "tf-r1-train-a", Epoch: f(3), MaxEpoch: f(10), Metric: "loss", Value: f(0.2135), Loss: f(0.2135), ETA: "0:04:00"},
		"prep@a": nil,
	}
	for id, w := range want {
		n, err := s.Node(ctx, "r1", id)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(w, n.ProgressFigures); diff != "" {
			t.Errorf("figures of %s after the migration (-want +got):\n%s", id, diff)
		}
	}
}

// makeVersion4 turns the state in dir back into schema version 4: nodes
// without their progress figures.
func makeVersion4(t *testing.T, dir string) {
	t.Helper()
	raw, err := sql.Open("sqlite", filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec("ALTER TABLE nodes DROP COLUMN progress_figures; PRAGMA user_version = 4"); err != nil {
		t.Fatal(err)
	}
}

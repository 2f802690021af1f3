package runner

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/internal/progress"
	"github.com/taoflow/taoflow/state"
)

// TestSeriesForCharts records a 2-cell sweep as apply would (run nodes
// with their job and matrix facts, points through the recorder's
// conversion) and reads back what charts need: rows with their series,
// Curves of one metric against the epoch, the main metric, and the
// timeline per instance and slot.
func TestSeriesForCharts(t *testing.T) {
	ctx := t.Context()
	store, err := state.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.CreateRun(ctx, state.Run{ID: "r1", Name: "p", State: state.RunRunning}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	put := func(n state.Node, facts map[string]string) {
		t.Helper()
		if err := store.PutNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		for k, v := range facts {
			if err := store.SetNodeFact(ctx, "r1", n.ID, k, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	put(state.Node{RunID: "r1", ID: "pull@a", Step: "pull", Instance: "a", State: "succeeded", StartedAt: at(0), EndedAt: at(10)}, nil)
	for i, lr := range []string{"1", "2"} {
		cell := "lr-" + lr
		put(state.Node{RunID: "r1", ID: "train[lr=" + lr + "]", Step: "train", Instance: "a", Cell: cell, State: "succeeded", StartedAt: at(20), EndedAt: at(21)},
			map[string]string{factJob: "job-" + lr, factMatrix: `[{"key":"lr","value":"` + lr + `"}]`, factSlot: string(rune('0' + i))})
		wait := state.Node{RunID: "r1", ID: "wait[lr=" + lr + "]", Step: "wait", Instance: "a", Cell: cell, State: "running", StartedAt: at(21 + i*5)}
		put(wait, nil)
		if i == 1 {
			continue // lr-2 reported nothing yet
		}
		var pts []progress.Point
		for e := 1; e <= 3; e++ {
			pts = append(pts, progress.Point{Job: "job-" + lr, Epoch: new(float64(e)), Metric: "loss", Value: 1 / float64(e)},
				progress.Point{Job: "job-" + lr, Epoch: new(float64(e)), Metric: "acc", Value: float64(e) / 10})
		}
		if err := store.AppendPoints(ctx, "r1", points(&wait, engine.Event{Time: at(30), Points: pts})); err != nil {
			t.Fatal(err)
		}
	}
	tab, err := Results(ctx, store, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if len(tab.Rows) != 2 || len(tab.Rows[0].Series) != 6 || tab.Rows[1].Series != nil {
		t.Fatalf("rows %+v: want lr-1 with 6 points, lr-2 with none", tab.Rows)
	}
	if diff := cmp.Diff([]string{"acc", "loss"}, tab.SeriesMetrics); diff != "" {
		t.Errorf("series metrics (-want +got):\n%s", diff)
	}
	if p := tab.Rows[0].Series[0]; p.Node != "wait[lr=1]" || !p.Time.Equal(at(30)) || p.Cell != "lr-1" {
		t.Errorf("first point %+v: want from wait[lr=1] of cell lr-1 at the event's time", p)
	}
	for prefer, want := range map[string]string{"": "loss", "acc": "acc", "nope": "loss"} {
		if got := tab.MainMetric(prefer); got != want {
			t.Errorf("MainMetric(%q) = %q, want %q", prefer, got, want)
		}
	}
	want := []Curve{{Name: "lr-1", Step: "train", Matrix: map[string]string{"lr": "1"}, State: "running",
		X: []float64{1, 2, 3}, Y: []float64{1, 0.5, 1.0 / 3}}}
	if diff := cmp.Diff(want, tab.Curves("loss")); diff != "" {
		t.Errorf("curves (-want +got):\n%s", diff)
	}

	spans, err := Timeline(ctx, store, "r1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range spans {
		end := "now"
		if s.End.Before(at(1000)) {
			end = s.End.Sub(t0).String()
		}
		got = append(got, s.Instance+"/"+string(rune('0'+s.Slot+1))+" "+s.Node+" "+s.Start.Sub(t0).String()+"–"+end)
	}
	// Slot -1 (no slot) sorts first, as "/0"; slots 0 and 1 as "/1", "/2".
	wantSpans := []string{
		"a/0 pull@a 0s–10s",
		"a/1 train[lr=1] 20s–21s",
		"a/1 wait[lr=1] 21s–now",
		"a/2 train[lr=2] 20s–21s",
		"a/2 wait[lr=2] 26s–now",
	}
	if diff := cmp.Diff(wantSpans, got); diff != "" {
		t.Errorf("timeline (-want +got):\n%s", diff)
	}
}

// TestSeriesKey: a cell's series, else its job's, else the node's.
func TestSeriesKey(t *testing.T) {
	for _, tt := range [][4]string{{"c", "j", "n", "c"}, {"", "j", "n", "j"}, {"", "", "n", "n"}} {
		if got := SeriesKey(tt[0], tt[1], tt[2]); got != tt[3] {
			t.Errorf("SeriesKey(%q, %q, %q) = %q, want %q", tt[0], tt[1], tt[2], got, tt[3])
		}
	}
}

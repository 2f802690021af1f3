package web

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/taoflow/taoflow/state"
)

// bigRun writes a run of cells cells (matrix lr × batch), each with points
// points of loss and of acc, into a state in dir.
func bigRun(b *testing.B, dir string, cells, points int) string {
	b.Helper()
	ctx := context.Background()
	s, err := state.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const id = "big-1206-101010-abcd"
	now := time.Now()
	if err := s.CreateRun(ctx, state.Run{ID: id, Name: "big", State: state.RunSucceeded, StartedAt: now.Add(-time.Hour), EndedAt: now}); err != nil {
		b.Fatal(err)
	}
	for c := range cells {
		lr, batch := fmt.Sprint(c/10), fmt.Sprint(c%10)
		cell := "lr-" + lr + "_batch-" + batch
		run, wait := "train["+cell+"]", "wait["+cell+"]"
		start := now.Add(-time.Hour + time.Duration(c)*time.Second)
		for _, n := range []state.Node{
			{RunID: id, ID: run, Step: "train", Instance: "gpu", Cell: cell, State: "succeeded", StartedAt: start, EndedAt: start.Add(time.Second)},
			{RunID: id, ID: wait, Step: "wait", Instance: "gpu", Cell: cell, State: "succeeded", StartedAt: start, EndedAt: start.Add(30 * time.Minute)},
		} {
			if err := s.PutNode(ctx, n); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.SetNodeFact(ctx, id, run, "job", "tf-"+id+"-train."+cell); err != nil {
			b.Fatal(err)
		}
		if err := s.SetNodeFact(ctx, id, run, "matrix", `[{"key":"lr","value":"`+lr+`"},{"key":"batch","value":"`+batch+`"}]`); err != nil {
			b.Fatal(err)
		}
		pts := make([]state.Point, 0, 2*points)
		for e := range points {
			ep := float64(e + 1)
			pts = append(pts, state.Point{Cell: cell, Node: wait, Epoch: &ep, Time: start, Metric: "loss", Value: 1 / ep},
				state.Point{Cell: cell, Node: wait, Epoch: &ep, Time: start, Metric: "acc", Value: 1 - 1/ep})
		}
		if err := s.AppendPoints(ctx, id, pts); err != nil {
			b.Fatal(err)
		}
	}
	return id
}

// BenchmarkRunPage100x1000 renders the run page (the live page's whole
// render, which each event-stream poll repeats) of 100 cells with 1000
// points each of two metrics; it reports the report's size too.
func BenchmarkRunPage100x1000(b *testing.B) {
	dir := filepath.Join(b.TempDir(), ".taoflow")
	id := bigRun(b, dir, 100, 1000)
	s, err := state.OpenReadOnly(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	h := New(Config{Dirs: func() []string { return []string{dir} }})
	defer h.Close()
	var page bytes.Buffer
	cpu0 := cpuTime()
	n := 0
	b.ResetTimer()
	for b.Loop() {
		n++
		p, err := h.loadRun(context.Background(), s, dir, id, Choice{})
		if err != nil {
			b.Fatal(err)
		}
		page.Reset()
		if err := pages.ExecuteTemplate(&page, "run", view{Data: p}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	// CPU time, not only wall time: the machine the figures come from is
	// shared, and a render waits for a core there.
	b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(n), "cpu-s/op")
	var rep bytes.Buffer
	if err := WriteReport(context.Background(), &rep, s, dir, id, ReportConfig{}); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(page.Len()), "page-bytes")
	b.ReportMetric(float64(rep.Len()), "report-bytes")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

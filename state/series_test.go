package state

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestSeriesBounded appends 100k points to one series: it stays within
// MaxPoints, keeps the first and the newest point, and what it keeps is
// evenly spaced (one stride apart) with each value where it was appended.
func TestSeriesBounded(t *testing.T) {
	ctx := t.Context()
	s := openTest(t)
	mustCreateRun(t, s, "r1")
	// Batches of several sizes: a poll brings one point or many.
	const total = 100_000
	sizes := []int{1, 3, 997, 2_000, 1, 4_096}
	for b, j := 0, 0; b < total; b, j = b+sizes[j%len(sizes)], j+1 {
		batch := min(sizes[j%len(sizes)], total-b)
		pts := make([]Point, batch)
		for i := range pts {
			n := b + i
			pts[i] = Point{Cell: "lr=0.1", Node: "wait[lr=0.1]", Metric: "loss", Epoch: ptr(float64(n)), Time: at(n), Value: float64(n)}
		}
		if err := s.AppendPoints(ctx, "r1", pts); err != nil {
			t.Fatal(err)
		}
		var kept int
		if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM series").Scan(&kept); err != nil {
			t.Fatal(err)
		}
		if kept > MaxPoints {
			t.Fatalf("after %d points: %d kept, more than %d", b+batch, kept, MaxPoints)
		}
	}
	got, err := s.Series(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < MaxPoints/2 || len(got) > MaxPoints {
		t.Fatalf("%d points kept, want between %d and %d", len(got), MaxPoints/2, MaxPoints)
	}
	if got[0].Value != 0 || got[len(got)-1].Value != total-1 {
		t.Errorf("first %v, last %v: want 0 and %d", got[0].Value, got[len(got)-1].Value, total-1)
	}
	stride := got[1].Seq - got[0].Seq
	if stride < 2 || stride&(stride-1) != 0 {
		t.Errorf("stride %d: want a power of two above 1", stride)
	}
	for i, p := range got {
		if p.Value != float64(p.Seq) || *p.Epoch != float64(p.Seq) || !p.Time.Equal(at(int(p.Seq))) {
			t.Fatalf("point %d: seq %d holds value %v epoch %v time %v", i, p.Seq, p.Value, *p.Epoch, p.Time)
		}
		if i > 0 && i < len(got)-1 && p.Seq-got[i-1].Seq != stride {
			t.Fatalf("point %d: seq %d after %d, want a gap of %d", i, p.Seq, got[i-1].Seq, stride)
		}
	}
}

// TestSeriesPoints: points of several cells and metrics come back by cell,
// metric and arrival, with their texts redacted, NaN and infinities
// dropped, a missing time filled in, and epoch and step as given.
func TestSeriesPoints(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, WithRedactor(func(v string) string { return strings.ReplaceAll(v, "s3cret", "***") }))
	mustCreateRun(t, s, "r1")
	mustCreateRun(t, s, "r2")
	hostile := "bs=8<script>\"\x1b[31m"
	pts := []Point{
		{Cell: "lr=0.1", Node: "w[lr=0.1]", Metric: "loss", Epoch: ptr(1.0), Time: at(1), Value: 0.5},
		{Cell: hostile, Node: "w", Metric: "acc_s3cret", Step: ptr(int64(100)), Time: at(2), Value: 0.7},
		{Cell: "lr=0.1", Node: "w[lr=0.1]", Metric: "loss", Epoch: ptr(2.0), Time: at(3), Value: 0.25},
		{Cell: "lr=0.1", Node: "w[lr=0.1]", Metric: "loss", Time: at(4), Value: math.NaN()},
		{Cell: "lr=0.1", Node: "w[lr=0.1]", Metric: "loss", Time: at(5), Value: math.Inf(1)},
		{Cell: "lr=0.1", Node: "w[lr=0.1]", Metric: "acc", Epoch: ptr(math.Inf(1)), Value: 0.9},
	}
	if err := s.AppendPoints(ctx, "r1", pts); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendPoints(ctx, "r2", pts[:1]); err != nil {
		t.Fatal(err)
	}
	got, err := s.Series(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	want := []Point{
		{Cell: hostile, Node: "w", Metric: "acc_***", Step: ptr(int64(100)), Time: at(2), Value: 0.7},
		{Cell: "lr=0.1", Node: "w[lr=0.1]", Metric: "acc", Time: at(1), Value: 0.9},
		{Cell: "lr=0.1", Node: "w[lr=0.1]", Metric: "loss", Epoch: ptr(1.0), Time: at(1), Value: 0.5},
		{Cell: "lr=0.1", Node: "w[lr=0.1]", Metric: "loss", Epoch: ptr(2.0), Time: at(3), Value: 0.25, Seq: 1},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("series (-want +got):\n%s", d)
	}
	if got, _ := s.Series(ctx, "r2"); len(got) != 1 {
		t.Errorf("run r2: %d points, want 1", len(got))
	}
	if got, _ := s.Series(ctx, "nope"); got != nil {
		t.Errorf("unknown run: %v, want none", got)
	}
	ro, err := OpenReadOnly(s.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := ro.AppendPoints(ctx, "r1", pts); err == nil {
		t.Error("AppendPoints on a read-only store succeeded")
	}
}

// TestSeriesReadWhileWriting is status reading while apply writes: a
// read-only Store reads the series in a loop while the writer appends
// batches to 8 cells. No read fails; every read is a consistent snapshot
// (whole batches: each cell has as many arrivals as the others, or one
// batch more, and starts at its first point); the last read sees all.
func TestSeriesReadWhileWriting(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	w, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	mustCreateRun(t, w, "r1")
	ro, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	const cells, batches, per = 8, 30, 20
	var (
		done  atomic.Bool
		reads atomic.Int64
		wg    sync.WaitGroup
		rerr  error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !done.Load() {
			pts, err := ro.Series(ctx, "r1")
			if err != nil {
				rerr = err
				return
			}
			if err := consistent(pts, cells); err != nil {
				rerr = err
				return
			}
			reads.Add(1)
		}
	}()
	start := time.Now()
	for b := range batches {
		var pts []Point
		for c := range cells {
			for i := range per {
				pts = append(pts, Point{Cell: fmt.Sprintf("c%d", c), Metric: "loss", Epoch: ptr(float64(b*per + i)), Value: float64(b*per + i)})
			}
		}
		if err := w.AppendPoints(ctx, "r1", pts); err != nil {
			t.Fatal(err)
		}
	}
	// Let the reader see the end.
	for n := reads.Load(); reads.Load() < n+2 && rerr == nil && time.Since(start) < time.Minute; {
		time.Sleep(time.Millisecond)
	}
	done.Store(true)
	wg.Wait()
	if rerr != nil {
		t.Fatal(rerr)
	}
	pts, err := ro.Series(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]float64{}
	for _, p := range pts {
		last[p.Cell] = p.Value
	}
	for c := range cells {
		if got := last[fmt.Sprintf("c%d", c)]; got != batches*per-1 {
			t.Errorf("cell c%d: last value %v, want %d", c, got, batches*per-1)
		}
	}
	t.Logf("%d reads while writing", reads.Load())
}

// consistent checks one read of TestSeriesReadWhileWriting.
func consistent(pts []Point, cells int) error {
	n := map[string]int64{}
	for i, p := range pts {
		if i == 0 || p.Cell != pts[i-1].Cell {
			if p.Seq != 0 {
				return fmt.Errorf("cell %s starts at arrival %d", p.Cell, p.Seq)
			}
		} else if p.Seq <= pts[i-1].Seq {
			return fmt.Errorf("cell %s: arrival %d after %d", p.Cell, p.Seq, pts[i-1].Seq)
		}
		if p.Value != float64(p.Seq) {
			return fmt.Errorf("cell %s: arrival %d holds %v", p.Cell, p.Seq, p.Value)
		}
		n[p.Cell] = p.Seq + 1
	}
	if len(n) != 0 && len(n) != cells {
		return fmt.Errorf("%d of %d cells seen: a batch read in part", len(n), cells)
	}
	var first int64 = -1
	for c, k := range n {
		if first < 0 {
			first = k
		}
		if k != first {
			return fmt.Errorf("cell %s has %d arrivals, another %d: a batch read in part", c, k, first)
		}
	}
	return nil
}

// BenchmarkAppendPoints measures appending one point, in batches of 8 (a
// poll of 8 cells), to a series kept at its bound.
func BenchmarkAppendPoints(b *testing.B) {
	ctx := b.Context()
	s := openTest(b)
	mustCreateRun(b, s, "r1")
	pts := make([]Point, 8)
	n := 0
	for b.Loop() {
		for i := range pts {
			pts[i] = Point{Cell: fmt.Sprintf("c%d", i), Node: "wait", Metric: "loss", Epoch: ptr(float64(n)), Time: at(n), Value: float64(n)}
		}
		n++
		if err := s.AppendPoints(ctx, "r1", pts); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*len(pts)), "ns/point")
}

// BenchmarkSeries measures reading a run of 8 cells of MaxPoints points.
func BenchmarkSeries(b *testing.B) {
	ctx := b.Context()
	s := openTest(b)
	mustCreateRun(b, s, "r1")
	for c := range 8 {
		pts := make([]Point, MaxPoints)
		for i := range pts {
			pts[i] = Point{Cell: fmt.Sprintf("c%d", c), Node: "wait", Metric: "loss", Epoch: ptr(float64(i)), Time: at(i), Value: float64(i)}
		}
		if err := s.AppendPoints(ctx, "r1", pts); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		pts, err := s.Series(ctx, "r1")
		if err != nil || len(pts) != 8*MaxPoints {
			b.Fatalf("%d points, %v", len(pts), err)
		}
	}
}

package state

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// TestWriterAndReader is apply and status at once: one writing Store used
// by several goroutines and a read-only Store on the same directory reading
// in a loop. No call may fail (no "database is locked"), and the reader must
// end up seeing every write.
func TestWriterAndReader(t *testing.T) {
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

	const writers, perWriter = 4, 50
	var (
		wg      sync.WaitGroup
		done    atomic.Bool
		errs    = make(chan error, writers+1)
		reads   atomic.Int64
		readers sync.WaitGroup
	)
	readers.Add(1)
	go func() {
		defer readers.Done()
		var after int64
		for !done.Load() {
			if _, err := ro.Nodes(ctx, "r1"); err != nil {
				errs <- fmt.Errorf("reader Nodes: %w", err)
				return
			}
			evs, err := ro.Events(ctx, "r1", after, 0)
			if err != nil {
				errs <- fmt.Errorf("reader Events: %w", err)
				return
			}
			if len(evs) > 0 {
				after = evs[len(evs)-1].Seq
			}
			if _, err := ro.Alive(ctx, "r1"); err != nil {
				errs <- fmt.Errorf("reader Alive: %w", err)
				return
			}
			if _, err := ro.Runs(ctx); err != nil {
				errs <- fmt.Errorf("reader Runs: %w", err)
				return
			}
			reads.Add(1)
		}
	}()
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				node := fmt.Sprintf("n%d-%d", g, i%5)
				err := w.PutNode(ctx, Node{RunID: "r1", ID: node, State: "running", Attempts: i})
				if err == nil {
					_, err = w.AppendEvent(ctx, Event{RunID: "r1", Type: "progress", Node: node})
				}
				if err == nil {
					var id int64
					id, err = w.RecordIntent(ctx, Resource{RunID: "r1", Kind: KindJob, Name: node})
					if err == nil {
						err = w.MarkCreated(ctx, id, map[string]string{"pid": fmt.Sprint(i)})
					}
				}
				if err == nil {
					err = w.AppendLog("r1", node, []byte("line\n"))
				}
				if err != nil {
					errs <- fmt.Errorf("writer %d: %w", g, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	done.Store(true)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	evs, err := ro.Events(ctx, "r1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := ro.Nodes(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != writers*perWriter || len(nodes) != writers*5 {
		t.Errorf("reader sees %d events and %d nodes, want %d and %d", len(evs), len(nodes), writers*perWriter, writers*5)
	}
	t.Logf("reader loops: %d", reads.Load())
}

// TestTwoWriters is two processes writing the same state at once (say
// apply and destroy): busy_timeout must absorb the contention.
func TestTwoWriters(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	stores := make([]*Store, 2)
	for i := range stores {
		s, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores[i] = s
	}
	mustCreateRun(t, stores[0], "r1")
	var wg sync.WaitGroup
	errs := make(chan error, len(stores))
	for i, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 100 {
				if _, err := s.AppendEvent(ctx, Event{RunID: "r1", Type: fmt.Sprintf("s%d-%d", i, j)}); err != nil {
					errs <- err
					return
				}
				// Both record the same intents: they must dedup.
				if _, err := s.RecordIntent(ctx, Resource{RunID: "r1", Kind: KindJob, Name: fmt.Sprint(j)}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	evs, err := stores[1].Events(ctx, "r1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := stores[1].Resources(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 200 || len(rs) != 100 {
		t.Errorf("got %d events and %d resources, want 200 and 100", len(evs), len(rs))
	}
}

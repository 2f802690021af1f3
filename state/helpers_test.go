package state

import (
	"sync"
	"testing"
	"time"
)

// base is the fake clock's first reading.
var base = time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)

// clock is a fake clock that advances one second per reading.
type clock struct {
	mu sync.Mutex
	n  int
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return base.Add(time.Duration(c.n) * time.Second)
}

// at is the clock's nth reading.
func at(n int) time.Time { return base.Add(time.Duration(n) * time.Second) }

// openTest opens a Store in a fresh directory with a fake clock and closes
// it when the test ends.
func openTest(t testing.TB, opts ...Option) *Store {
	t.Helper()
	s, err := Open(t.TempDir(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	s.now = (&clock{}).now
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// mustCreateRun creates a minimal run.
func mustCreateRun(t testing.TB, s *Store, id string) {
	t.Helper()
	if err := s.CreateRun(t.Context(), Run{ID: id, Name: "plan", State: RunRunning}); err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

package state

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkPutNode measures node upserts over a graph of 100 nodes, the
// engine's most frequent write (every state change and progress line).
func BenchmarkPutNode(b *testing.B) {
	ctx := context.Background()
	s := openTest(b)
	mustCreateRun(b, s, "r1")
	ids := make([]string, 100)
	for i := range ids {
		ids[i] = fmt.Sprintf("train[lr=0.%d]@gpu%d", i, i%8)
	}
	for i := 0; b.Loop(); i++ {
		n := Node{RunID: "r1", ID: ids[i%len(ids)], Step: "train", State: "running", Attempts: 1,
			Progress: fmt.Sprintf("epoch %d/10", i%10)}
		if err := s.PutNode(ctx, n); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendEvent measures appending to the event stream.
func BenchmarkAppendEvent(b *testing.B) {
	ctx := context.Background()
	s := openTest(b)
	mustCreateRun(b, s, "r1")
	e := Event{RunID: "r1", Type: "node-progress", Node: "train[lr=0.1]@gpu0", Message: "epoch 3/10",
		Data: map[string]string{"loss": "0.21"}}
	for b.Loop() {
		if _, err := s.AppendEvent(ctx, e); err != nil {
			b.Fatal(err)
		}
	}
}

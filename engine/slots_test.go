package engine_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taoflow/taoflow/engine"
)

const slotSweep = `
taoflow: 1
name: slots
instances:
  a: {slots: 2, gpus: 4}
steps:
  - id: train
    uses: run
    matrix:
      lr: [1, 2, 3, 4, 5, 6, 7]
    with:
      command: train --slot ${{ slot.index }} --gpus ${{ slot.gpus }}
      gpus: per-slot
  - {id: wait, uses: wait, needs: [train], matrix: inherit}
  - {id: upload, uses: upload-s3, needs: [wait], matrix: inherit, with: {from: ~/r, to: "file:///tmp/r"}}
`

// slotBook checks, as tasks start and end, that a slot is held by one cell
// at a time, from its cell's first node to its last.
type slotBook struct {
	mu      sync.Mutex
	holder  map[int]string // slot → cell holding it
	slotOf  map[string]int // cell → its slot
	cells   map[int]int    // slot → cells that held it
	errs    []string
	command map[string]string // node → its command as substituted
}

func (b *slotBook) do(ctx context.Context, tk *engine.Task) error {
	b.mu.Lock()
	cell := tk.Node.Cell.ID
	switch {
	case tk.Slot == nil:
		b.errs = append(b.errs, tk.Node.ID+": no slot")
	case tk.Node.Step.ID == "train":
		if h := b.holder[tk.Slot.Index]; h != "" {
			b.errs = append(b.errs, fmt.Sprintf("%s got slot %d, which cell %s still holds", tk.Node.ID, tk.Slot.Index, h))
		}
		b.holder[tk.Slot.Index] = cell
		b.slotOf[cell] = tk.Slot.Index
		b.cells[tk.Slot.Index]++
		b.command[tk.Node.ID] = tk.With.Get("command").Text
	default:
		if got, want := tk.Slot.Index, b.slotOf[cell]; got != want {
			b.errs = append(b.errs, fmt.Sprintf("%s has slot %d, its cell's train had %d", tk.Node.ID, got, want))
		}
	}
	if tk.Slot != nil {
		want := []int{2 * tk.Slot.Index, 2*tk.Slot.Index + 1} // 4 GPUs over 2 slots
		if fmt.Sprint(tk.Slot.GPUs) != fmt.Sprint(want) {
			b.errs = append(b.errs, fmt.Sprintf("%s: slot %d has GPUs %v, want %v", tk.Node.ID, tk.Slot.Index, tk.Slot.GPUs, want))
		}
	}
	b.mu.Unlock()
	// Cells end out of order, so slots are freed out of order.
	time.Sleep(time.Duration(1+(tk.Node.Cell.Index*7)%5) * time.Millisecond)
	b.mu.Lock()
	defer b.mu.Unlock()
	if tk.Node.Step.ID == "upload" && tk.Slot != nil && b.holder[tk.Slot.Index] == cell {
		b.holder[tk.Slot.Index] = ""
	}
	return nil
}

func TestSlotsPerCell(t *testing.T) {
	g := mustPlan(t, slotSweep)
	b := &slotBook{holder: map[int]string{}, slotOf: map[string]int{}, cells: map[int]int{}, command: map[string]string{}}
	f := newFake(b.do)
	s := run(t, g, f, func(c *engine.Config) {
		c.GPUs = func(inst string) int { return map[string]int{"a": 4}[inst] }
	})
	if s.Failed() {
		t.Fatalf("run failed: %v", s.Messages)
	}
	for _, e := range b.errs {
		t.Error(e)
	}
	// 7 cells over 2 slots: both slots are used, and slots are used again
	// once free (7 > 2). How many each gets depends on timing.
	if b.cells[0]+b.cells[1] != 7 || b.cells[0] < 1 || b.cells[1] < 1 {
		t.Errorf("cells per slot = %v, want 7 cells over slots 0 and 1, both used", b.cells)
	}
	for node, cmd := range b.command {
		slot := b.slotOf[g.Node(node).Cell.ID]
		want := fmt.Sprintf("train --slot %d --gpus %d,%d", slot, 2*slot, 2*slot+1)
		if cmd != want {
			t.Errorf("%s: command %q, want %q", node, cmd, want)
		}
	}
}

// TestSlotGPUsUnknown: a node that needs its slot's GPUs fails, naming
// why, when the instance's GPU count is not known (validate and preflight
// refuse the plans that lead here).
func TestSlotGPUsUnknown(t *testing.T) {
	g := mustPlan(t, slotSweep)
	f := newFake(nil)
	s := run(t, g, f, func(c *engine.Config) {
		c.GPUs = func(string) int { return 0 }
	})
	if len(f.has("start train")) != 0 {
		t.Errorf("a train node started without its GPUs: %v", f.has("start train"))
	}
	for id, msg := range s.Messages {
		if g.Node(id).Step.ID != "train" {
			continue
		}
		if want := "the GPUs of a are not known, so slot"; !strings.Contains(msg, want) {
			t.Errorf("%s: message %q, want it to hold %q", id, msg, want)
		}
	}
}

// TestSlotKeptOnResume: a cell resumed part way keeps the slot it held
// (Config.Slots), and a new cell gets the other one.
func TestSlotKeptOnResume(t *testing.T) {
	g := mustPlan(t, slotSweep)
	first := g.StepNodes("train")[0]
	var mu sync.Mutex
	got := map[string]int{}
	f := newFake(func(ctx context.Context, tk *engine.Task) error {
		mu.Lock()
		defer mu.Unlock()
		if tk.Slot != nil {
			got[tk.Node.ID] = tk.Slot.Index
		}
		return nil
	})
	s := run(t, g, f, func(c *engine.Config) {
		c.GPUs = func(string) int { return 4 }
		c.Done = map[string]string{first.ID: "a"}
		c.Slots = map[string]int{first.ID: 1}
	})
	if s.Failed() {
		t.Fatalf("run failed: %v", s.Messages)
	}
	var wait string
	for _, n := range g.StepNodes("wait") {
		if n.Cell.ID == first.Cell.ID {
			wait = n.ID
		}
	}
	if got[wait] != 1 {
		t.Errorf("%s (resumed cell) has slot %d, want 1 as recorded", wait, got[wait])
	}
	second := g.StepNodes("train")[1]
	if got[second.ID] != 0 {
		t.Errorf("%s started while slot 1 was held, got slot %d, want 0", second.ID, got[second.ID])
	}
}

package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/pricing"
)

func TestLiveViewTable(t *testing.T) {
	p, diags := plan.Parse("p.yaml", []byte(`
taoflow: 1
name: live
instances: {a: {slots: 2}}
steps:
  - id: train
    uses: run
    matrix: {lr: [0.1, 0.01]}
    with: {command: x}
  - {id: wait, uses: wait, needs: [train], matrix: inherit}
`), plan.Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	g, err := engine.Expand(p, engine.Options{RunID: "r"})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	v := newLiveView(&out, g, func() (int, int) { return 100, 30 })
	price, cost := 3.29, 0.0548
	v.mu.Lock()
	v.costs = func() (pricing.RunCost, error) {
		return pricing.RunCost{Total: cost, Instances: []pricing.InstanceCost{{Instance: "a", PricePerHour: &price, UptimeSeconds: 60, Cost: &cost}}}, nil
	}
	v.mu.Unlock()
	now := time.Now()
	v.Event(engine.Event{Time: now, Type: engine.NodePlaced, Node: "train[lr=0.1]", Instance: "a"})
	v.Event(engine.Event{Time: now, Type: engine.NodeStarted, Node: "train[lr=0.1]", Instance: "a", Attempt: 1})
	v.Event(engine.Event{Time: now, Type: engine.NodeEnded, Node: "train[lr=0.1]", Instance: "a", State: engine.Succeeded})
	v.Event(engine.Event{Time: now, Type: engine.NodeStarted, Node: "wait[lr=0.1]", Instance: "a", Attempt: 1})
	v.Event(engine.Event{Time: now, Type: engine.NodeProgress, Node: "wait[lr=0.1]", Message: "epoch 3/10 loss 0.21"})
	v.Event(engine.Event{Time: now, Type: engine.InstanceAcquire, Instance: "a"})
	v.Event(engine.Event{Time: now, Type: engine.InstanceProgress, Instance: "a", Message: "DEPLOYING (1m10s)"})
	v.Close()
	frames := strings.Split(out.String(), "\x1b[J")
	last := frames[len(frames)-1]
	for _, want := range []string{
		"NODE", "INSTANCE", "STATE", "TIME", "LAST",
		"train[lr=0.1]", "succeeded",
		"wait[lr=0.1]", "running", "epoch 3/10 loss 0.21",
		"train[lr=0.01]", "pending",
		"1 running, 2 pending, 1 succeeded",
		"instances — a: DEPLOYING (1m10s)",
		"cost ~$0.05 at list prices — a up 1m0s $0.05",
	} {
		if !strings.Contains(last, want) {
			t.Errorf("the last frame lacks %q:\n%s", want, last)
		}
	}
	for _, line := range strings.Split(last, "\n") {
		if len([]rune(line)) > 100 {
			t.Errorf("line wider than the terminal: %q", line)
		}
	}
}

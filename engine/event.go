package engine

import (
	"time"

	"github.com/taoflow/taoflow/internal/progress"
)

// NodeState is where a node is in its life.
type NodeState string

// Node states. Terminal: succeeded, failed, skipped, canceled, timed-out.
const (
	Pending   NodeState = "pending"
	Running   NodeState = "running"
	Succeeded NodeState = "succeeded"
	Failed    NodeState = "failed"
	Skipped   NodeState = "skipped"
	Canceled  NodeState = "canceled"
	TimedOut  NodeState = "timed-out"
)

// Terminal reports whether the state is final.
func (s NodeState) Terminal() bool { return s != Pending && s != Running }

// EventType names what happened.
type EventType string

// Event types.
const (
	RunStarted       EventType = "run-started"
	InstanceAcquire  EventType = "instance-acquiring"
	InstanceReady    EventType = "instance-ready"
	InstanceFailed   EventType = "instance-failed"
	InstanceRelease  EventType = "instance-releasing"
	InstanceReleased EventType = "instance-released"
	InstanceLeft     EventType = "instance-left" // release failed or refused: it may still exist
	// InstanceProgress is what a platform says while it prepares an
	// instance ("DEPLOYING (1m10s)"); the platform adapter emits it.
	InstanceProgress EventType = "instance-progress"
	NodePlaced       EventType = "node-placed"
	NodeStarted      EventType = "node-started"
	NodeRetrying     EventType = "node-retrying"
	// NodeSalvage: an upload or fetch that would not have run starts to
	// salvage the results on its instance before it goes (salvage.go).
	NodeSalvage  EventType = "node-salvage"
	NodeLog      EventType = "node-log"
	NodeProgress EventType = "node-progress"
	// NodeMetrics brings metric values a job reported (Event.Points), for
	// the run's series; the views show nothing of it.
	NodeMetrics    EventType = "node-metrics"
	NodeEnded      EventType = "node-ended"
	FinallyStarted EventType = "finally-started"
	RunEnded       EventType = "run-ended"
)

// Event is what the engine reports; it never prints. Observers receive
// events from several goroutines, one at a time.
type Event struct {
	Time     time.Time `json:"time"`
	Type     EventType `json:"type"`
	Node     string    `json:"node,omitempty"`
	Step     string    `json:"step,omitempty"`
	Instance string    `json:"instance,omitempty"`
	State    NodeState `json:"state,omitempty"`
	Attempt  int       `json:"attempt,omitempty"`
	ExitCode *int      `json:"exit_code,omitempty"`
	Message  string    `json:"message,omitempty"`
	// Progress is, on a NodeProgress event, what Message says as figures.
	Progress *progress.Figures `json:"progress,omitempty"`
	// Points are, on a NodeMetrics event, the metric values reported.
	Points []progress.Point `json:"points,omitempty"`
}

// Observer receives events.
type Observer interface {
	Event(Event)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(Event)

// Event calls f.
func (f ObserverFunc) Event(e Event) { f(e) }

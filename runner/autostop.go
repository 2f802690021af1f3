package runner

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/taoflow/taoflow/state"
	"github.com/taoflow/taoflow/steps"
)

// Autostop is what the state knows of an instance's autostop
// (docs/design.md §8.8): the preflight node that armed it, and what its
// watchdog decided when taoflow read it back. status and status --json
// show it.
type Autostop struct {
	Instance string `json:"instance"`
	Node     string `json:"node"` // the preflight node that armed it
	// Armed is the line status prints: "autostop armed: 30m after
	// taoflow leaves".
	Armed string `json:"armed"`
	// Fired is what the watchdog decided, when taoflow learned that it
	// stopped the instance; absent while it has not (or nobody looked).
	Fired *AutostopFired `json:"fired,omitempty"`
}

// AutostopFired is a watchdog's decision.
type AutostopFired struct {
	At time.Time `json:"at"`
	// Why is idle (the lease expired with no job running), max_after
	// (the ceiling passed; its jobs were stopped) or stopped (taoflow
	// found the instance stopped with the autostop armed).
	Why string `json:"why"`
	// LeaseAgeSeconds is how old the lease was when it fired (0 for
	// stopped: unknown).
	LeaseAgeSeconds int64  `json:"lease_age_seconds"`
	Text            string `json:"text"` // "stopped itself at ..."
}

// Autostops returns the autostops the nodes of a run recorded, by
// instance name.
func Autostops(nodes []state.Node) []Autostop {
	var out []Autostop
	for _, n := range nodes {
		fact := n.Facts[steps.RecordAutostop]
		if fact == "" {
			continue
		}
		a := Autostop{Instance: n.Instance, Node: n.ID, Armed: steps.AutostopArmed(fact)}
		if d, ok := steps.ParseAutostopDecision(n.Facts[steps.RecordAutostopFired]); ok {
			a.Fired = &AutostopFired{At: d.At, Why: d.Why, LeaseAgeSeconds: int64(d.Age / time.Second), Text: d.String()}
		}
		out = append(out, a)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Instance < out[j].Instance })
	return out
}

// armedNode returns the node of run that armed instance's autostop, or
// "".
func armedNode(ctx context.Context, store *state.Store, run, instance string) (state.Node, bool) {
	nodes, err := store.Nodes(ctx, run)
	if err != nil {
		return state.Node{}, false
	}
	for _, n := range nodes {
		if n.Instance == instance && n.Facts[steps.RecordAutostop] != "" {
			return n, true
		}
	}
	return state.Node{}, false
}

// recordAutostopFired records the decision of instance's watchdog on the
// node that armed it (steps.Config.OnAutostop).
func recordAutostopFired(ctx context.Context, store *state.Store, run, instance string, d steps.AutostopDecision) {
	if n, ok := armedNode(ctx, store, run, instance); ok {
		_ = store.SetNodeFact(context.WithoutCancel(ctx), run, n.ID, steps.RecordAutostopFired, d.Fact())
	}
}

// foundStopped records, for an instance taoflow finds stopped while its
// autostop was armed and no decision was read, that it stopped itself:
// its watchdog's own record is on its disk, out of reach. It returns the
// line to report ("" when the instance had no autostop).
func foundStopped(ctx context.Context, store *state.Store, run, instance string) string {
	n, ok := armedNode(ctx, store, run, instance)
	if !ok {
		return ""
	}
	if d, ok := steps.ParseAutostopDecision(n.Facts[steps.RecordAutostopFired]); ok {
		return d.String()
	}
	d := steps.AutostopDecision{At: time.Now().UTC().Truncate(time.Second), Why: "stopped"}
	_ = store.SetNodeFact(context.WithoutCancel(ctx), run, n.ID, steps.RecordAutostopFired, d.Fact())
	return d.String()
}

// autostopLine is how a decision is told to the view.
func autostopLine(d steps.AutostopDecision) string {
	return "autostop: " + strings.TrimSpace(d.String())
}

// autostopArmed reports whether a node of nodes armed instance's autostop.
func autostopArmed(nodes []state.Node, instance string) bool {
	for _, n := range nodes {
		if n.Instance == instance && n.Facts[steps.RecordAutostop] != "" {
			return true
		}
	}
	return false
}

package runner

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
	"github.com/taoflow/taoflow/steps"
)

// PlaceholderRunID stands for the run id in what is checked or shown
// before apply makes one (plan --commands shows the same).
const PlaceholderRunID = "RUN"

// withKeyRE finds the with: key a step's settings error names.
var withKeyRE = regexp.MustCompile(`\bwith\.([A-Za-z_]+)`)

// CheckSettings checks the settings of every node of g as its step will
// read them when it runs (steps.CheckSettings), rendered as apply renders
// them, with PlaceholderRunID for ${{ run.id }} and INSTANCE for the
// instance a cell will be placed on: a with: value that mixes a --var
// with an apply-time value is checked here, before anything is created,
// not by the step after the training. stateDir is the state directory no
// fetch may replace. Of the nodes of one step that fail, the first is
// reported (at the with: key its error names, else at the step's id) and
// the others counted. validate, plan and apply all call it: an error is
// exit 2 with nothing started.
func CheckSettings(g *engine.Graph, stateDir string) plan.Diagnostics {
	cwd, _ := os.Getwd()
	st := steps.New(steps.Config{Plan: g.Plan, RunID: PlaceholderRunID, BaseDir: cwd, Owner: "HOST:PID", StateDir: stateDir})
	type failure struct {
		node   *engine.Node
		err    error
		others int
	}
	var order []string
	failed := map[string]*failure{}
	for _, n := range g.Nodes {
		err := st.CheckSettings(settingsRequest(g, n))
		switch f := failed[n.Step.ID]; {
		case err == nil:
		case f != nil:
			f.others++
		default:
			failed[n.Step.ID] = &failure{node: n, err: err}
			order = append(order, n.Step.ID)
		}
	}
	var out plan.Diagnostics
	for _, id := range order {
		f := failed[id]
		s := f.node.Step
		pos := s.IDPos
		if m := withKeyRE.FindStringSubmatch(f.err.Error()); m != nil && s.With != nil {
			if fld := s.With.Field(m[1]); fld != nil {
				pos = fld.Value.Pos
			}
		}
		msg := fmt.Sprintf("step %q would fail when it runs, after what runs before it: %v", s.ID, f.err)
		if f.node.ID != s.ID {
			msg = fmt.Sprintf("step %q would fail when it runs, after what runs before it (node %s): %v", s.ID, f.node.ID, f.err)
		}
		if strings.Contains(msg, PlaceholderRunID) || strings.Contains(msg, "INSTANCE") {
			msg += fmt.Sprintf(" (%s stands for the run id, INSTANCE for the instance a cell is placed on, as plan --commands shows them)", PlaceholderRunID)
		}
		switch {
		case f.others == 1:
			msg += " (and 1 more node of this step)"
		case f.others > 1:
			msg += fmt.Sprintf(" (and %d more nodes of this step)", f.others)
		}
		out = append(out, plan.Diagnostic{Pos: pos, Severity: plan.Error, Message: msg})
	}
	return out
}

// settingsRequest is PreviewRequest without the upstream jobs, which no
// settings check reads (a wait's are its needs, checked by validate).
func settingsRequest(g *engine.Graph, n *engine.Node) steps.Request {
	inst := n.Instance
	if inst == "" {
		inst = "INSTANCE"
	}
	var slot *engine.Slot
	if n.Cell != nil {
		name := n.Instance
		if g.Plan.Instance(name) == nil && len(n.Pool) > 0 {
			name = n.Pool[0]
		}
		if in := g.Plan.Instance(name); in != nil {
			slot = &engine.Slot{Index: 0, GPUs: plan.SlotGPUs(max(in.GPUs, in.Slots), in.Slots, 0)}
		}
	}
	return StepRequest(g, PlaceholderRunID, n, platform.Instance{Name: inst}, g.With(n, engine.Scope{RunID: PlaceholderRunID, Instance: inst, Slot: slot}), nil, slot)
}

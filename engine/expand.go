package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/taoflow/taoflow/internal/shellquote"
	"github.com/taoflow/taoflow/plan"
)

// Graph is a plan expanded into nodes, in a stable order: steps in file
// order (per instance in instance order, cells in matrix order), then
// finalizers.
type Graph struct {
	Plan  *plan.Plan
	RunID string
	Nodes []*Node

	byID   map[string]*Node
	byStep map[string][]*Node
}

// Node is one unit of work: a step on one instance, or one matrix cell.
type Node struct {
	ID       string
	Step     *plan.Step
	Instance string   // fixed instance; empty for a cell, which is placed at run time
	Pool     []string // cells: the instances the cell may be placed on
	Cell     *Cell    // matrix cell, nil for per-instance nodes
	Root     string   // inheriting cells: the node whose placement they follow
	Finally  bool
	Needs    []Dep
	JobID    string // run nodes: the job id (= container name), deterministic
}

// Cell is one combination of a matrix's values.
type Cell struct {
	ID     string // stable and path-safe: lr-0.001_backbone-resnet18
	Index  int
	Values []CellValue
	Group  string // the step whose matrix this is
}

// CellValue is one key=value of a cell.
type CellValue struct {
	Key, Value string
}

// DepKind tells how a dependency is resolved.
type DepKind int

// Dependency kinds.
const (
	// DepNode: the named node must have succeeded.
	DepNode DepKind = iota
	// DepPlaced: every cell of Step placed on this node's instance must have
	// succeeded, once every cell of Step is placed.
	DepPlaced
	// DepInstance: the node of per-instance Step on the instance this cell
	// is placed on must have succeeded (every node of Step when it doesn't
	// run there).
	DepInstance
)

// Dep is one dependency of a node.
type Dep struct {
	Kind DepKind
	Node string // DepNode
	Step string // DepPlaced, DepInstance
}

func (d Dep) String() string {
	switch d.Kind {
	case DepPlaced:
		return d.Step + "[cells placed here]"
	case DepInstance:
		return d.Step + "@<its instance>"
	default:
		return d.Node
	}
}

// Options of an expansion.
type Options struct {
	// RunID substitutes ${{ run.id }} and names jobs; empty keeps the
	// expression visible (a preview).
	RunID string
}

// Expand turns a checked plan into its node graph. The plan must have no
// errors. Expansion does no I/O.
func Expand(p *plan.Plan, opts Options) (*Graph, error) {
	g := &Graph{Plan: p, RunID: opts.RunID, byID: map[string]*Node{}, byStep: map[string][]*Node{}}
	cells := map[string][]*Cell{} // matrix root step id → its cells
	roots := map[string]*plan.Step{}
	for _, s := range p.AllSteps() {
		switch root := p.MatrixRoot(s); root {
		case nil:
			for _, inst := range p.Pool(s) {
				n := &Node{ID: s.ID + "@" + inst, Step: s, Instance: inst, Finally: s.Finally}
				g.add(n)
			}
		default:
			roots[s.ID] = root
			cs, ok := cells[root.ID]
			if !ok {
				var err error
				cs, err = makeCells(root)
				if err != nil {
					return nil, err
				}
				cells[root.ID] = cs
			}
			for _, c := range cs {
				n := &Node{ID: cellNodeID(s.ID, c), Step: s, Cell: c, Pool: p.Pool(root), Finally: s.Finally}
				if root != s {
					n.Root = cellNodeID(root.ID, c)
				}
				g.add(n)
			}
		}
	}
	jobs := map[string]*Node{}
	for _, n := range g.Nodes {
		n.Needs = g.pair(n, roots)
		if n.Step.Uses == plan.KindRun {
			n.JobID = JobID(g.runID(), n)
			// Job ids are injective (plan.JobID); a clash would make one
			// node adopt another's job instead of running its command.
			if other, dup := jobs[n.JobID]; dup {
				return nil, fmt.Errorf("%s: nodes %s and %s would launch the same job %s", n.Step.IDPos, other.ID, n.ID, n.JobID)
			}
			jobs[n.JobID] = n
		}
	}
	return g, nil
}

func (g *Graph) add(n *Node) {
	g.Nodes = append(g.Nodes, n)
	g.byID[n.ID] = n
	g.byStep[n.Step.ID] = append(g.byStep[n.Step.ID], n)
}

// Node returns the node with the given id, or nil.
func (g *Graph) Node(id string) *Node { return g.byID[id] }

// Upstream resolves node n's dependencies for the instance it runs on,
// with placed telling where each node ran (or runs). It is the one rule
// for the run (engine) and the plan preview, which knows no placement yet:
// there a cell's instance is "", and the nodes that hang on where it lands
// (DepInstance) are left out.
func (g *Graph) Upstream(n *Node, instance string, placed func(*Node) string) []Upstream {
	var out []Upstream
	add := func(t *Node) { out = append(out, Upstream{Node: t, Instance: placed(t)}) }
	for _, d := range n.Needs {
		switch d.Kind {
		case DepNode:
			add(g.byID[d.Node])
		case DepPlaced:
			for _, t := range g.StepNodes(d.Step) {
				if placed(t) == instance {
					add(t)
				}
			}
		case DepInstance:
			if instance == "" {
				continue
			}
			if t := g.byID[d.Step+"@"+instance]; t != nil {
				add(t)
				continue
			}
			for _, t := range g.StepNodes(d.Step) {
				add(t)
			}
		}
	}
	return out
}

// StepNodes returns the nodes of a step in order.
func (g *Graph) StepNodes(step string) []*Node { return g.byStep[step] }

func (g *Graph) runID() string {
	if g.RunID == "" {
		return "RUN"
	}
	return g.RunID
}

// pair computes a node's dependencies (docs/design.md §4.2, "Pairing of needs").
func (g *Graph) pair(n *Node, roots map[string]*plan.Step) []Dep {
	var deps []Dep
	for _, need := range n.Step.Needs {
		t := g.Plan.Step(need.Name)
		if t == nil {
			continue
		}
		tNodes := g.byStep[t.ID]
		tRoot := roots[t.ID]
		switch {
		case n.Cell == nil && tRoot == nil: // per-instance needs per-instance
			if slices.Contains(g.Plan.Pool(t), n.Instance) {
				deps = append(deps, Dep{Kind: DepNode, Node: t.ID + "@" + n.Instance})
			} else {
				deps = appendAll(deps, tNodes)
			}
		case n.Cell == nil: // per-instance needs cells
			if slices.Contains(g.Plan.Pool(tRoot), n.Instance) {
				deps = append(deps, Dep{Kind: DepPlaced, Step: t.ID})
			} else {
				deps = appendAll(deps, tNodes)
			}
		case tRoot == nil: // cell needs per-instance
			deps = append(deps, Dep{Kind: DepInstance, Step: t.ID})
		case tRoot.ID == n.Cell.Group: // same matrix: cell by cell
			deps = append(deps, Dep{Kind: DepNode, Node: cellNodeID(t.ID, n.Cell)})
		default: // another matrix: all of its cells
			deps = appendAll(deps, tNodes)
		}
	}
	return deps
}

func appendAll(deps []Dep, nodes []*Node) []Dep {
	for _, t := range nodes {
		deps = append(deps, Dep{Kind: DepNode, Node: t.ID})
	}
	return deps
}

// makeCells lists a matrix's cells, first key outermost.
func makeCells(s *plan.Step) ([]*Cell, error) {
	total := s.Matrix.Cells()
	if total > plan.MaxCells {
		// validate refuses such a plan (plan.MaxCells): not reached for a
		// checked plan.
		return nil, fmt.Errorf("step %q: the matrix has more than %d cells", s.ID, plan.MaxCells)
	}
	out := make([]*Cell, 0, total)
	idx := make([]int, len(s.Matrix.Axes))
	for i := 0; i < total; i++ {
		c := &Cell{Index: i, Group: s.ID}
		for a, ax := range s.Matrix.Axes {
			c.Values = append(c.Values, CellValue{Key: ax.Name, Value: ax.Values[idx[a]]})
		}
		out = append(out, c)
		for a := len(idx) - 1; a >= 0; a-- {
			idx[a]++
			if idx[a] < len(s.Matrix.Axes[a].Values) {
				break
			}
			idx[a] = 0
		}
	}
	seen := map[string]int{}
	for _, c := range out {
		seen[readableCellID(c)]++
	}
	for _, c := range out {
		id := readableCellID(c)
		if seen[id] > 1 || len(id) > 48 {
			sum := sha256.Sum256([]byte(cellKey(c)))
			id = "cell" + strconv.Itoa(c.Index) + "-" + hex.EncodeToString(sum[:])[:8]
		}
		c.ID = id
	}
	return out, nil
}

func cellKey(c *Cell) string {
	var b strings.Builder
	for i, v := range c.Values {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(v.Key + "=" + v.Value)
	}
	return b.String()
}

func readableCellID(c *Cell) string {
	parts := make([]string, len(c.Values))
	for i, v := range c.Values {
		parts[i] = v.Key + "-" + sanitize(v.Value, "-")
	}
	return strings.Join(parts, "_")
}

func cellNodeID(step string, c *Cell) string { return step + "[" + cellKey(c) + "]" }

// sanitize keeps [A-Za-z0-9.-] and replaces runs of anything else with sep.
func sanitize(s, sep string) string {
	var b strings.Builder
	lastSep := false
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			b.WriteRune(r)
			lastSep = false
			continue
		}
		if !lastSep {
			b.WriteString(sep)
			lastSep = true
		}
	}
	return b.String()
}

// JobID names the job (and container) of a run node (plan.JobID).
func JobID(run string, n *Node) string {
	suffix := n.Instance
	if n.Cell != nil {
		suffix = n.Cell.ID
	}
	return plan.JobID(run, n.Step.ID, suffix)
}

// Scope is what a node's ${{ }} expressions can see.
type Scope struct {
	RunID    string
	Instance string // empty for a cell not yet placed
	// Slot is the slot the node's cell holds; nil before placement (slot.*
	// then stays an expression) or for a node of no cell.
	Slot *Slot
}

// With returns the node's with: values with every expression substituted
// for the given instance (empty: a cell not yet placed; instance.name stays
// an expression). Shell fields get each substituted value as one quoted word.
func (g *Graph) With(n *Node, sc Scope) *plan.Value {
	if n.Step.With == nil {
		return nil
	}
	lookup := func(r plan.Ref) (string, bool) {
		switch r.NS {
		case plan.NSVars:
			return g.Plan.Var(r.Name)
		case plan.NSMatrix:
			if n.Cell != nil {
				for _, v := range n.Cell.Values {
					if v.Key == r.Name {
						return v.Value, true
					}
				}
			}
		case plan.NSCell:
			if n.Cell != nil && r.Name == "id" {
				return n.Cell.ID, true
			}
			if n.Cell != nil && r.Name == "index" {
				return strconv.Itoa(n.Cell.Index), true
			}
		case plan.NSSlot:
			switch {
			case sc.Slot == nil:
			case r.Name == "index":
				return strconv.Itoa(sc.Slot.Index), true
			case r.Name == "gpus" && sc.Slot.GPUs != nil:
				return plan.DeviceList(sc.Slot.GPUs), true
			}
		case plan.NSRun:
			if sc.RunID != "" {
				return sc.RunID, true
			}
		case plan.NSPlan:
			if r.Name == "dir" {
				return g.Plan.Dir(), true
			}
		case plan.NSInstance:
			inst := n.Instance
			if inst == "" {
				inst = sc.Instance
			}
			if inst != "" {
				return inst, true
			}
		}
		return "", false
	}
	return plan.Substitute(n.Step.With, n.Step.Uses, lookup, shellquote.Quote)
}

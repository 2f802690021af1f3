package dag

import (
	"slices"
	"strings"
)

// Graph is a directed graph of nodes named by strings. An edge from a
// dependent to a dependency is added with Connect. The zero value is an
// empty graph ready to use; a Graph is not safe for concurrent mutation.
type Graph struct {
	ids   []string       // insertion order
	index map[string]int // id → position in ids

	needs      [][]int // needs[v]: dependencies of v, in Connect order
	dependents [][]int // dependents[v]: nodes that need v, in Connect order
	edges      map[uint64]struct{}
	selfLoop   []bool
}

// New returns an empty graph.
func New() *Graph { return &Graph{} }

// AddNode adds id if it is not in the graph yet. Adding a node twice is a
// no-op: its position in the insertion order is that of the first call.
func (g *Graph) AddNode(id string) { g.add(id) }

func (g *Graph) add(id string) int {
	if i, ok := g.index[id]; ok {
		return i
	}
	if g.index == nil {
		g.index = map[string]int{}
		g.edges = map[uint64]struct{}{}
	}
	i := len(g.ids)
	g.index[id] = i
	g.ids = append(g.ids, id)
	g.needs = append(g.needs, nil)
	g.dependents = append(g.dependents, nil)
	g.selfLoop = append(g.selfLoop, false)
	return i
}

// Connect records that dependent needs dependency: dependency comes first
// in TopoOrder. Nodes that are not in the graph yet are added, dependent
// first. A repeated edge is ignored; Connect(a, a) is a self-loop, which is
// a cycle.
func (g *Graph) Connect(dependent, dependency string) {
	from, to := g.add(dependent), g.add(dependency)
	key := uint64(from)<<32 | uint64(uint32(to))
	if _, dup := g.edges[key]; dup {
		return
	}
	g.edges[key] = struct{}{}
	g.needs[from] = append(g.needs[from], to)
	g.dependents[to] = append(g.dependents[to], from)
	if from == to {
		g.selfLoop[from] = true
	}
}

// Has reports whether id is a node of the graph.
func (g *Graph) Has(id string) bool {
	_, ok := g.index[id]
	return ok
}

// Len is the number of nodes.
func (g *Graph) Len() int { return len(g.ids) }

// Nodes returns every node in insertion order.
func (g *Graph) Nodes() []string { return slices.Clone(g.ids) }

// Needs returns the direct dependencies of id, sorted; nil for an unknown
// id.
func (g *Graph) Needs(id string) []string {
	i, ok := g.index[id]
	if !ok {
		return nil
	}
	return g.sortedNames(g.needs[i])
}

// Dependents returns the nodes that directly need id, sorted; nil for an
// unknown id.
func (g *Graph) Dependents(id string) []string {
	i, ok := g.index[id]
	if !ok {
		return nil
	}
	return g.sortedNames(g.dependents[i])
}

func (g *Graph) sortedNames(idx []int) []string {
	out := make([]string, len(idx))
	for k, i := range idx {
		out[k] = g.ids[i]
	}
	slices.Sort(out)
	return out
}

// Ancestors returns every node id needs, directly or transitively, in
// insertion order. id itself is included only when it lies on a cycle.
func (g *Graph) Ancestors(id string) []string { return g.reach(id, g.needs) }

// Descendants returns every node that needs id, directly or transitively,
// in insertion order. id itself is included only when it lies on a cycle.
func (g *Graph) Descendants(id string) []string { return g.reach(id, g.dependents) }

func (g *Graph) reach(id string, adj [][]int) []string {
	start, ok := g.index[id]
	if !ok {
		return nil
	}
	seen := make([]bool, len(g.ids))
	var found []int
	queue := []int{start}
	for len(queue) > 0 {
		v := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for _, w := range adj[v] {
			if !seen[w] {
				seen[w] = true
				found = append(found, w)
				queue = append(queue, w)
			}
		}
	}
	slices.Sort(found)
	out := make([]string, len(found))
	for k, i := range found {
		out[k] = g.ids[i]
	}
	return out
}

// CycleError is returned by TopoOrder for a graph with cycles. Cycles is
// what Graph.Cycles returns.
type CycleError struct {
	Cycles [][]string
}

// Error reads "cycle: a -> b -> c -> a", with further cycles after "; ".
func (e *CycleError) Error() string {
	var b strings.Builder
	b.WriteString("cycle: ")
	for k, c := range e.Cycles {
		if k > 0 {
			b.WriteString("; ")
		}
		b.WriteString(strings.Join(c, " -> "))
	}
	return b.String()
}

// TopoOrder returns every node, each after all the nodes it needs (Kahn's
// algorithm). Among nodes that are ready at the same time the one added
// first comes first, so the order is deterministic and follows insertion
// order wherever the edges allow. A graph with a cycle returns a
// *CycleError.
func (g *Graph) TopoOrder() ([]string, error) {
	n := len(g.ids)
	pending := make([]int, n) // unmet dependencies
	var ready minHeap
	for v := range n {
		pending[v] = len(g.needs[v])
		if pending[v] == 0 {
			ready = append(ready, v) // ascending, so already a heap
		}
	}
	out := make([]string, 0, n)
	for len(ready) > 0 {
		v := ready.pop()
		out = append(out, g.ids[v])
		for _, d := range g.dependents[v] {
			pending[d]--
			if pending[d] == 0 {
				ready.push(d)
			}
		}
	}
	if len(out) < n {
		return nil, &CycleError{Cycles: g.Cycles()}
	}
	return out, nil
}

// minHeap is a binary min-heap of node indices.
type minHeap []int

func (h *minHeap) push(v int) {
	*h = append(*h, v)
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if a[p] <= a[i] {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

func (h *minHeap) pop() int {
	a := *h
	top := a[0]
	last := len(a) - 1
	a[0] = a[last]
	a = a[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(a) && a[l] < a[m] {
			m = l
		}
		if r < len(a) && a[r] < a[m] {
			m = r
		}
		if m == i {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return top
}

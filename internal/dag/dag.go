package dag

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

// Connect records that dependent needs dependency. Nodes that are not in the graph yet are added, dependent
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

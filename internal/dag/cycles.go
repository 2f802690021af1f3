package dag

import (
	"cmp"
	"slices"
)

// Cycles returns one cycle per strongly connected component of more than
// one node, and one per self-loop, each as a closed path in the direction
// of Connect: [a b c a] means a needs b, b needs c and c needs a; a
// self-loop reads [a a].
//
// The order is stable: each cycle starts at its node that was added first,
// and cycles are ordered by that node's insertion position (a self-loop
// before a longer cycle starting at the same node). The path reported for
// a component is a shortest cycle through its first node, following
// dependencies in insertion order. nil means the graph is acyclic.
func (g *Graph) Cycles() [][]string {
	type found struct {
		path []int
	}
	var cycles []found
	for v, self := range g.selfLoop {
		if self {
			cycles = append(cycles, found{[]int{v, v}})
		}
	}
	comp := make([]int, len(g.ids)) // component number + 1, 0 when trivial
	for c, members := range g.components() {
		for _, v := range members {
			comp[v] = c + 1
		}
		cycles = append(cycles, found{g.shortestCycle(slices.Min(members), comp)})
	}
	if len(cycles) == 0 {
		return nil
	}
	slices.SortFunc(cycles, func(a, b found) int {
		return cmp.Or(cmp.Compare(a.path[0], b.path[0]), cmp.Compare(len(a.path), len(b.path)))
	})
	out := make([][]string, len(cycles))
	for k, c := range cycles {
		out[k] = make([]string, len(c.path))
		for j, v := range c.path {
			out[k][j] = g.ids[v]
		}
	}
	return out
}

// components returns the strongly connected components with more than one
// node (Tarjan's algorithm, with an explicit call stack).
func (g *Graph) components() [][]int {
	n := len(g.ids)
	const unvisited = -1
	index := make([]int, n)
	low := make([]int, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = unvisited
	}
	type frame struct{ v, next int }
	var (
		stack []int
		calls []frame
		comps [][]int
		count int
	)
	visit := func(v int) {
		index[v], low[v] = count, count
		count++
		stack = append(stack, v)
		onStack[v] = true
		calls = append(calls, frame{v: v})
	}
	for root := range n {
		if index[root] != unvisited {
			continue
		}
		visit(root)
		for len(calls) > 0 {
			f := &calls[len(calls)-1]
			v := f.v
			if f.next < len(g.needs[v]) {
				w := g.needs[v][f.next]
				f.next++
				switch {
				case index[w] == unvisited:
					visit(w)
				case onStack[w]:
					low[v] = min(low[v], index[w])
				}
				continue
			}
			calls = calls[:len(calls)-1]
			if len(calls) > 0 {
				u := calls[len(calls)-1].v
				low[u] = min(low[u], low[v])
			}
			if low[v] != index[v] {
				continue
			}
			k := len(stack) - 1
			for stack[k] != v {
				k--
			}
			members := stack[k:]
			for _, m := range members {
				onStack[m] = false
			}
			if len(members) > 1 {
				comps = append(comps, slices.Clone(members))
			}
			stack = stack[:k]
		}
	}
	return comps
}

// shortestCycle finds, by breadth-first search inside start's component,
// a shortest closed path from start back to start, ignoring self-loops.
func (g *Graph) shortestCycle(start int, comp []int) []int {
	c := comp[start]
	parent := map[int]int{start: -1}
	queue := []int{start}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		next := slices.Clone(g.needs[v])
		slices.Sort(next)
		for _, w := range next {
			if comp[w] != c || w == v {
				continue
			}
			if w == start {
				var rev []int
				for x := v; x != -1; x = parent[x] {
					rev = append(rev, x)
				}
				slices.Reverse(rev)
				return append(rev, start)
			}
			if _, seen := parent[w]; !seen {
				parent[w] = v
				queue = append(queue, w)
			}
		}
	}
	panic("dag: strongly connected component without a cycle") // unreachable
}

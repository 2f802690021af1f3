package dag

import (
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// build makes a graph from nodes (added first, in order) and edges written
// "dependent>dependency".
func build(nodes []string, edges ...string) *Graph {
	g := New()
	for _, n := range nodes {
		g.AddNode(n)
	}
	for _, e := range edges {
		var from, to string
		for i := range e {
			if e[i] == '>' {
				from, to = e[:i], e[i+1:]
			}
		}
		g.Connect(from, to)
	}
	return g
}

func TestCycles(t *testing.T) {
	tests := map[string]struct {
		nodes []string
		edges []string
		want  [][]string
	}{
		"empty":         {want: nil},
		"no edges":      {nodes: []string{"a", "b"}, want: nil},
		"self loop":     {nodes: []string{"a", "b"}, edges: []string{"b>a", "b>b"}, want: [][]string{{"b", "b"}}},
		"two nodes":     {nodes: []string{"a", "b"}, edges: []string{"a>b", "b>a"}, want: [][]string{{"a", "b", "a"}}},
		"three nodes":   {nodes: []string{"a", "b", "c"}, edges: []string{"a>b", "b>c", "c>a"}, want: [][]string{{"a", "b", "c", "a"}}},
		"rotated start": {nodes: []string{"x", "y", "z"}, edges: []string{"z>x", "y>z", "x>y"}, want: [][]string{{"x", "y", "z", "x"}}},
		"starts at first added, not smallest name": {
			nodes: []string{"zeta", "alpha"},
			edges: []string{"alpha>zeta", "zeta>alpha"},
			want:  [][]string{{"zeta", "alpha", "zeta"}},
		},
		"two disjoint cycles in insertion order": {
			nodes: []string{"p", "c1", "c2", "q", "d1", "d2"},
			// the later cycle's edges are added first: order must still follow nodes
			edges: []string{"d1>d2", "d2>d1", "c2>c1", "c1>c2", "q>p"},
			want:  [][]string{{"c1", "c2", "c1"}, {"d1", "d2", "d1"}},
		},
		"self loop and cycle through the same node": {
			nodes: []string{"a", "b"},
			edges: []string{"a>b", "b>a", "a>a"},
			want:  [][]string{{"a", "a"}, {"a", "b", "a"}},
		},
		"self loop inside a larger component is reported too": {
			nodes: []string{"a", "b", "c"},
			edges: []string{"a>b", "b>c", "c>a", "b>b"},
			want:  [][]string{{"a", "b", "c", "a"}, {"b", "b"}},
		},
		"shortest cycle through the first node": {
			nodes: []string{"a", "b", "c", "d"},
			edges: []string{"a>b", "b>c", "c>d", "d>a", "b>a"},
			want:  [][]string{{"a", "b", "a"}},
		},
		"diamond without cycle": {
			nodes: []string{"top", "left", "right", "bottom"},
			edges: []string{"left>top", "right>top", "bottom>left", "bottom>right"},
			want:  nil,
		},
		"cycle downstream of acyclic part": {
			nodes: []string{"root", "a", "b"},
			edges: []string{"a>root", "a>b", "b>a"},
			want:  [][]string{{"a", "b", "a"}},
		},
		"duplicate edges": {
			nodes: []string{"a", "b"},
			edges: []string{"a>b", "a>b", "b>a"},
			want:  [][]string{{"a", "b", "a"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := build(tc.nodes, tc.edges...)
			if diff := cmp.Diff(tc.want, g.Cycles()); diff != "" {
				t.Errorf("Cycles() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// chain builds n0 ← n1 ← … ← n(n-1): each node needs the previous one,
// added in reverse so that insertion order and topological order disagree.
func chain(n int) *Graph {
	g := New()
	for i := n - 1; i >= 0; i-- {
		g.AddNode("n" + strconv.Itoa(i))
	}
	for i := 1; i < n; i++ {
		g.Connect("n"+strconv.Itoa(i), "n"+strconv.Itoa(i-1))
	}
	return g
}

func TestLongChain(t *testing.T) {
	const n = 100_000
	g := chain(n)
	if c := g.Cycles(); c != nil {
		t.Fatalf("Cycles() = %v on a chain", c[0][:3])
	}

	// Closing the chain makes one cycle through all nodes; Tarjan must not
	// recurse 100k deep, and the cycle starts at the first node added.
	g.Connect("n0", "n99999")
	cycles := g.Cycles()
	if len(cycles) != 1 || len(cycles[0]) != n+1 {
		t.Fatalf("got %d cycles, want one of %d steps", len(cycles), n+1)
	}
	if diff := cmp.Diff([]string{"n99999", "n99998", "n99997"}, cycles[0][:3]); diff != "" {
		t.Errorf("cycle start mismatch (-want +got):\n%s", diff)
	}
	if last := cycles[0][n]; last != "n99999" {
		t.Errorf("cycle not closed: ends at %s", last)
	}
}

func TestZeroValue(t *testing.T) {
	var g Graph
	g.Connect("b", "a")
	g.Connect("a", "b")
	if diff := cmp.Diff([][]string{{"b", "a", "b"}}, g.Cycles()); diff != "" {
		t.Errorf("Cycles() of a zero Graph (-want +got):\n%s", diff)
	}
}

// wide builds n nodes with about 2n edges: node i needs nodes i/2 and
// 7i/11, a shape with many ready ties.
func wide(n int) *Graph {
	g := New()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "node-" + strconv.Itoa(i)
		g.AddNode(ids[i])
	}
	for i := 1; i < n; i++ {
		g.Connect(ids[i], ids[i/2])
		g.Connect(ids[i], ids[i*7/11])
	}
	return g
}

func TestLargeGraph(t *testing.T) {
	g := wide(100_000)
	if c := g.Cycles(); c != nil {
		t.Fatalf("Cycles() = %d cycles on an acyclic graph", len(c))
	}
	g.Connect("node-1", "node-99999") // node-99999 needs node-1 by way of node-3, node-7, …
	if c := g.Cycles(); len(c) != 1 || c[0][0] != "node-1" || c[0][len(c[0])-1] != "node-1" {
		t.Fatalf("Cycles() = %d cycles, want one from node-1", len(c))
	}
}

func BenchmarkCycles10k(b *testing.B) {
	g := wide(10_000)
	for i := range 9_999 { // with i → i+1 every node is in one component
		g.Connect("node-"+strconv.Itoa(i), "node-"+strconv.Itoa(i+1))
	}
	for b.Loop() {
		if c := g.Cycles(); len(c) != 1 {
			b.Fatalf("got %d cycles", len(c))
		}
	}
}

package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/taoflow/taoflow/engine"
)

func newGraphCmd(sio stdio) *cobra.Command {
	var format string
	var vf varFlags
	cmd := &cobra.Command{
		Use:   "graph PLAN",
		Short: "Draw the node graph of a plan as Mermaid or Graphviz DOT",
		Long: `Graph prints the expanded node graph of PLAN. Solid edges are fixed
dependencies; dashed edges are resolved when a matrix cell is placed on an
instance ("same instance": a cell needs the per-instance node of the instance
it lands on; "placed here": a per-instance node waits for the cells placed on
its instance). Finalizers run after every step on their instance has ended.

  taoflow graph plan.yaml > graph.mmd                  (Mermaid, the default)
  taoflow graph plan.yaml --format dot | dot -Tsvg > graph.svg`,
		Args:              argsRange(1, 1),
		ValidArgsFunction: planFileCompletion,
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "mermaid" && format != "dot" {
				return usageError(fmt.Errorf("--format %q: use mermaid or dot", format))
			}
			_, g, err := loadPlan(sio, args[0], vf)
			if err != nil {
				return err
			}
			// Node ids carry matrix values: escaped as apply and status
			// escape them.
			w := escapeWriter{sio.out}
			if format == "dot" {
				writeDOT(w, g)
			} else {
				writeMermaid(w, g)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "mermaid", "output format: `mermaid` or dot")
	vf.register(cmd)
	_ = cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]string{"mermaid", "dot"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// edge is one drawn dependency: from must end before to starts.
type edge struct {
	from, to string
	label    string // empty for a fixed dependency
}

func graphEdges(g *engine.Graph) []edge {
	var out []edge
	for _, n := range g.Nodes {
		for _, d := range n.Needs {
			switch d.Kind {
			case engine.DepNode:
				out = append(out, edge{from: d.Node, to: n.ID})
			case engine.DepInstance:
				for _, t := range g.StepNodes(d.Step) {
					out = append(out, edge{from: t.ID, to: n.ID, label: "same instance"})
				}
			case engine.DepPlaced:
				for _, t := range g.StepNodes(d.Step) {
					out = append(out, edge{from: t.ID, to: n.ID, label: "placed here"})
				}
			}
		}
	}
	return out
}

func writeMermaid(w io.Writer, g *engine.Graph) {
	ids := map[string]string{}
	fmt.Fprintln(w, "flowchart TD")
	for i, n := range g.Nodes {
		ids[n.ID] = fmt.Sprintf("n%d", i)
		label := n.ID
		if n.Finally {
			label = "finally: " + label
		}
		fmt.Fprintf(w, "  n%d[\"%s\"]\n", i, mermaidEscape(label))
	}
	for _, e := range graphEdges(g) {
		if e.label == "" {
			fmt.Fprintf(w, "  %s --> %s\n", ids[e.from], ids[e.to])
		} else {
			fmt.Fprintf(w, "  %s -. %s .-> %s\n", ids[e.from], e.label, ids[e.to])
		}
	}
}

func mermaidEscape(s string) string {
	return strings.NewReplacer(`"`, "#quot;", "<", "#lt;", ">", "#gt;").Replace(s)
}

func writeDOT(w io.Writer, g *engine.Graph) {
	fmt.Fprintf(w, "digraph %s {\n  rankdir=TB;\n  node [shape=box];\n", dotQuote(g.Plan.Name))
	for _, n := range g.Nodes {
		attrs := ""
		if n.Finally {
			attrs = " [style=rounded]"
		}
		fmt.Fprintf(w, "  %s%s;\n", dotQuote(n.ID), attrs)
	}
	for _, e := range graphEdges(g) {
		if e.label == "" {
			fmt.Fprintf(w, "  %s -> %s;\n", dotQuote(e.from), dotQuote(e.to))
		} else {
			fmt.Fprintf(w, "  %s -> %s [style=dashed, label=%s];\n", dotQuote(e.from), dotQuote(e.to), dotQuote(e.label))
		}
	}
	fmt.Fprintln(w, "}")
}

func dotQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

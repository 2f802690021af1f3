package plan

import (
	"strings"

	"github.com/taoflow/taoflow/internal/dag"
)

// cycles reports each dependency cycle among steps once, at the step the
// cycle starts from in file order.
func (c *checker) cycles() {
	g := dag.New()
	for _, s := range c.p.AllSteps() {
		if s.ID != "" && c.p.Step(s.ID) == s {
			g.AddNode(s.ID)
		}
	}
	for _, s := range c.p.AllSteps() {
		if c.p.Step(s.ID) != s {
			continue
		}
		for _, n := range s.Needs {
			if t := c.p.Step(n.Name); t != nil && t.Finally == s.Finally {
				g.Connect(s.ID, n.Name)
			}
		}
	}
	for _, cyc := range g.Cycles() {
		first := c.p.Step(cyc[0])
		if len(cyc) <= 2 {
			c.d.errorf(first.IDPos, "step %q needs itself", first.ID)
			continue
		}
		c.d.errorf(first.IDPos, "dependency cycle: %s", strings.Join(cyc, " → "))
	}
}

package plan

import (
	"slices"
	"strings"
)

// The checks of the order of steps that copies and waits depend on: waits
// after runs, copies before deletes (check.go runs them).

// waitWhereRun checks that a per-instance wait step runs only on instances
// where the run steps it needs launch jobs: a wait@i for a run that is not
// on i would look for jobs i never had.
func (c *checker) waitWhereRun(s *Step) {
	if s.Matrix != nil {
		return // cells are waited for where they were placed
	}
	on := c.p.Pool(s)
	for _, n := range s.Needs {
		t := c.p.Step(n.Name)
		if t == nil || t.Uses != KindRun || t.Matrix != nil {
			continue
		}
		runOn := c.p.Pool(t)
		var extra []string
		for _, i := range on {
			if !slices.Contains(runOn, i) {
				extra = append(extra, i)
			}
		}
		if len(extra) > 0 && len(runOn) > 0 {
			c.d.errorf(s.IDPos, "wait step %q runs on %s, where run step %q launches no job (it runs on %s): give it on: [%s]",
				s.ID, strings.Join(extra, ", "), t.ID, strings.Join(runOn, ", "), strings.Join(runOn, ", "))
		}
	}
}

// runWithoutWait warns about run steps no wait step follows.
func (c *checker) runWithoutWait() {
	waited := map[string]bool{}
	for _, s := range c.p.AllSteps() {
		if s.Uses == KindWait {
			for _, n := range s.Needs {
				waited[n.Name] = true
			}
		}
	}
	unwaited := map[*Step]bool{} // run steps a results step reads without a wait (errors)
	for _, u := range c.p.AllSteps() {
		if !SavesResults(u.Uses) {
			continue
		}
		before := c.ancestors(u)
		for r := range before {
			if r.Uses != KindRun || r.ID == "" {
				continue
			}
			// A run it reads: one it needs itself, or one that declares
			// results (a run further up without results, such as a
			// service left running, is the warning's business).
			direct := slices.ContainsFunc(u.Needs, func(n Name) bool { return n.Name == r.ID })
			if !direct && r.With.Get("results") == nil {
				continue
			}
			if slices.ContainsFunc(c.p.AllSteps(), func(w *Step) bool {
				return w.Uses == KindWait && before[w] && slices.ContainsFunc(w.Needs, func(n Name) bool { return n.Name == r.ID })
			}) {
				continue
			}
			unwaited[r] = true
			c.d.errorf(u.IDPos, "%s step %q copies results of run step %q, but no wait step for %q comes before it: it would start while the jobs still run, copy nothing or half, and teardown would then kill them; add a wait step (uses: wait, needs: [%s]) and make %q need it", u.Uses, u.ID, r.ID, r.ID, r.ID, u.ID)
		}
	}
	for _, s := range c.p.AllSteps() {
		if s.Uses == KindRun && s.ID != "" && !waited[s.ID] && !unwaited[s] {
			c.d.warnf(s.IDPos, "run step %q has no wait step after it: its jobs are launched and nobody waits for them (add a wait step that needs %s)", s.ID, s.ID)
		}
	}
}

// waitPerCell checks that a wait for a per-cell run step waits per cell
// (matrix: inherit): a wait once per instance follows every job there as
// one node, so a cell whose job failed would be reported by no cell, and
// the cells' results steps would start before their own jobs ended.
func (c *checker) waitPerCell(s *Step) {
	for _, n := range s.Needs {
		t := c.p.Step(n.Name)
		if t == nil || t.Uses != KindRun {
			continue
		}
		root := c.p.MatrixRoot(t)
		if root == nil || c.p.MatrixRoot(s) == root {
			continue
		}
		pos := s.IDPos
		if s.Matrix != nil {
			pos = s.Matrix.Pos
		}
		c.d.errorf(pos, "wait step %q waits for run step %q, which launches one job per cell, but it is not per cell: give it matrix: inherit, so each cell's wait follows its own job (and a failed job fails its cell)", s.ID, t.ID)
	}
}

// uploadAfterDelete finds upload-s3 and fetch steps ordered after a
// delete of one of their instances: the results would be gone.
func (c *checker) uploadAfterDelete() {
	for _, u := range c.p.AllSteps() {
		if !SavesResults(u.Uses) {
			continue
		}
		before := c.ancestors(u)
		for _, d := range c.p.AllSteps() {
			if d.Uses != KindDelete {
				continue
			}
			if !before[d] && !(u.Finally && !d.Finally) {
				continue
			}
			if shared := intersect(c.p.Pool(u), c.p.Pool(d)); len(shared) > 0 {
				c.d.errorf(u.IDPos, "%s step %q runs after delete step %q on %s: the results would already be gone; order the delete after the %s", u.Uses, u.ID, d.ID, strings.Join(shared, ", "), strings.TrimSuffix(u.Uses, "-s3"))
			}
		}
	}
}

func (c *checker) ancestors(s *Step) map[*Step]bool {
	out := map[*Step]bool{}
	stack := []*Step{s}
	for len(stack) > 0 {
		cur := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, n := range cur.Needs {
			if t := c.p.Step(n.Name); t != nil && !out[t] {
				out[t] = true
				stack = append(stack, t)
			}
		}
	}
	return out
}

func intersect(a, b []string) []string {
	var out []string
	for _, x := range a {
		if slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

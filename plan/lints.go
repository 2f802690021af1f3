package plan

import (
	"slices"
	"strings"
)

// lint gives the warnings about money and results that a plan can lose
// without being wrong (the rules of the project's brief), once the vars
// have their final values. --strict (Options.Strict) makes every warning
// an error.
func lint(p *Plan, d *diags) {
	c := &checker{p: p, d: d}
	for _, s := range p.AllSteps() {
		switch s.Uses {
		case KindRun:
			c.resultsNotUploaded(s)
			c.imageNotPulled(s)
		case KindWait:
			c.waitWithoutTimeout(s)
		}
	}
	c.autostopInert()
}

// pool returns the instances the nodes of s run on: its matrix root's pool
// for a step that inherits a matrix.
func (c *checker) pool(s *Step) []*Instance {
	if root := c.p.MatrixRoot(s); root != nil {
		s = root
	}
	var out []*Instance
	for _, name := range c.p.Pool(s) {
		if in := c.p.Instance(name); in != nil {
			out = append(out, in)
		}
	}
	return out
}

// deletedAtTeardown reports whether the run creates instance in and
// deletes it when it is done (a created brev instance or a local sandbox,
// without keep: true).
func (c *checker) deletedAtTeardown(in *Instance) bool {
	return !in.Keep && in.RunCreates(c.p.Platform.Kind)
}

// descendants returns the steps that need s, directly or not.
func (c *checker) descendants(s *Step) []*Step {
	var out []*Step
	for _, t := range c.p.AllSteps() {
		if t != s && c.ancestors(t)[s] {
			out = append(out, t)
		}
	}
	return out
}

// varsOnly substitutes the vars of a template (for comparing values).
func (c *checker) varsOnly(v *Value) string {
	if v == nil || !v.IsString() {
		return ""
	}
	t, err := ParseTemplate(v.Text)
	if err != nil {
		return v.Text
	}
	out, _ := t.renderBounded(func(r Ref) (string, bool) {
		if r.NS == NSVars {
			return c.p.Var(r.Name)
		}
		return "", false
	})
	return out
}

func (c *checker) resultsNotUploaded(s *Step) {
	res := s.With.Get("results")
	if res == nil {
		return
	}
	var lost []string
	for _, in := range c.pool(s) {
		if c.deletedAtTeardown(in) && !c.finallySaves(in) {
			lost = append(lost, in.Name)
		}
	}
	if len(lost) == 0 {
		return
	}
	if slices.ContainsFunc(c.descendants(s), func(t *Step) bool { return SavesResults(t.Uses) }) {
		return
	}
	c.d.warnf(res.Pos, "run step %q writes its results to %s on %s, which this run deletes at teardown, and no upload-s3 or fetch step after it copies them: the results are deleted with the instance (add an upload-s3 or fetch step that needs the wait of %s, or one in finally that runs on %s, or keep: true on the instance)", s.ID, clip(res.Text), strings.Join(lost, ", "), s.ID, strings.Join(lost, ", "))
}

// finallySaves reports whether a finally step copies results off instance
// in (an upload-s3 or fetch that runs there): finalizers on an instance
// run before its release deletes it, on success, failure or Ctrl-C alike.
func (c *checker) finallySaves(in *Instance) bool {
	for _, f := range c.p.Finally {
		if SavesResults(f.Uses) && slices.ContainsFunc(c.pool(f), func(i *Instance) bool { return i == in }) {
			return true
		}
	}
	return false
}

func (c *checker) imageNotPulled(s *Step) {
	img := s.With.Get("image")
	name := c.varsOnly(img)
	if !strings.HasPrefix(name, "nvcr.io/") {
		return
	}
	for t := range c.ancestors(s) {
		if t.Uses == KindPull && c.varsOnly(t.With.Get("image")) == name {
			return
		}
	}
	c.d.warnf(img.Pos, "run step %q runs %s with no pull step of it before: the pull of a multi-GB NGC image would happen inside docker run, billed as GPU-idle time and counted against the job; add a pull step with this image to its needs", s.ID, clip(name))
}

func (c *checker) waitWithoutTimeout(s *Step) {
	if s.With.Get("timeout") != nil {
		return
	}
	var billed []string
	for _, in := range c.pool(s) {
		if in.Bills(c.p.Platform.Kind) {
			billed = append(billed, in.Name)
		}
	}
	if len(billed) == 0 {
		return
	}
	c.d.warnf(s.IDPos, "wait step %q has no with.timeout on %s, which bill%s while the job runs: a hung job bills until someone notices; give it one, such as with: {timeout: 12h}", s.ID, strings.Join(billed, ", "), map[bool]string{true: "s", false: ""}[len(billed) == 1])
}

// strict turns every warning into an error (--strict).
func strict(d *diags) {
	for i := range d.list {
		if d.list[i].Severity == Warning {
			d.list[i].Severity = Error
			d.list[i].Message += " (an error under --strict)"
		}
	}
}

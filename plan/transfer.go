package plan

import (
	"os"
	"path/filepath"
	"strings"
)

// transfer checks a send or fetch step: both stream files over the
// transport's stdin or stdout, which brev's transport: exec does not have;
// send's from must exist on this machine (relative to the plan's
// directory). fetch's to is checked once the --var values are in
// (fetchTargets).
func (c *checker) transfer(s *Step) {
	if c.p.Platform.Kind == PlatformBrev && c.p.Platform.Transport == "exec" {
		how := "stdin"
		if s.Uses == KindFetch {
			how = "stdout"
		}
		c.d.errorf(s.UsesPos, "%s step %q streams files over the transport's %s, which transport: exec (brev exec) cannot carry: use transport: ssh (the default) on the platform", s.Uses, s.ID, how)
	}
	if s.Uses != KindSend {
		return
	}
	v := s.With.Get("from")
	if !v.IsString() || v.Text == "" {
		return
	}
	p, ok := c.localPath(v.Text)
	if !ok {
		return // depends on a matrix or run value: checked at run time
	}
	if _, err := os.Lstat(p); err != nil {
		why := "no such file or directory"
		if !os.IsNotExist(err) {
			why = strings.TrimPrefix(err.Error(), "lstat "+p+": ")
		}
		c.d.errorf(v.Pos, "with.from: %s: %s (%s; send reads paths relative to the plan's directory): create it or fix the path", clip(v.Text), why, clip(p))
	}
}

// localPath is the path text names on this machine, relative paths taken
// from the plan's directory, with vars and plan.dir substituted. Other
// references (matrix, cell, run) stand in as one plain segment; ok is false
// when there were any.
func (c *checker) localPath(text string) (string, bool) {
	ok := true
	if HasExpr(text) {
		t, err := ParseTemplate(text)
		if err != nil {
			return "", false
		}
		var small bool
		text, small = t.renderBounded(func(r Ref) (string, bool) {
			switch r.NS {
			case NSVars:
				if v, found := c.p.Var(r.Name); found {
					return v, true
				}
			case NSPlan:
				return c.p.Dir(), true
			}
			ok = false
			return "x", true
		})
		if !small {
			return "", false // refused by checkValues
		}
	}
	if !filepath.IsAbs(text) {
		text = filepath.Join(c.p.Dir(), text)
	}
	return filepath.Clean(text), ok
}

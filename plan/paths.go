package plan

import (
	"fmt"
	"strings"
)

// pathFields are the with: fields, by step kind, whose text names a path
// on a host. A value substituted into one must keep the path under the
// directory the literal text before it names: a matrix value or a --var of
// "../.." must not move an upload's destination or a volume's host
// directory anywhere else.
var pathFields = map[string][]string{
	KindRun:        {"volumes", "results", "workdir"},
	KindUploadS3:   {"from", "to"},
	KindSend:       {"from", "to"},
	KindDownloadS3: {"from", "to"},
	KindFetch:      {"from", "to"},
}

// EscapingValue returns the first reference of the path template t, with
// the value of it that could take the path out of the directory named by
// the literal text before it: a value with a ".." segment. A reference
// that starts the path (after file://), so that the whole base comes from
// it, is not checked, and neither is an s3:// URL, whose keys have no
// parent directories. values lists the values a reference can take (none
// for a reference whose values are safe by construction, such as run.id).
func EscapingValue(t Template, values func(Ref) []string) (Ref, string, bool) {
	raw := t.Raw
	if strings.HasPrefix(raw, "s3://") {
		return Ref{}, "", false
	}
	start := 0
	if strings.HasPrefix(raw, "file://") {
		start = len("file://")
	}
	for _, r := range t.Refs() {
		if r.Offset <= start {
			continue
		}
		for _, v := range values(r) {
			if hasDotDot(v) {
				return r, v, true
			}
		}
	}
	return Ref{}, "", false
}

// hasDotDot reports whether v has a ".." path segment.
func hasDotDot(v string) bool {
	for _, seg := range strings.Split(v, "/") {
		if seg == ".." {
			return true
		}
	}
	return false
}

// UnderLiteralPrefix reports whether rendered, the path template raw with
// its references substituted, stays under the directory that the literal
// text before raw's first reference names (file:// and "~/" kept as
// written). It is the run-time form of EscapingValue, for values known only
// then; a raw path without references, or that starts with one, is always
// under it.
func UnderLiteralPrefix(raw, rendered string) bool {
	i := strings.Index(raw, "${{")
	if i < 0 || strings.HasPrefix(raw, "s3://") {
		return true
	}
	prefix := raw[:i]
	if prefix == "" || prefix == "file://" {
		return true
	}
	// The directory the literal names: up to its last slash ("out/run-"
	// names out/), or all of it when the reference starts a segment.
	dir := ""
	if j := strings.LastIndexByte(prefix, '/'); j >= 0 {
		dir = prefix[:j+1]
	}
	if !strings.HasPrefix(rendered, dir) {
		return false
	}
	// Walk the rest segment by segment as written (path.Clean would
	// hide a ".." that climbs out): it must never climb above dir.
	depth := 0
	for _, seg := range strings.Split(rendered[len(dir):], "/") {
		switch seg {
		case "", ".":
		case "..":
			depth--
		default:
			depth++
		}
		if depth < 0 {
			return false
		}
	}
	return true
}

// paths checks the path fields of step s (pathFields): no value that a
// reference in them can take leaves the directory its literal prefix
// names.
func (c *checker) paths(s *Step) {
	if s.With == nil {
		return
	}
	values := func(r Ref) []string {
		switch r.NS {
		case NSVars:
			if v, ok := c.p.Var(r.Name); ok {
				return []string{v}
			}
		case NSMatrix:
			if root := c.p.MatrixRoot(s); root != nil {
				for _, a := range root.Matrix.Axes {
					if a.Name == r.Name {
						return a.Values
					}
				}
			}
		}
		return nil
	}
	for _, key := range pathFields[s.Uses] {
		f := s.With.Field(key)
		if f == nil {
			continue
		}
		scalars := []*Value{f.Value}
		if f.Value.Kind == List {
			scalars = f.Value.Items
		}
		for _, v := range scalars {
			if v.Kind != Scalar || !HasExpr(v.Text) {
				continue
			}
			t, err := ParseTemplate(v.Text)
			if err != nil {
				continue // reported by the expression checks
			}
			if r, val, ok := EscapingValue(t, values); ok {
				from := ""
				if r.NS == NSVars {
					for _, vv := range c.p.Vars {
						if vv.Name == r.Name {
							from = " (vars." + vv.Name + " is from " + vv.From + ")"
						}
					}
				}
				c.d.errorf(c.offsetPos(v, r.Offset), "${{ %s }} can be %q, which would take with.%s out of the directory %q names: a value in a path must not hold a \"..\" segment%s", r, clip(val), key, clip(v.Text[:r.Offset]), from)
				continue
			}
			c.renderedPath(s, key, v, t)
		}
	}
}

// renderedPath checks the path template t (the scalar v of with.key of
// step s) as each cell renders it, vars and matrix values substituted and
// placeholders for what only apply knows (run.id, instance.name, slot.*):
// values that each hold no ".." can still climb out together ("${{ a }}${{
// b }}" of "." and "./.."), and a --var is known only here. The run-time
// check (plan.UnderLiteralPrefix in steps) is the same test on the real
// values. Of the cells that fail, the first is reported and the others
// counted.
func (c *checker) renderedPath(s *Step, key string, v *Value, t Template) {
	var m *Matrix
	if root := c.p.MatrixRoot(s); root != nil {
		m = root.Matrix
	}
	seen := map[string]bool{}
	var first *cellScope
	var firstVal string
	found, others := false, 0
	eachCell(m, func(cs *cellScope) {
		lookup := cs.lookup(c.p)
		rendered := t.Render(func(r Ref) (string, bool) {
			if val, ok := lookup(r); ok {
				return val, true
			}
			return placeholder(r), true
		}, nil)
		if seen[rendered] {
			return
		}
		seen[rendered] = true
		if UnderLiteralPrefix(v.Text, rendered) {
			return
		}
		if !found {
			found, first, firstVal = true, cs, rendered
			return
		}
		others++
	})
	if !found {
		return
	}
	pos, from := c.origin(v, first)
	more := ""
	if others > 0 {
		more = fmt.Sprintf(" (and %d more value%s of it in other cells)", others, plural(others))
	}
	c.d.errorf(pos, "with.%s of step %q is %q, which leaves the directory %q names%s%s: a substituted value must not climb out of it with \"..\"; change the value, or write the directory into the value itself", key, s.ID, clip(firstVal), clip(v.Text[:strings.Index(v.Text, "${{")]), from, more)
}

// placeholder stands for the value of r that only apply knows, as `plan
// --commands` shows it: RUN for run.id, INSTANCE for instance.name, 0 for
// a slot. Each is one plain path segment.
func placeholder(r Ref) string {
	switch r.NS {
	case NSRun:
		return "RUN"
	case NSInstance:
		return "INSTANCE"
	case NSSlot:
		return "0"
	}
	return "VALUE"
}

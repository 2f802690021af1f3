package plan

import (
	"fmt"
	"strings"
)

// Namespaces of ${{ ns.name }} expressions.
const (
	NSVars     = "vars"
	NSMatrix   = "matrix"
	NSCell     = "cell"
	NSRun      = "run"
	NSInstance = "instance"
	NSSlot     = "slot"
	NSSecrets  = "secrets"
	// NSPlan holds plan.dir, the absolute directory of the plan file.
	NSPlan = "plan"
)

// Ref is one ${{ ns.name }} reference inside a template.
type Ref struct {
	NS     string
	Name   string
	Offset int // byte offset of "${{" in the template text
}

func (r Ref) String() string { return r.NS + "." + r.Name }

// Part is a piece of a template: a literal, or a reference when Ref is set.
type Part struct {
	Lit string
	Ref *Ref
}

// Template is a string with ${{ }} references, parsed.
type Template struct {
	Raw   string
	Parts []Part
}

// ExprError is a syntax error in a template, at a byte offset of its text.
type ExprError struct {
	Offset int
	Msg    string
}

func (e *ExprError) Error() string { return e.Msg }

// HasExpr reports whether s contains an expression opener.
func HasExpr(s string) bool { return strings.Contains(s, "${{") }

// ParseTemplate splits s into literals and ${{ ns.name }} references.
// Only dotted names are expressions; there are no operators or functions.
func ParseTemplate(s string) (Template, error) {
	t := Template{Raw: s}
	if n := strings.Count(s, "${{"); n > 0 {
		t.Parts = make([]Part, 0, 2*n+1)
	}
	rest, off := s, 0
	for {
		i := strings.Index(rest, "${{")
		if i < 0 {
			if rest != "" {
				t.Parts = append(t.Parts, Part{Lit: rest})
			}
			return t, nil
		}
		if i > 0 {
			t.Parts = append(t.Parts, Part{Lit: rest[:i]})
		}
		start := off + i
		body := rest[i+3:]
		j := strings.Index(body, "}}")
		if j < 0 {
			return t, &ExprError{Offset: start, Msg: "unterminated expression: ${{ without a closing }}"}
		}
		ref, err := parseRef(strings.TrimSpace(body[:j]))
		if err != nil {
			return t, &ExprError{Offset: start, Msg: err.Error()}
		}
		ref.Offset = start
		t.Parts = append(t.Parts, Part{Ref: &ref})
		consumed := i + 3 + j + 2
		rest, off = rest[consumed:], off+consumed
	}
}

func parseRef(expr string) (Ref, error) {
	ns, name, ok := strings.Cut(expr, ".")
	if expr == "" {
		return Ref{}, fmt.Errorf("empty expression: expected ${{ namespace.name }}, e.g. ${{ vars.image }}")
	}
	if !ok || !isIdent(ns) || !isIdent(name) {
		return Ref{}, fmt.Errorf("unsupported expression %q: expected ${{ namespace.name }} such as ${{ vars.image }} or ${{ matrix.lr }}", clip(expr))
	}
	return Ref{NS: ns, Name: name}, nil
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && (r >= '0' && r <= '9' || r == '-'):
		default:
			return false
		}
	}
	return true
}

// Refs returns the references of the template in order.
func (t Template) Refs() []Ref {
	n := 0
	for _, p := range t.Parts {
		if p.Ref != nil {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := make([]Ref, 0, n)
	for _, p := range t.Parts {
		if p.Ref != nil {
			out = append(out, *p.Ref)
		}
	}
	return out
}

// Render substitutes every reference with lookup's answer, passed through
// quote when quote is not nil (shell fields: each value becomes one word).
// A reference lookup doesn't know is left as written.
func (t Template) Render(lookup func(Ref) (string, bool), quote func(string) string) string {
	var b strings.Builder
	for _, p := range t.Parts {
		if p.Ref == nil {
			b.WriteString(p.Lit)
			continue
		}
		v, ok := lookup(*p.Ref)
		if !ok {
			b.WriteString("${{ " + p.Ref.String() + " }}")
			continue
		}
		if quote != nil {
			v = quote(v)
		}
		b.WriteString(v)
	}
	return b.String()
}

// ShellField reports whether with.key of a step of the given kind is a shell
// command, whose substituted values are inserted as single quoted words
// (shellquote.Quote).
func ShellField(kind, key string) bool {
	return kind == KindRun && key == "command"
}

// MaxRendered bounds the bytes of one value once its ${{ }} expressions
// are substituted (before the shell quoting of a command). A var is short
// and a plan file at most MaxFileSize, but a long var named many times
// would multiply: 100 KB named 10,000 times is 1 GB. validate refuses a
// with: value that can pass the bound, so no later rendering does.
const MaxRendered = 1 << 20

// renderBounded is Render without quoting, refusing (ok false) when the
// result would be more than MaxRendered bytes; it measures before it
// builds anything.
func (t Template) renderBounded(lookup func(Ref) (string, bool)) (string, bool) {
	n := 0
	for _, p := range t.Parts {
		if p.Ref == nil {
			n += len(p.Lit)
		} else if v, ok := lookup(*p.Ref); ok {
			n += len(v)
		} else {
			n += len(p.Ref.String()) + 7
		}
		if n > MaxRendered {
			return "", false
		}
	}
	return t.Render(lookup, nil), true
}

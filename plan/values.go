package plan

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/taoflow/taoflow/schema"
)

// checkValues checks every with: value that holds a ${{ vars.* }},
// ${{ matrix.* }} or ${{ cell.* }} expression again after substitution,
// against the same schema definition ("with-run", …) that checked it as
// written, for every cell of its matrix: a duration, integer, enum, size or
// URL that only a var or a matrix value makes wrong is found here, before
// anything starts, instead of by the step on a billed instance. The error
// stands at the expression and says where the value came from.
func checkValues(p *Plan, d *diags) {
	c := &checker{p: p, d: d}
	for _, s := range p.AllSteps() {
		if s.With == nil || s.With.Kind != Map || s.Uses == "" {
			continue
		}
		if _, err := schema.CompileDef("with-" + s.Uses); err != nil {
			continue // an unknown kind: reported by the schema
		}
		for _, f := range s.With.Fields {
			c.checkField(s, f)
		}
	}
}

// refsUnder reports whether the strings under v refer to vars, and the
// matrix keys they name (cell.* names every key: a cell id is made of all).
func refsUnder(v *Value) (vars, cells bool, keys map[string]bool) {
	var walk func(v *Value)
	walk = func(v *Value) {
		switch v.Kind {
		case Scalar:
			if !v.IsString() || !HasExpr(v.Text) {
				return
			}
			t, err := ParseTemplate(v.Text)
			if err != nil {
				return
			}
			for _, r := range t.Refs() {
				switch r.NS {
				case NSVars, NSPlan:
					vars = true
				case NSMatrix:
					cells = true
					if keys == nil {
						keys = map[string]bool{}
					}
					keys[r.Name] = true
				case NSCell, NSSlot:
					cells = true
				}
			}
		case List:
			for _, it := range v.Items {
				walk(it)
			}
		case Map:
			for _, f := range v.Fields {
				walk(f.Value)
			}
		}
	}
	walk(v)
	return vars, cells, keys
}

// cellScope is one cell of a matrix, for substitution.
type cellScope struct {
	index  int
	keys   []string
	values []string
	pos    []Pos // each axis's position
}

func (cs *cellScope) lookup(p *Plan) func(Ref) (string, bool) {
	return func(r Ref) (string, bool) {
		switch r.NS {
		case NSVars:
			return p.Var(r.Name)
		case NSPlan:
			if r.Name == "dir" {
				return p.Dir(), true
			}
		case NSMatrix:
			if cs != nil {
				for i, k := range cs.keys {
					if k == r.Name {
						return cs.values[i], true
					}
				}
			}
		case NSCell:
			if cs == nil {
				return "", false
			}
			switch r.Name {
			case "index":
				return strconv.Itoa(cs.index), true
			case "id":
				return cs.id(), true
			}
		case NSSlot:
			// Which slot a cell holds, and so its GPUs, is known only when
			// it runs; slot 0 of one GPU stands for every one (both are
			// digits and commas).
			if cs != nil && (r.Name == "index" || r.Name == "gpus") {
				return "0", true
			}
		}
		return "", false
	}
}

// id is the cell's readable id (engine.Expand may use a hashed one for
// long or ambiguous ids; both hold only [A-Za-z0-9._-]).
func (cs *cellScope) id() string {
	parts := make([]string, len(cs.keys))
	for i := range cs.keys {
		var b strings.Builder
		sep := false
		for _, r := range cs.values[i] {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
				b.WriteRune(r)
				sep = false
			} else if !sep {
				b.WriteByte('-')
				sep = true
			}
		}
		parts[i] = cs.keys[i] + "-" + b.String()
	}
	return strings.Join(parts, "_")
}

// eachCell calls fn for every cell of m (first key outermost), or once with
// nil when m is nil.
func eachCell(m *Matrix, fn func(*cellScope)) {
	if m == nil || m.Inherit || m.Cells() == 0 || m.Cells() > MaxCells {
		fn(nil)
		return
	}
	idx := make([]int, len(m.Axes))
	for i := 0; i < m.Cells(); i++ {
		cs := &cellScope{index: i}
		for a, ax := range m.Axes {
			cs.keys = append(cs.keys, ax.Name)
			cs.values = append(cs.values, ax.Values[idx[a]])
			cs.pos = append(cs.pos, ax.Pos)
		}
		fn(cs)
		for a := len(idx) - 1; a >= 0; a-- {
			idx[a]++
			if idx[a] < len(m.Axes[a].Values) {
				break
			}
			idx[a] = 0
		}
	}
}

// checkField checks with.<f.Key> of step s for each distinct value its
// substitution takes.
func (c *checker) checkField(s *Step, f Field) {
	vars, cells, keys := refsUnder(f.Value)
	if !vars && !cells {
		return
	}
	var m *Matrix
	if cells {
		if root := c.p.MatrixRoot(s); root != nil {
			m = root.Matrix
		}
	}
	// Report the first cell whose value is wrong, and count the others: a
	// wrong var would otherwise be reported once per cell.
	// Cells that agree on the matrix keys the value names give it the same
	// type: a cell.* value differs between them only in characters of the
	// same kind ([A-Za-z0-9._-]), so one of them stands for all.
	seen, seenKeys := map[string]bool{}, map[string]bool{}
	var first Diagnostics
	others := 0
	eachCell(m, func(cs *cellScope) {
		if cs != nil {
			var kb strings.Builder
			for i, k := range cs.keys {
				if keys[k] {
					kb.WriteString(strconv.Quote(cs.values[i]))
				}
			}
			if seenKeys[kb.String()] {
				return
			}
			seenKeys[kb.String()] = true
		}
		lookup := cs.lookup(c.p)
		if big := tooLarge(f.Value, lookup); big != nil {
			if first == nil {
				first = Diagnostics{{Pos: big.Pos, Severity: Error, Message: fmt.Sprintf("once its ${{ }} expressions are substituted, this value is more than %d MiB, the limit of one rendered value (plan.MaxRendered): a long var or matrix value named many times multiplies; name it fewer times, or send the data as a file", MaxRendered>>20)}}
			}
			return
		}
		sub := substitute(f.Value, s.Uses, f.Key, lookup, nil)
		if m != nil {
			key, _ := json.Marshal(sub.JSON())
			if seen[string(key)] {
				return
			}
			seen[string(key)] = true
		}
		problems := c.checkSubstituted(s, f, sub, cs)
		switch {
		case len(problems) == 0:
		case first == nil:
			first = problems
		default:
			others++
		}
	})
	for _, d := range first {
		if others > 0 {
			d.Message += fmt.Sprintf(" (and %d more value%s of this setting in other cells)", others, plural(others))
		}
		c.d.list = append(c.d.list, d)
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// tooLarge returns the first string under v whose substitution would be
// more than MaxRendered bytes, or nil.
func tooLarge(v *Value, lookup func(Ref) (string, bool)) *Value {
	switch v.Kind {
	case Scalar:
		if v.IsString() && HasExpr(v.Text) {
			if t, err := ParseTemplate(v.Text); err == nil {
				if _, ok := t.renderBounded(lookup); !ok {
					return v
				}
			}
		}
	case List:
		for _, it := range v.Items {
			if big := tooLarge(it, lookup); big != nil {
				return big
			}
		}
	case Map:
		for _, f := range v.Fields {
			if big := tooLarge(f.Value, lookup); big != nil {
				return big
			}
		}
	}
	return nil
}

// Substitute returns a copy of v, the with: of a step of the given kind,
// with every expression lookup knows replaced; in a shell field
// (ShellField) each value passes through quote first, when quote is not
// nil. It is the one substitution of a plan's values: validate's (quote
// nil, as written: the shell quoting of commands does not change a value's
// type) and the run's (engine.Expand, with shellquote.Quote).
func Substitute(v *Value, kind string, lookup func(Ref) (string, bool), quote func(string) string) *Value {
	return substitute(v, kind, "", lookup, quote)
}

// substitute is Substitute under with.key (key "" at the top).
func substitute(v *Value, kind, key string, lookup func(Ref) (string, bool), quote func(string) string) *Value {
	out := *v
	switch v.Kind {
	case Scalar:
		if v.IsString() && HasExpr(v.Text) {
			if t, err := ParseTemplate(v.Text); err == nil {
				q := quote
				if !ShellField(kind, key) {
					q = nil
				}
				out.Text = t.Render(lookup, q)
			}
		}
	case List:
		out.Items = make([]*Value, len(v.Items))
		for i, it := range v.Items {
			out.Items[i] = substitute(it, kind, key, lookup, quote)
		}
	case Map:
		out.Fields = make([]Field, len(v.Fields))
		for i, f := range v.Fields {
			k := key
			if k == "" {
				k = f.Key
			}
			out.Fields[i] = Field{Key: f.Key, KeyPos: f.KeyPos, Value: substitute(f.Value, kind, k, lookup, quote)}
		}
	}
	return &out
}

// retyped returns a copy of v whose substituted string scalars take the
// type YAML gives their text written plain ("2" an integer, "true" a
// boolean), and whether any changed.
func retyped(v, orig *Value) (*Value, bool) {
	out := *v
	changed := false
	switch v.Kind {
	case Scalar:
		if orig.IsString() && HasExpr(orig.Text) {
			if tag := plainTag(v.Text); tag != "!!str" {
				out.Tag, changed = tag, true
			}
		}
	case List:
		out.Items = make([]*Value, len(v.Items))
		for i := range v.Items {
			var ch bool
			out.Items[i], ch = retyped(v.Items[i], orig.Items[i])
			changed = changed || ch
		}
	case Map:
		out.Fields = make([]Field, len(v.Fields))
		for i, f := range v.Fields {
			nv, ch := retyped(f.Value, orig.Fields[i].Value)
			out.Fields[i] = Field{Key: f.Key, KeyPos: f.KeyPos, Value: nv}
			changed = changed || ch
		}
	}
	return &out, changed
}

// plainTag is the tag YAML resolves an unquoted scalar with this text to
// (only the types the plan schema distinguishes).
func plainTag(s string) string {
	switch strings.ToLower(s) {
	case "true", "false":
		return "!!bool"
	}
	if _, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 0, 64); err == nil && s != "" {
		return "!!int"
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return "!!float"
	}
	return "!!str"
}

// checkSubstituted validates one substituted value of with.<f.Key>,
// returning the errors.
func (c *checker) checkSubstituted(s *Step, f Field, sub *Value, cs *cellScope) Diagnostics {
	if sub.Kind == Scalar && sub.Text == "" && f.Value.IsString() && strings.TrimSpace(exprless(f.Value.Text)) == "" {
		return nil // an expression whose value is empty: the setting is left out (s3_endpoint: "")
	}
	base := s.pointer + "/with"
	wrap := func(v *Value) *Value {
		return &Value{Kind: Map, Pos: s.With.Pos, Fields: []Field{{Key: f.Key, KeyPos: f.KeyPos, Value: v}}}
	}
	problems := c.validateWith(wrap(sub), base, s.Uses)
	if len(problems) > 0 {
		if typed, ok := retyped(sub, f.Value); ok && len(c.validateWith(wrap(typed), base, s.Uses)) == 0 {
			problems = nil
		}
	}
	if len(problems) == 0 && sub.Kind == Scalar && !HasExpr(sub.Text) && isDurationField(s.Uses, f.Key) {
		if dur, err := time.ParseDuration(sub.Text); err != nil || dur <= 0 {
			problems = append(problems, Diagnostic{Pos: sub.Pos, Message: fmt.Sprintf("%s: %q is not a duration longer than zero (use Go syntax such as 90s, 10m, 1h30m)", subject(base+"/"+escapePointer(f.Key)), clip(sub.Text))})
		}
	}
	var out Diagnostics
	for _, pr := range problems {
		orig := scalarAt(f.Value, pr.Pos)
		pos, from := pr.Pos, ""
		if orig != nil {
			pos, from = c.origin(orig, cs)
		}
		out = append(out, Diagnostic{Pos: pos, Severity: Error, Message: pr.Message + from})
	}
	return out
}

// validateWith validates a with: mapping against the step kind's schema
// definition, returning the problems as diagnostics (only those about the
// value: a required key it lacks is not this check's business).
func (c *checker) validateWith(w *Value, base, kind string) Diagnostics {
	if schema.ValidDef("with-"+kind, jsonView{w}) {
		return nil
	}
	err := schema.ValidateDef("with-"+kind, w.JSON())
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil
	}
	tmp := &diags{}
	m := schemaMapper{root: w, d: tmp, base: base}
	m.walk(ve)
	var out Diagnostics
	for _, d := range tmp.list {
		if strings.Contains(d.Message, "is missing the required key") || strings.HasPrefix(d.Message, "unknown key") {
			continue
		}
		out = append(out, d)
	}
	return out
}

// isDurationField reports whether the schema types with.key of a step of
// this kind as a duration.
func isDurationField(kind, key string) bool {
	k := kind + "\x00" + key
	if d, ok := durationFields.Load(k); ok {
		return d.(bool)
	}
	frag := schemaFragment("#/$defs/with-" + kind + "/properties/" + escapePointer(key))
	b, _ := json.Marshal(frag)
	d := strings.Contains(string(b), `"#/$defs/duration"`)
	durationFields.Store(k, d)
	return d
}

// durationFields caches isDurationField: the schema is fixed.
var durationFields sync.Map

// exprless returns s with its expressions removed.
func exprless(s string) string {
	t, err := ParseTemplate(s)
	if err != nil {
		return s
	}
	var b strings.Builder
	for _, p := range t.Parts {
		if p.Ref == nil {
			b.WriteString(p.Lit)
		}
	}
	return b.String()
}

// scalarAt finds the scalar under v at position p.
func scalarAt(v *Value, p Pos) *Value {
	switch v.Kind {
	case Scalar:
		if v.Pos == p {
			return v
		}
	case List:
		for _, it := range v.Items {
			if s := scalarAt(it, p); s != nil {
				return s
			}
		}
	case Map:
		for _, f := range v.Fields {
			if s := scalarAt(f.Value, p); s != nil {
				return s
			}
		}
	}
	return nil
}

// origin returns the position of the first vars/matrix/cell expression of
// scalar v and the words that say where its values came from.
func (c *checker) origin(v *Value, cs *cellScope) (Pos, string) {
	t, err := ParseTemplate(v.Text)
	if err != nil {
		return v.Pos, ""
	}
	pos := v.Pos
	first := true
	var from []string
	seen := map[string]bool{}
	for _, r := range t.Refs() {
		var what string
		switch r.NS {
		case NSVars:
			for _, vv := range c.p.Vars {
				if vv.Name == r.Name {
					what = fmt.Sprintf("vars.%s is %q (from %s)", r.Name, clip(vv.Value), vv.From)
				}
			}
		case NSMatrix:
			if cs != nil {
				for i, k := range cs.keys {
					if k == r.Name {
						what = fmt.Sprintf("matrix.%s is %q (from matrix: line %d)", k, clip(cs.values[i]), cs.pos[i].Line)
					}
				}
			}
		case NSCell:
			if cs != nil {
				what = fmt.Sprintf("cell.%s of cell %s", r.Name, cs.id())
			}
		}
		if what == "" {
			continue
		}
		if first {
			pos, first = c.offsetPos(v, r.Offset), false
		}
		if !seen[what] {
			seen[what] = true
			from = append(from, what)
		}
	}
	if len(from) == 0 {
		return pos, ""
	}
	return pos, "; " + strings.Join(from, ", ")
}

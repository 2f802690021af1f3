package plan

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/taoflow/taoflow/secret"
)

// The checks of the ${{ }} expressions of a plan: where they may stand, what
// they name, and the shell placement of those in commands (check.go runs
// them).

// expressions checks every ${{ }} under with:, forbids them elsewhere, and
// lints literals that look like secrets.
func (c *checker) expressions() {
	steps := c.p.AllSteps()
	withs := make(map[*Value]*Step, len(steps))
	var withKinds [Map + 1]bool // the kinds of value a with: is: only those are looked up
	for _, s := range steps {
		if s.With != nil {
			withs[s.With] = s
			withKinds[s.With.Kind] = true
		}
	}
	// A value reached twice (through an alias) is checked once; without
	// aliases, none is.
	var visited map[*Value]bool
	if c.p.Root.shared {
		visited = map[*Value]bool{}
	}
	var walk func(v *Value, step *Step)
	walk = func(v *Value, step *Step) {
		if withKinds[v.Kind] {
			if s, ok := withs[v]; ok {
				step = s
			}
		}
		switch v.Kind {
		case Scalar:
			if v.Tag != "!!str" {
				return
			}
			if visited != nil {
				if visited[v] {
					return
				}
				visited[v] = true
			}
			c.controls(v)
			c.lintSecret(v)
			if step != nil {
				c.typos(v, step)
			}
			if !HasExpr(v.Text) {
				return
			}
			if step == nil {
				c.d.errorf(v.Pos, "expressions are only expanded in with: values; %q here would stay literal", clip(v.Text))
				return
			}
			c.template(v, step)
		case List:
			for _, it := range v.Items {
				walk(it, step)
			}
		case Map:
			for _, f := range v.Fields {
				c.keyControls(f)
				walk(f.Value, step)
			}
		}
	}
	walk(c.p.Root, nil)
}

func (c *checker) lintSecret(v *Value) {
	for _, f := range secret.Lint(v.Text) {
		c.d.errorf(c.offsetPos(v, f.Offset), "%s", f.Message)
	}
}

// offsetPos is the position of byte offset off inside scalar v: exact for
// single-line scalars and for the lines of a multi-line scalar found as
// written in the source (block scalars, plain or quoted lines without
// escapes); the scalar's own position otherwise.
func (c *checker) offsetPos(v *Value, off int) Pos {
	p := v.Pos
	if off > len(v.Text) || off < 0 {
		return p
	}
	if c.lines == nil {
		c.lines = bytes.Split(c.p.source, []byte("\n"))
	}
	if p.Line < 1 || p.Line > len(c.lines) {
		return p
	}
	line := []rune(string(c.lines[p.Line-1]))
	col := p.Col - 1
	if col >= len(line) {
		return p
	}
	block := line[col] == '|' || line[col] == '>'
	start := col
	if line[col] == '"' || line[col] == '\'' {
		start++ // quoted scalars start one column after their quote
	}
	if !block && strings.HasPrefix(string(line[start:]), v.Text[:off]) {
		p.Col = start + 1 + utf8.RuneCountInString(v.Text[:off])
		return p
	}
	// A block scalar, a scalar over several lines, or escapes before off.
	if q, ok := c.multilinePos(v, off, line[col]); ok {
		return q
	}
	if !block && !strings.ContainsRune(v.Text, '\n') {
		p.Col = start + 1 + utf8.RuneCountInString(v.Text[:off]) // about there
	}
	return p
}

// multilinePos finds the source line that holds byte off of a multi-line
// scalar by looking for each source line's text in the value, in order.
func (c *checker) multilinePos(v *Value, off int, first rune) (Pos, bool) {
	start := v.Pos.Line // the first source line holding text
	firstCol := v.Pos.Col - 1
	switch first {
	case '|', '>':
		start, firstCol = v.Pos.Line+1, -1
	case '"', '\'':
		firstCol++
	}
	cursor := 0
	for ln := start; ln <= len(c.lines) && cursor < len(v.Text); ln++ {
		raw := string(c.lines[ln-1])
		raw = strings.TrimSuffix(raw, "\r")
		indent := len(raw) - len(strings.TrimLeft(raw, " \t"))
		if ln == v.Pos.Line && firstCol >= 0 {
			indent = len(string([]rune(raw)[:min(firstCol, len([]rune(raw)))]))
		}
		text := strings.TrimRight(raw[indent:], " \t")
		if text == "" {
			continue
		}
		i := strings.Index(v.Text[cursor:], text)
		if i < 0 {
			// The line is not in the value as written (an escape, a
			// closing quote): give up on exact positions after it.
			if t := strings.TrimRight(text, "\"'"); t != "" && strings.HasPrefix(v.Text[cursor:], strings.TrimLeft(t, " ")) {
				i = 0
				text = t
			} else {
				break
			}
		}
		lo, hi := cursor+i, cursor+i+len(text)
		if off >= lo && off < hi {
			return Pos{File: v.Pos.File, Line: ln, Col: utf8.RuneCountInString(raw[:indent]) + 1 + utf8.RuneCountInString(v.Text[lo:off])}, true
		}
		cursor = hi
	}
	return v.Pos, false
}

func (c *checker) template(v *Value, s *Step) {
	t, err := ParseTemplate(v.Text)
	var e *ExprError
	if errors.As(err, &e) {
		c.d.errorf(c.offsetPos(v, e.Offset), "%s", e.Msg)
		return
	}
	root := c.p.MatrixRoot(s)
	for _, r := range t.Refs() {
		pos := func() Pos { return c.offsetPos(v, r.Offset) } // only for a problem: it costs
		switch r.NS {
		case NSVars:
			if _, ok := c.p.Var(r.Name); !ok {
				var known []string
				for _, vv := range c.p.Vars {
					known = append(known, vv.Name)
				}
				c.d.errorf(pos(), "unknown var %q%s", r.Name, c.suggest(r.Name, known))
			}
		case NSMatrix:
			if root == nil {
				c.d.errorf(pos(), "${{ matrix.%s }} is used in step %q, which has no matrix", r.Name, s.ID)
				continue
			}
			var keys []string
			for _, a := range root.Matrix.Axes {
				keys = append(keys, a.Name)
			}
			if !slices.Contains(keys, r.Name) {
				c.d.errorf(pos(), "unknown matrix key %q%s", r.Name, c.suggest(r.Name, keys))
			}
		case NSCell:
			if root == nil {
				c.d.errorf(pos(), "${{ cell.%s }} is used in step %q, which has no matrix", r.Name, s.ID)
			} else if r.Name != "id" && r.Name != "index" {
				c.d.errorf(pos(), "unknown cell field %q (cell.id and cell.index exist)", r.Name)
			}
		case NSSlot:
			if root == nil {
				c.d.errorf(pos(), "${{ slot.%s }} is used in step %q, which has no matrix (only the cells of a matrix hold slots)", r.Name, s.ID)
			} else if r.Name != "index" && r.Name != "gpus" {
				c.d.errorf(pos(), "unknown slot field %q (slot.index and slot.gpus exist)", r.Name)
			}
		case NSRun:
			if r.Name != "id" {
				c.d.errorf(pos(), "unknown run field %q (run.id exists)", r.Name)
			}
		case NSInstance:
			if r.Name != "name" {
				c.d.errorf(pos(), "unknown instance field %q (instance.name exists)", r.Name)
			}
		case NSPlan:
			if r.Name != "dir" {
				c.d.errorf(pos(), "unknown plan field %q (plan.dir exists)", r.Name)
			}
		case NSSecrets:
			c.d.errorf(pos(), "secrets are never interpolated into commands: list %s under this step's with.env and read it as $%s in the command", r.Name, r.Name)
		default:
			c.d.errorf(pos(), "unknown namespace %q in ${{ %s }} (use vars, matrix, cell, slot, run, instance or plan)", r.NS, r)
		}
	}
}

// commands checks each run step's command as shell: every ${{ }} must
// stand where the shell reads its value as one word (plan/shell.go), and a
// container's command must be nothing but words (CheckContainerArgv).
// maxShellProblems is how many refused expressions of one command are
// reported, each at its position.
const maxShellProblems = 20

func (c *checker) commands() {
	for _, s := range c.p.AllSteps() {
		if s.Uses != KindRun {
			continue
		}
		v := s.With.Get("command")
		if !v.IsString() {
			continue
		}
		t, err := ParseTemplate(v.Text)
		if err != nil {
			continue // reported by template
		}
		refs := t.Refs()
		problems := checkShellPlacement(v.Text, refs)
		if s.With.Get("image") != nil {
			masked, _ := maskExprs(v.Text, refs)
			if p := argvProblem(masked); p != nil {
				problems = append(problems, *p)
			}
		}
		for i, p := range problems {
			if i == maxShellProblems {
				// Each position costs a look at the text: a command of
				// thousands of refused expressions is reported in part.
				c.d.errorf(v.Pos, "and %d more expressions of this command are refused as the ones above", len(problems)-i)
				break
			}
			if p.Warning {
				c.d.warnf(c.offsetPos(v, p.Offset), "%s", p.Msg)
			} else {
				c.d.errorf(c.offsetPos(v, p.Offset), "%s", p.Msg)
			}
		}
	}
}

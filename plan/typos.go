package plan

import (
	"regexp"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Expression typos: forms that look like an expression but stay as
// written, so the step gets the literal text (or an empty shell variable)
// instead of the value. Warnings, with the fix.
var (
	// ${ {, $ {{ and ${ { : a blank inside the opener.
	spacedOpenRE = regexp.MustCompile(`\$(?:\s+\{\s*|\{\s+)\{`)
	// {{ ns.name }} without the $.
	bareBracesRE = regexp.MustCompile(`\{\{\s*(vars|matrix|cell|run|instance)\.[A-Za-z_][A-Za-z0-9_-]*\s*\}\}`)
	// $name and ${name}.
	shellVarRE = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)`)
)

// setters are the commands whose words name variables they set.
var setters = map[string]bool{"read": true, "export": true, "local": true, "declare": true, "typeset": true,
	"readonly": true, "getopts": true, "mapfile": true, "readarray": true}

// typos warns about expression typos in a with: value of step s.
func (c *checker) typos(v *Value, s *Step) {
	text := v.Text
	// The expressions below cannot match text that lacks what each
	// requires: most values are skipped without running them.
	spaced, braces, shellVar := typoCandidates(text)
	for _, m := range findAll(spaced, spacedOpenRE, text) {
		c.d.warnf(c.offsetPos(v, m[0]), "%q is not an expression opener and stays as written; did you mean ${{ (no blank inside)?", text[m[0]:m[1]])
	}
	for _, m := range findAll(braces, bareBracesRE, text) {
		if m[0] > 0 && text[m[0]-1] == '$' {
			continue
		}
		if m[0] > 1 && text[m[0]-1] == ' ' && text[m[0]-2] == '$' {
			continue // "$ {{": reported above
		}
		expr := text[m[0]:m[1]]
		c.d.warnf(c.offsetPos(v, m[0]), "%s stays as written; did you mean $%s?", clip(expr), clip(expr))
	}
	command := s.Uses == KindRun && s.With.Get("command") == v
	if command {
		c.commandVarTypos(v, s)
		return
	}
	for _, m := range findAll(shellVar, shellVarRE, text) {
		var name string
		if m[2] >= 0 {
			name = text[m[2]:m[3]]
		} else {
			name = text[m[4]:m[5]]
		}
		if _, ok := c.p.Var(name); ok {
			c.d.warnf(c.offsetPos(v, m[0]), "%s stays as written here; did you mean ${{ vars.%s }}?", text[m[0]:m[1]], name)
		}
	}
}

// commandVarTypos warns about $name in a run command where name is a
// declared var that the command neither sets nor gets through with.env:
// the instance's shell expands it to nothing.
func (c *checker) commandVarTypos(v *Value, s *Step) {
	t, err := ParseTemplate(v.Text)
	if err != nil {
		return
	}
	masked, _ := maskExprs(v.Text, t.Refs())
	f, err := parseShell(masked, syntax.LangBash)
	if err != nil {
		return
	}
	set := map[string]bool{}
	for _, n := range names(s.With.Get("env")) {
		set[n.Name] = true
	}
	type use struct {
		name string
		off  int
		text string
	}
	var uses []use
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Assign:
			if n.Name != nil {
				set[n.Name.Value] = true
			}
		case *syntax.WordIter:
			set[n.Name.Value] = true
		case *syntax.CallExpr:
			// read NAME, export NAME=…, getopts … NAME: the words name
			// variables the command sets.
			if len(n.Args) > 0 && setters[n.Args[0].Lit()] {
				for _, w := range n.Args[1:] {
					name, _, _ := strings.Cut(w.Lit(), "=")
					set[name] = true
				}
			}
		case *syntax.ParamExp:
			if n.Param != nil && n.Param.Value != "" {
				lo, hi := int(n.Pos().Offset()), int(n.End().Offset())
				uses = append(uses, use{n.Param.Value, lo, masked[lo:min(hi, len(masked))]})
			}
		}
		return true
	})
	for _, u := range uses {
		if _, ok := c.p.Var(u.name); !ok || set[u.name] {
			continue
		}
		if slices.ContainsFunc(c.p.Secrets, func(n Name) bool { return n.Name == u.name }) {
			continue
		}
		c.d.warnf(c.offsetPos(v, u.off), "%s is the instance shell's variable %s, which this command never sets (it expands to nothing); did you mean the plan's var, ${{ vars.%s }}?", clip(u.text), u.name, u.name)
	}
}

// typoCandidates reports, for each of spacedOpenRE, bareBracesRE (a match
// not right after a $) and shellVarRE, whether text has what a match needs:
// a $ followed by a blank, or by { and a blank; a {{ not right after a $;
// a $ followed by a letter or _, or by { and a letter or _.
func typoCandidates(text string) (spaced, braces, shellVar bool) {
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '$':
			next := byte(0)
			if i+1 < len(text) {
				next = text[i+1]
			}
			switch {
			case isRESpace(next):
				spaced = true
			case next == '{' && i+2 < len(text):
				spaced = spaced || isRESpace(text[i+2])
				shellVar = shellVar || isIdentStart(text[i+2])
			case isIdentStart(next):
				shellVar = true
			}
		case '{':
			if i+1 < len(text) && text[i+1] == '{' && (i == 0 || text[i-1] != '$') {
				braces = true
			}
		}
	}
	return spaced, braces, shellVar
}

// isRESpace is \s of Go's regular expressions.
func isRESpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'
}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// findAll is re.FindAllStringSubmatchIndex(text, -1) when candidate, and
// nothing otherwise.
func findAll(candidate bool, re *regexp.Regexp, text string) [][]int {
	if !candidate {
		return nil
	}
	return re.FindAllStringSubmatchIndex(text, -1)
}

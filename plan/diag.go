package plan

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Pos is a position in a plan file. Line and Col are 1-based; a zero Line
// means the position is unknown (the file as a whole).
type Pos struct {
	File string
	Line int
	Col  int
}

// String renders the position as FILE:LINE:COL (or FILE when unknown).
func (p Pos) String() string {
	if p.Line == 0 {
		return p.File
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// Severity tells errors, which block a plan, from warnings, which don't.
type Severity int

// Severities.
const (
	Error Severity = iota
	Warning
)

func (s Severity) String() string {
	if s == Warning {
		return "warning"
	}
	return "error"
}

// Diagnostic is one problem found in a plan.
type Diagnostic struct {
	Pos      Pos
	Severity Severity
	Message  string
}

// String renders the diagnostic as "FILE:LINE:COL: error: message".
func (d Diagnostic) String() string {
	return fmt.Sprintf("%s: %s: %s", d.Pos, d.Severity, d.Message)
}

// Diagnostics is a list of problems, the result of loading and checking a plan.
type Diagnostics []Diagnostic

// HasErrors reports whether any diagnostic is an error.
func (ds Diagnostics) HasErrors() bool {
	return slices.ContainsFunc(ds, func(d Diagnostic) bool { return d.Severity == Error })
}

// Errors returns only the errors.
func (ds Diagnostics) Errors() Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if d.Severity == Error {
			out = append(out, d)
		}
	}
	return out
}

// Sort orders diagnostics by file, line, column, then message, and drops
// exact duplicates.
func (ds Diagnostics) Sort() Diagnostics {
	slices.SortStableFunc(ds, func(a, b Diagnostic) int {
		return cmp.Or(
			cmp.Compare(a.Pos.File, b.Pos.File),
			cmp.Compare(a.Pos.Line, b.Pos.Line),
			cmp.Compare(a.Pos.Col, b.Pos.Col),
			cmp.Compare(a.Severity, b.Severity),
			cmp.Compare(a.Message, b.Message),
		)
	})
	return slices.Compact(ds)
}

// Error makes Diagnostics usable as an error: one diagnostic per line.
func (ds Diagnostics) Error() string {
	lines := make([]string, len(ds))
	for i, d := range ds {
		lines[i] = d.String()
	}
	return strings.Join(lines, "\n")
}

// Err returns the diagnostics as an error when any of them is an error, else nil.
func (ds Diagnostics) Err() error {
	if !ds.HasErrors() {
		return nil
	}
	return ds
}

// diags collects diagnostics while loading.
type diags struct{ list Diagnostics }

func (c *diags) errorf(p Pos, format string, args ...any) {
	c.list = append(c.list, Diagnostic{Pos: p, Severity: Error, Message: fmt.Sprintf(format, args...)})
}

func (c *diags) warnf(p Pos, format string, args ...any) {
	c.list = append(c.list, Diagnostic{Pos: p, Severity: Warning, Message: fmt.Sprintf(format, args...)})
}

// clip shortens a user string for a message so a 1 MB value can't flood the terminal.
func clip(s string) string {
	const max = 60
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	return string(r[:max]) + "…"
}

func sortStrings(s []string) { slices.Sort(s) }

// Snippet renders the source line of p with a caret under its column, for
// human diagnostics:
//
//	12 |     needs: [pul]
//	   |             ^
//
// It is "" when p has no line or src has no such line. Tabs before the
// column are kept in the caret line, so the caret stays under its column.
func Snippet(src []byte, p Pos) string {
	if p.Line <= 0 {
		return ""
	}
	lines := strings.Split(string(src), "\n")
	if p.Line > len(lines) {
		return ""
	}
	line := strings.TrimRight(lines[p.Line-1], "\r")
	num := strconv.Itoa(p.Line)
	gutter := strings.Repeat(" ", max(0, 5-len(num)))
	out := gutter + num + " | " + line + "\n"
	if p.Col > 0 {
		var pad strings.Builder
		for i, r := range []rune(line) {
			if i >= p.Col-1 {
				break
			}
			if r == '\t' {
				pad.WriteRune('\t')
			} else {
				pad.WriteByte(' ')
			}
		}
		out += strings.Repeat(" ", len(gutter)+len(num)) + " | " + pad.String() + "^\n"
	}
	return out
}

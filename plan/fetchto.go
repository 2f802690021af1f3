package plan

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// LocalDirs are the directories on this machine that a fetch must never
// replace: fetch renames what stands at its with.to aside and removes it,
// so a to that names one of them, or a directory above one, would delete
// it. Empty fields are not checked.
type LocalDirs struct {
	Plan  string // the plan's directory
	Home  string // the user's home directory ($HOME)
	State string // taoflow's state directory (--state)
}

// HomeDirs is dirs with Home set to this user's home directory, when it
// is known.
func (d LocalDirs) HomeDirs() LocalDirs {
	if h, err := os.UserHomeDir(); err == nil {
		d.Home = h
	}
	return d
}

// CheckFetchTo checks a fetch step's with.to: text as substituted, abs the
// path it names on this machine (absolute, from the plan's directory when
// text is relative). It refuses a text with a ".." segment (as send
// refuses one: write the absolute path of a directory outside the plan's),
// and a path that is, or is above, the plan's directory, the home
// directory or the state directory, or that is inside the state directory,
// both as written and with the symlinks of its existing parent resolved.
// validate (for every value it knows) and the fetch step itself (before
// anything is copied) both call it.
func CheckFetchTo(text, abs string, dirs LocalDirs) error {
	if hasDotDot(filepath.ToSlash(text)) {
		return fmt.Errorf("with.to %q holds a \"..\" segment: fetch replaces its destination, so it must not climb out of where it is written; name the directory itself (an absolute path for one outside the plan's directory)", clip(text))
	}
	paths := []string{filepath.Clean(abs)}
	if real, ok := resolveParent(paths[0]); ok && real != paths[0] {
		paths = append(paths, real)
	}
	guarded := []struct{ dir, what string }{
		{dirs.Plan, "the plan's directory"},
		{dirs.Home, "your home directory"},
		{dirs.State, "taoflow's state directory"},
	}
	for _, p := range paths {
		for _, g := range guarded {
			if g.dir == "" {
				continue
			}
			for _, dir := range sameDirs(g.dir) {
				if atOrAbove(p, dir) {
					how := "is"
					if p != dir {
						how = "is above"
					}
					return fmt.Errorf("with.to %q (%s) %s %s %s: fetch replaces its destination and would delete it; name a directory of its own (results/...)", clip(text), p, how, g.what, dir)
				}
			}
		}
		if dirs.State != "" {
			for _, dir := range sameDirs(dirs.State) {
				if atOrAbove(dir, p) {
					return fmt.Errorf("with.to %q (%s) is inside taoflow's state directory %s: name a directory of its own (results/...)", clip(text), p, dir)
				}
			}
		}
	}
	return nil
}

// atOrAbove reports whether p is dir or a directory above it (both clean
// and absolute).
func atOrAbove(p, dir string) bool {
	return p == dir || p == "/" || strings.HasPrefix(dir, p+string(filepath.Separator))
}

// sameDirs is dir (made absolute) and, when it exists through symlinks,
// the path it resolves to.
func sameDirs(dir string) []string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return []string{filepath.Clean(dir)}
	}
	out := []string{abs}
	if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
		out = append(out, real)
	}
	return out
}

// resolveParent is p with the symlinks of its longest existing ancestor
// resolved (p's last element is not followed: fetch replaces a link that
// stands at with.to, not what it points to).
func resolveParent(p string) (string, bool) {
	dir, rest := filepath.Dir(p), []string{filepath.Base(p)}
	for {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			for i := len(rest) - 1; i >= 0; i-- {
				real = filepath.Join(real, rest[i])
			}
			return real, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		rest = append(rest, filepath.Base(dir))
		dir = parent
	}
}

// fetchTargets checks every fetch step's with.to once the --var values are
// in (CheckFetchTo), for each value it can take: literal text, vars and
// plan.dir, each cell's matrix and cell values (run.id and slot values,
// known only when the run starts, stand in as a plain name: their grammar
// holds no "/" or ".."). A to outside the plan's directory is a warning.
func fetchTargets(p *Plan, opts Options, d *diags) {
	dirs := LocalDirs{Plan: p.Dir(), State: opts.StateDir}.HomeDirs()
	for _, s := range p.AllSteps() {
		if s.Uses != KindFetch || s.With == nil {
			continue
		}
		v := s.With.Get("to")
		if !v.IsString() || v.Text == "" || erredOnLine(d, v.Pos) {
			continue
		}
		var m *Matrix
		if root := p.MatrixRoot(s); root != nil {
			m = root.Matrix
		}
		var t Template
		if HasExpr(v.Text) {
			var err error
			if t, err = ParseTemplate(v.Text); err != nil {
				continue // reported by the expression checks
			}
		}
		seen := map[string]bool{}
		var problem error
		warned := false
		eachCell(m, func(cs *cellScope) {
			if problem != nil {
				return
			}
			text := v.Text
			if HasExpr(text) {
				known := true
				lookup := cs.lookup(p)
				var small bool
				text, small = t.renderBounded(func(r Ref) (string, bool) {
					if val, ok := lookup(r); ok {
						return val, true
					}
					switch r.NS {
					case NSRun, NSSlot:
						return "x", true
					}
					known = false
					return "", false
				})
				if !small || !known || seen[text] {
					return
				}
				seen[text] = true
			}
			abs := text
			if !filepath.IsAbs(abs) {
				abs = filepath.Join(p.Dir(), abs)
			}
			abs = filepath.Clean(abs)
			if problem = CheckFetchTo(text, abs, dirs); problem != nil {
				return
			}
			if rel, err := filepath.Rel(p.Dir(), abs); !warned && (err != nil || rel == ".." || strings.HasPrefix(rel, "../")) {
				warned = true
				d.warnf(v.Pos, "with.to: %s is outside the plan's directory %s: fetch writes there all the same", clip(text), p.Dir())
			}
		})
		if problem != nil {
			d.errorf(v.Pos, "%v%s", problem, varSources(p, t))
		}
	}
}

// varSources says where the vars of t were set (" (vars.dest: --var
// dest=/home/me)"), for an error about a value they made.
func varSources(p *Plan, t Template) string {
	var out []string
	for _, r := range t.Refs() {
		if r.NS != NSVars {
			continue
		}
		for _, v := range p.Vars {
			if v.Name == r.Name {
				out = append(out, "vars."+v.Name+" is set by "+v.From)
			}
		}
	}
	if len(out) == 0 {
		return ""
	}
	return " (" + strings.Join(out, "; ") + ")"
}

// erredOnLine reports whether d already holds an error on pos's line (a
// ".." value the path checks found): one cause, one error.
func erredOnLine(d *diags, pos Pos) bool {
	for _, x := range d.list {
		if x.Severity == Error && x.Pos.File == pos.File && x.Pos.Line == pos.Line {
			return true
		}
	}
	return false
}

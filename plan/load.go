package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// Options change how a plan is loaded.
type Options struct {
	// Vars override the plan's vars (from --var NAME=VALUE). Naming a var
	// the plan doesn't declare is an error.
	Vars map[string]string
	// Sources say where each of Vars was set (--var-file lines); a var
	// without one came from --var NAME=VALUE.
	Sources map[string]VarSource
	// Strict makes every warning an error (--strict).
	Strict bool
	// StateDir is taoflow's state directory (--state), which no fetch may
	// replace (CheckFetchTo); empty is not checked.
	StateDir string
}

// VarSource is where an overriding var value was set.
type VarSource struct {
	Pos  Pos    // the file and line of a --var-file entry
	From string // "--var-file vars.yaml line 3"
}

// Load reads and checks the plan file at path. The plan is returned even
// when it has errors, for tools that show what they can; callers must not
// run a plan whose Diagnostics HasErrors.
func Load(path string, opts Options) (*Plan, Diagnostics) {
	data, err := readFile(path)
	if err != nil {
		return nil, Diagnostics{{Pos: Pos{File: path}, Severity: Error, Message: "cannot read the plan: " + err.Error()}}
	}
	return Parse(path, data, opts)
}

// Parse checks plan data read from file (used in positions).
func Parse(file string, data []byte, opts Options) (*Plan, Diagnostics) {
	d := &diags{}
	root := parseTree(file, data, d)
	if root == nil {
		return nil, d.list.Sort()
	}
	// The schema and the checks only read the tree, and diagnostics are
	// sorted in full at the end: the schema is checked alongside.
	sd := &diags{}
	validated := make(chan struct{})
	go func() {
		defer close(validated)
		validateSchema(root, sd)
	}()
	var p *Plan
	if root.Kind == Map {
		p = build(file, root)
		p.source = data
		sum := sha256.Sum256(data)
		p.Hash = hex.EncodeToString(sum[:])
		// --var and --var-file first: every check then sees the values
		// the run will use (a path a --var moves out of its directory, a
		// send from a --var names).
		overrideVars(p, opts, d)
		checkOverrides(p, opts, d)
		check(p, d)
		checkValues(p, d)
		fetchTargets(p, opts, d)
	}
	<-validated
	d.list = append(sd.list, d.list...)
	if p != nil {
		if !d.list.HasErrors() {
			lint(p, d) // advice for a plan that is otherwise right
		}
	}
	if opts.Strict {
		strict(d)
	}
	return p, d.list.Sort()
}

// overrideVars applies --var values. Unknown names are errors placed on the
// command line, not in the file.
func overrideVars(p *Plan, opts Options, d *diags) {
	vars := opts.Vars
	names := make([]string, 0, len(vars))
	for k := range vars {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		src, ok := opts.Sources[k]
		if !ok {
			src = VarSource{Pos: Pos{File: "--var " + k}, From: "--var " + k + "=" + clip(vars[k])}
		}
		i := slices.IndexFunc(p.Vars, func(v Var) bool { return v.Name == k })
		if i < 0 {
			var known []string
			for _, v := range p.Vars {
				known = append(known, v.Name)
			}
			hint := " (it declares none)"
			if len(known) > 0 {
				hint = " (it declares: " + strings.Join(known, ", ") + ")"
			}
			d.errorf(src.Pos, "%s declares no var %q%s", p.File, k, hint)
			continue
		}
		if vars[k] == "" && p.Vars[i].Value != "" {
			d.errorf(src.Pos, "%s sets var %q to an empty value; its default is %q (%s): give a value, or leave it out to keep the default", src.From, k, clip(p.Vars[i].Value), p.Vars[i].From)
			continue
		}
		p.Vars[i].Value = vars[k]
		p.Vars[i].From = src.From
	}
}

// ParseVarFlags turns NAME=VALUE strings into a map.
func ParseVarFlags(flags []string) (map[string]string, error) {
	out := map[string]string{}
	for _, f := range flags {
		k, v, ok := strings.Cut(f, "=")
		if !ok || !isIdent(k) {
			return nil, fmt.Errorf("--var %q: expected NAME=VALUE", clip(f))
		}
		out[k] = v
	}
	return out, nil
}

// ReadVarFiles reads --var-file files, each a YAML mapping of var names to
// scalar values, in order: a later file wins. Problems are diagnostics at
// their line.
func ReadVarFiles(paths []string) (map[string]string, map[string]VarSource, Diagnostics) {
	vars, sources := map[string]string{}, map[string]VarSource{}
	d := &diags{}
	for _, path := range paths {
		data, err := readFile(path)
		if err != nil {
			d.errorf(Pos{File: path}, "cannot read the var file: %s", err)
			continue
		}
		root := parseTree(path, data, d)
		if root == nil {
			continue
		}
		if root.Kind != Map {
			d.errorf(root.Pos, "a var file is a mapping of var names to values, such as poll: 30s")
			continue
		}
		for _, f := range root.Fields {
			if f.Value.Kind != Scalar && f.Value.Kind != Null {
				d.errorf(f.Value.Pos, "var %q: a var's value is a string or a number, not %s", clip(f.Key), kindWord(f.Value))
				continue
			}
			vars[f.Key] = f.Value.Text
			sources[f.Key] = VarSource{Pos: f.KeyPos, From: fmt.Sprintf("--var-file %s line %d", path, f.KeyPos.Line)}
		}
	}
	return vars, sources, d.list.Sort()
}

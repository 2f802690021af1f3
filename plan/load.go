package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
)

// Options change how a plan is loaded.
type Options struct {
	// Vars override the plan's vars (from --var NAME=VALUE). Naming a var
	// the plan doesn't declare is an error.
	Vars map[string]string
}

// Load reads and checks the plan file at path. The plan is returned even
// when it has errors, for tools that show what they can; callers must not
// run a plan whose Diagnostics HasErrors.
func Load(path string, opts Options) (*Plan, Diagnostics) {
	data, err := os.ReadFile(path)
	if err != nil {
		msg := err.Error()
		if os.IsNotExist(err) {
			msg = "no such file"
		}
		return nil, Diagnostics{{Pos: Pos{File: path}, Severity: Error, Message: "cannot read the plan: " + msg}}
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
	validateSchema(root, d)
	var p *Plan
	if root.Kind == Map {
		p = build(file, root)
		p.source = data
		sum := sha256.Sum256(data)
		p.Hash = hex.EncodeToString(sum[:])
		check(p, d)
		overrideVars(p, opts.Vars, d)
	}
	return p, d.list.Sort()
}

// overrideVars applies --var values. Unknown names are errors placed on the
// command line, not in the file.
func overrideVars(p *Plan, vars map[string]string, d *diags) {
	names := make([]string, 0, len(vars))
	for k := range vars {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
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
			d.errorf(Pos{File: "--var " + k}, "%s declares no var %q%s", p.File, k, hint)
			continue
		}
		p.Vars[i].Value = vars[k]
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

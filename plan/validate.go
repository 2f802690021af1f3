package plan

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/taoflow/taoflow/schema"
)

// validateSchema checks the tree against the plan's JSON Schema and reports
// each failure at the key or value it concerns.
func validateSchema(root *Value, d *diags) {
	if schema.Valid(jsonView{root}) {
		return // read in place; only a plan with failures is copied for the errors
	}
	err := schema.Validate(root.JSON())
	if err == nil {
		return
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		d.errorf(root.Pos, "internal error: schema validation failed: %v", err)
		return
	}
	m := schemaMapper{root: root, d: d}
	m.walk(ve)
}

type schemaMapper struct {
	root *Value
	d    *diags
	base string // JSON pointer of root in the plan, for messages ("" for the plan)
}

// walk reports the leaves of a validation error tree. For oneOf/anyOf it
// reports the alternative that got furthest instead of every alternative.
func (m *schemaMapper) walk(ve *jsonschema.ValidationError) {
	if g := matrixListRE.FindStringSubmatch(ve.InstanceLocation); g != nil {
		// GitHub Actions' matrix include/exclude: one message at the key,
		// not a type error per entry.
		_, kp, _ := m.root.Lookup(g[1])
		m.d.errorf(kp, "matrix %s: is not supported (it is GitHub Actions'): a matrix here is every combination of its keys' values; for an irregular sweep, split it into several steps (each with its own matrix), or make the odd values a key of their own", g[2])
		return
	}
	kw := lastToken(ve.KeywordLocation)
	if (kw == "oneOf" || kw == "anyOf") && len(ve.Causes) > 0 {
		m.alternatives(ve)
		return
	}
	if len(ve.Causes) > 0 {
		for _, c := range ve.Causes {
			m.walk(c)
		}
		return
	}
	m.leaf(ve, kw)
}

func (m *schemaMapper) alternatives(ve *jsonschema.ValidationError) {
	var types []string
	var best *jsonschema.ValidationError
	for _, c := range ve.Causes {
		leaf := firstLeaf(c)
		if lastToken(leaf.KeywordLocation) == "type" && leaf.InstanceLocation == ve.InstanceLocation {
			if t := typeRE.FindStringSubmatch(leaf.Message); t != nil {
				types = append(types, strings.Split(t[1], " or ")...)
			}
			continue
		}
		if strings.Contains(leaf.AbsoluteKeywordLocation, "/$defs/expr/") {
			continue // the "or an expression" branch of a constrained string
		}
		if best == nil {
			best = c
		}
	}
	if best != nil {
		m.walk(best)
		return
	}
	val, _, _ := m.root.Lookup(ve.InstanceLocation)
	words := make([]string, 0, len(types))
	for _, t := range dedup(types) {
		words = append(words, yamlType(t))
	}
	m.d.errorf(val.Pos, "%s: expected %s, got %s", subject(m.base+ve.InstanceLocation), strings.Join(words, " or "), kindWord(val))
}

var (
	typeRE   = regexp.MustCompile(`^expected (.+), but got (\w+)$`)
	quotedRE = regexp.MustCompile(`'((?:[^'\\]|\\.)*)'`)
	indexRE  = regexp.MustCompile(`index (\d+) and (\d+)`)
	// matrixListRE matches a value under a matrix's include or exclude key.
	matrixListRE = regexp.MustCompile(`^(/(?:steps|finally)/\d+/matrix/(include|exclude))(?:/.*)?$`)
	stepRE       = regexp.MustCompile(`^/(?:steps|finally)/\d+$`)
)

// habit returns the advice for a key that comes from another tool (GitHub
// Actions, mostly) at the mapping at ptr, or "".
func (m *schemaMapper) habit(ptr, name string) string {
	step := stepRE.MatchString(ptr)
	switch {
	case step && name == "run":
		return "run: is GitHub Actions' shell step; here write uses: run and put the command under with: {command: …}, with a wait step that needs it"
	case name == "runs-on" && step:
		return "the instances a step runs on are its on: [NAME, …] (default: every instance)"
	case name == "runs-on":
		return "instances are declared under instances:, and each step says where it runs with on: [NAME, …]"
	case step && (name == "depends_on" || name == "depends-on" || name == "dependsOn" || name == "requires"):
		return "the steps a step waits for are its needs: [STEP, …]"
	case step && name == "if":
		return "conditions are not supported: a step runs when the steps in its needs succeeded; continue_on_error: true lets its dependents run after it fails, and steps under finally: always run"
	case step && (name == "timeout-minutes" || name == "timeout_minutes" || name == "timeoutMinutes"):
		v, _, _ := m.root.Lookup(ptr + "/" + escapePointer(name))
		n := "60"
		if v != nil && v.Kind == Scalar && v.Tag == "!!int" {
			n = v.Text
		}
		return "write the limit as a duration: timeout: " + n + "m"
	case step && name == "env":
		return "a step has no env: list the secrets a run or upload-s3 step needs under with.env (their values come from taoflow's environment), and write plain values into the command (or make them vars:)"
	}
	return ""
}

func (m *schemaMapper) leaf(ve *jsonschema.ValidationError, kw string) {
	val, keyPos, _ := m.root.Lookup(ve.InstanceLocation)
	subj := subject(m.base + ve.InstanceLocation)
	frag := schemaFragment(parentLocation(ve.AbsoluteKeywordLocation))
	if strings.Contains(ve.KeywordLocation, "/propertyNames/") || strings.HasSuffix(ve.KeywordLocation, "/propertyNames") {
		m.d.errorf(keyPos, "invalid name %q: %s", clip(lastToken(ve.InstanceLocation)), describeConstraint(kw, frag))
		return
	}
	switch kw {
	case "type":
		if ve.InstanceLocation == "" {
			m.d.errorf(val.Pos, "the plan must be a mapping (taoflow:, name:, instances:, steps:), not %s", kindWord(val))
			return
		}
		want := "a value of another type"
		if t := typeRE.FindStringSubmatch(ve.Message); t != nil {
			var words []string
			for _, w := range strings.Split(t[1], " or ") {
				words = append(words, yamlType(w))
			}
			want = strings.Join(words, " or ")
		}
		m.d.errorf(val.Pos, "%s: expected %s, got %s", subj, want, kindWord(val))
	case "required":
		for _, name := range quoted(ve.Message) {
			if name == "uses" && val.Get("run") != nil && stepRE.MatchString(ve.InstanceLocation) {
				continue // the run: key is the root cause, and is reported with the fix
			}
			m.d.errorf(keyPos, "%s is missing the required key %q", subjectOr(ve.InstanceLocation, "the plan"), name)
		}
	case "additionalProperties":
		allowed := fragKeys(frag, "properties")
		for _, name := range quoted(ve.Message) {
			_, kp, _ := m.root.Lookup(ve.InstanceLocation + "/" + escapePointer(name))
			hint := ""
			if len(allowed) > 0 {
				hint = " (allowed: " + strings.Join(allowed, ", ") + ")"
			}
			for _, a := range allowed {
				if editDistance(name, a) <= 2 {
					hint = fmt.Sprintf(" (did you mean %q?)", a)
					break
				}
			}
			if h := m.habit(m.base+ve.InstanceLocation, name); h != "" {
				hint = ": " + h
			}
			m.d.errorf(kp, "unknown key %q in %s%s", clip(name), where(ve.InstanceLocation, m.root), hint)
		}
	case "const":
		if ve.InstanceLocation == "/taoflow" {
			m.d.errorf(val.Pos, "unsupported plan format %s: this taoflow reads format 1", clip(val.Text))
			return
		}
		m.d.errorf(val.Pos, "%s: %s", subj, ve.Message)
	case "enum":
		values := fmt.Sprint(frag["enum"])
		if list, ok := frag["enum"].([]any); ok {
			var s []string
			for _, e := range list {
				s = append(s, fmt.Sprint(e))
			}
			values = strings.Join(s, ", ")
		}
		if ve.InstanceLocation != "" && lastToken(ve.InstanceLocation) == "uses" {
			m.d.errorf(val.Pos, "unknown step kind %q (expected one of: %s)", clip(val.Text), values)
			return
		}
		m.d.errorf(val.Pos, "%s: %q is not one of: %s", subj, clip(val.Text), values)
	case "uniqueItems":
		if idx := indexRE.FindStringSubmatch(ve.Message); idx != nil {
			j, _ := strconv.Atoi(idx[2])
			if j < len(val.Items) {
				m.d.errorf(val.Items[j].Pos, "%s: duplicate entry %q", subj, clip(val.Items[j].Text))
				return
			}
		}
		m.d.errorf(val.Pos, "%s: entries must be unique", subj)
	case "minProperties", "minItems":
		if val.Kind == Map && len(val.Fields) == 0 || val.Kind == List && len(val.Items) == 0 {
			if h, ok := frag["x-empty-hint"].(string); ok {
				m.d.errorf(keyPos, "%s %s", subj, h)
				return
			}
			m.d.errorf(keyPos, "%s must not be empty", subj)
			return
		}
		m.d.errorf(keyPos, "%s: %s", subj, describeConstraint(kw, frag))
	default:
		if val.IsString() && HasExpr(val.Text) && (kw == "pattern" || kw == "enum") {
			return // the expression itself is checked (and reported) by the static checks
		}
		shown := clip(val.Text)
		if val.IsString() {
			shown = fmt.Sprintf("%q", shown)
		}
		m.d.errorf(val.Pos, "%s: %s %s", subj, shown, describeConstraint(kw, frag))
	}
}

// describeConstraint turns a failed keyword into words.
func describeConstraint(kw string, frag map[string]any) string {
	switch kw {
	case "pattern":
		if d, ok := frag["x-pattern-hint"].(string); ok {
			return d
		}
		if p, ok := frag["pattern"].(string); ok && strings.Contains(p, "ns|us") {
			return "is not a duration (use Go syntax such as 90s, 10m, 1h30m)"
		}
		return fmt.Sprintf("does not match %v", frag["pattern"])
	case "maxLength":
		return fmt.Sprintf("is longer than %v characters", frag["maxLength"])
	case "minLength":
		return fmt.Sprintf("is shorter than %v characters", frag["minLength"])
	case "minimum":
		return fmt.Sprintf("must be at least %v", frag["minimum"])
	case "maximum":
		return fmt.Sprintf("must be at most %v", frag["maximum"])
	case "exclusiveMinimum":
		return fmt.Sprintf("must be above %v", frag["exclusiveMinimum"])
	case "minItems":
		return fmt.Sprintf("needs at least %v entries", frag["minItems"])
	case "minProperties":
		return fmt.Sprintf("needs at least %v keys", frag["minProperties"])
	case "maxItems":
		return fmt.Sprintf("allows at most %v entries", frag["maxItems"])
	}
	return "is not allowed here (" + kw + ")"
}

var (
	schemaDocOnce sync.Once
	schemaDoc     map[string]any
)

// schemaFragment returns the schema object at an absolute keyword location
// ("…#/$defs/step/properties/id").
func schemaFragment(absLoc string) map[string]any {
	schemaDocOnce.Do(func() { _ = json.Unmarshal(schema.JSON, &schemaDoc) })
	_, ptr, _ := strings.Cut(absLoc, "#")
	var cur any = schemaDoc
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			cur = c[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	m, _ := cur.(map[string]any)
	return m
}

func fragKeys(frag map[string]any, key string) []string {
	props, _ := frag[key].(map[string]any)
	out := make([]string, 0, len(props))
	for k := range props {
		out = append(out, k)
	}
	sortStrings(out)
	return out
}

func firstLeaf(ve *jsonschema.ValidationError) *jsonschema.ValidationError {
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	return ve
}

func lastToken(ptr string) string {
	if i := strings.LastIndexByte(ptr, '/'); i >= 0 {
		ptr = ptr[i+1:]
	}
	return strings.ReplaceAll(strings.ReplaceAll(ptr, "~1", "/"), "~0", "~")
}

func parentLocation(loc string) string {
	if i := strings.LastIndexByte(loc, '/'); i >= 0 {
		return loc[:i]
	}
	return loc
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// subject names the value at a JSON pointer the way a user wrote it:
// "steps[2].with.image".
func subject(ptr string) string {
	if ptr == "" {
		return "the plan"
	}
	var b strings.Builder
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		if _, err := strconv.Atoi(tok); err == nil {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(clip(tok))
	}
	return b.String()
}

func subjectOr(ptr, root string) string {
	if ptr == "" {
		return root
	}
	return subject(ptr)
}

// where describes the mapping at ptr for an "unknown key" message, naming
// the step kind for with: blocks.
func where(ptr string, root *Value) string {
	if ptr == "" {
		return "the plan"
	}
	if lastToken(ptr) == "with" {
		if v, _, ok := root.Lookup(parentLocation(ptr) + "/uses"); ok && v.Kind == Scalar {
			return fmt.Sprintf("with: of a %s step", clip(v.Text))
		}
	}
	return subject(ptr)
}

func quoted(msg string) []string {
	var out []string
	for _, m := range quotedRE.FindAllStringSubmatch(msg, -1) {
		out = append(out, m[1])
	}
	return out
}

func yamlType(t string) string {
	switch t {
	case "object":
		return "a mapping"
	case "array":
		return "a list"
	case "string":
		return "a string"
	case "integer":
		return "an integer"
	case "number":
		return "a number"
	case "boolean":
		return "true or false"
	case "null":
		return "nothing"
	}
	return t
}

func kindWord(v *Value) string {
	switch v.Kind {
	case Null:
		return "nothing"
	case List:
		return "a list"
	case Map:
		return "a mapping"
	}
	switch v.Tag {
	case "!!int":
		return "an integer"
	case "!!float":
		return "a number"
	case "!!bool":
		return "a boolean"
	}
	return "a string"
}

func dedup(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

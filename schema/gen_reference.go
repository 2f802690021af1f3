package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// referencePath is where the rendered reference lives, relative to the
// repository root.
const referencePath = "docs/plan-reference.md"

// Reference renders the Markdown reference of the plan format from the
// schema: the top-level keys, the keys of an instance, of the platform
// mapping and of a step, and then the `with:` settings of each step kind.
// Its output is checked in as docs/plan-reference.md; regenerate it with
//
//	UPDATE_GOLDEN=1 go test ./schema
func Reference() string {
	root, err := parseOrdered(JSON)
	if err != nil {
		// The embedded file is checked by this package's tests.
		panic("schema: embedded taoflow.schema.json: " + err.Error())
	}
	r := renderer{root: root}
	return r.render()
}

// object is a JSON object that remembers the order of its keys, so the
// reference lists keys in the order the schema file does.
type object struct {
	keys []string
	vals map[string]any
}

func (o *object) get(key string) any {
	if o == nil {
		return nil
	}
	return o.vals[key]
}

func (o *object) obj(key string) *object {
	v, _ := o.get(key).(*object)
	return v
}

func (o *object) str(key string) string {
	v, _ := o.get(key).(string)
	return v
}

// parseOrdered decodes JSON into *object, []any, string, json.Number, bool
// and nil values.
func parseOrdered(data []byte) (*object, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("unexpected data after the top-level value")
	}
	o, ok := v.(*object)
	if !ok {
		return nil, fmt.Errorf("top-level value is not an object")
	}
	return o, nil
}

func parseValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		o := &object{vals: map[string]any{}}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			key, _ := kt.(string)
			v, err := parseValue(dec)
			if err != nil {
				return nil, err
			}
			if _, dup := o.vals[key]; dup {
				return nil, fmt.Errorf("duplicate key %q", key)
			}
			o.keys = append(o.keys, key)
			o.vals[key] = v
		}
		_, err := dec.Token() // '}'
		return o, err
	case json.Delim('['):
		list := []any{}
		for dec.More() {
			v, err := parseValue(dec)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		_, err := dec.Token() // ']'
		return list, err
	}
	return tok, nil
}

type renderer struct {
	root *object
	b    strings.Builder
}

func (r *renderer) render() string {
	defs := r.root.obj("$defs")
	props := r.root.obj("properties")

	r.printf("# %s\n\n", r.root.str("title"))
	r.printf("<!-- Generated from schema/taoflow.schema.json by schema.Reference. Do not edit: run UPDATE_GOLDEN=1 go test ./schema -->\n\n")
	r.printf("%s\n\n", r.root.str("description"))
	r.printf("This page is generated from the JSON Schema `schema/taoflow.schema.json` (`$id` %s), which taoflow validates every plan against and which editors can use to check plans and show these descriptions.\n\n", r.root.str("$id"))

	r.printf("## Top-level keys\n\n")
	r.table(r.root, "")

	r.printf("## Instance keys\n\n")
	r.printf("Each entry of `instances` is keyed by the instance's name. %s\n\n", defs.obj("instance").str("description"))
	r.table(defs.obj("instance"), "")

	if a := defs.obj("autostop"); a != nil {
		r.printf("## Autostop keys\n\n")
		r.printf("The keys of `autostop`, at the top level (every instance's default) or on an instance. %s\n\n", a.str("description"))
		r.table(a, "autostop.")
	}

	r.printf("## Platform keys\n\n")
	platform := props.obj("platform")
	r.printf("%s\n\n", platform.str("description"))
	for _, alt := range list(platform.get("oneOf")) {
		if o, ok := alt.(*object); ok && o.obj("properties") != nil {
			r.printf("The mapping form takes these keys:\n\n")
			r.table(o, "")
		}
	}

	r.printf("## Step keys\n\n")
	r.printf("Each entry of `steps` and `finally`: %s\n\n", lowerFirst(defs.obj("step").str("description")))
	r.table(defs.obj("step"), "")

	r.printf("## Step kinds\n\n")
	r.printf("The keys allowed under a step's `with:` depend on its `uses`. Where a type below says *expression*, the value may instead be %s\n\n", lowerFirst(defs.obj("expr").str("description")))
	for _, kind := range list(defs.obj("step").obj("properties").obj("uses").get("enum")) {
		k, _ := kind.(string)
		with := defs.obj("with-" + k)
		r.printf("### `%s`\n\n", k)
		r.printf("%s\n\n", with.str("description"))
		if len(with.obj("properties").keys) == 0 {
			r.printf("No `with:` settings.\n\n")
			continue
		}
		r.table(with, "with.")
	}
	return strings.TrimRight(r.b.String(), "\n") + "\n"
}

func (r *renderer) printf(format string, args ...any) {
	fmt.Fprintf(&r.b, format, args...)
}

// table renders the properties of schema s, one row each, followed by the
// rows of any property that is itself a mapping with declared keys.
func (r *renderer) table(s *object, prefix string) {
	r.printf("| Key | Type | Required | Default | Description |\n")
	r.printf("|---|---|---|---|---|\n")
	r.rows(s, prefix)
	r.printf("\n")
}

func (r *renderer) rows(s *object, prefix string) {
	props := s.obj("properties")
	if props == nil {
		return
	}
	for _, key := range props.keys {
		p := props.obj(key)
		name := prefix + key
		def := ""
		if d, ok := p.vals["default"]; ok {
			def = "`" + yamlText(d) + "`"
		}
		r.printf("| `%s` | %s | %s | %s | %s |\n", name, cell(r.typeText(p)), r.requiredText(s, key), cell(def), cell(r.description(p)))
		if p.obj("properties") != nil {
			r.rows(p, name+".")
		}
	}
}

// requiredText says whether key is required in s, also when it is required
// only without another key (`if: {not: {required: [X]}}, then: {required: [key]}`).
func (r *renderer) requiredText(s *object, key string) string {
	if contains(list(s.get("required")), key) {
		return "yes"
	}
	if contains(list(s.obj("then").get("required")), key) {
		if other := list(s.obj("if").obj("not").get("required")); len(other) == 1 {
			return fmt.Sprintf("without `%v`", other[0])
		}
		return "sometimes"
	}
	return ""
}

// description is the schema's description, or that of the definition it
// refers to.
func (r *renderer) description(s *object) string {
	if d := s.str("description"); d != "" {
		return d
	}
	if t := r.resolve(s.str("$ref")); t != nil {
		return t.str("description")
	}
	return ""
}

// resolve returns the local definition a "#/$defs/NAME" reference names.
func (r *renderer) resolve(ref string) *object {
	name, ok := strings.CutPrefix(ref, "#/$defs/")
	if !ok {
		return nil
	}
	return r.root.obj("$defs").obj(name)
}

// typeText describes the values schema s accepts, in words: its title if it
// has one (as the $defs do), else what its keywords allow.
func (r *renderer) typeText(s *object) string {
	if s == nil {
		return "any"
	}
	if title := s.str("title"); title != "" {
		return title
	}
	if ref := s.str("$ref"); ref != "" {
		return r.typeText(r.resolve(ref))
	}
	if c, ok := s.vals["const"]; ok {
		return "`" + yamlText(c) + "`"
	}
	if e := list(s.get("enum")); e != nil {
		words := make([]string, len(e))
		for i, v := range e {
			words[i] = "`" + yamlText(v) + "`"
		}
		return strings.Join(words, " / ")
	}
	for _, kw := range []string{"oneOf", "anyOf"} {
		if alts := list(s.get(kw)); alts != nil {
			var words []string
			for _, alt := range alts {
				o, _ := alt.(*object)
				words = appendUnique(words, r.typeText(o))
			}
			return joinOr(words)
		}
	}
	var types []string
	switch t := s.get("type").(type) {
	case string:
		types = []string{t}
	case []any:
		for _, v := range t {
			if str, ok := v.(string); ok {
				types = append(types, str)
			}
		}
	}
	if len(types) == 0 {
		return "any"
	}
	words := make([]string, 0, len(types))
	for _, t := range types {
		words = append(words, r.typeWord(s, t))
	}
	return joinOr(words)
}

// typeWord describes one JSON type of schema s.
func (r *renderer) typeWord(s *object, t string) string {
	switch t {
	case "array":
		items, _ := s.get("items").(*object)
		if items == nil {
			return "list"
		}
		return "list of " + plural(r.typeText(items))
	case "object":
		if ap, ok := s.get("additionalProperties").(*object); ok {
			return "mapping of names to " + plural(r.typeText(ap))
		}
		return "mapping"
	case "integer":
		lo, hasLo := s.vals["minimum"]
		hi, hasHi := s.vals["maximum"]
		switch {
		case hasLo && hasHi:
			return fmt.Sprintf("integer (%v to %v)", lo, hi)
		case hasLo:
			return fmt.Sprintf("integer (at least %v)", lo)
		case hasHi:
			return fmt.Sprintf("integer (at most %v)", hi)
		}
		return "integer"
	case "null":
		return "empty"
	}
	return t
}

// yamlText writes a JSON value the way a user would write it in YAML flow
// style.
func yamlText(v any) string {
	switch v := v.(type) {
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = yamlText(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case *object:
		parts := make([]string, len(v.keys))
		for i, k := range v.keys {
			parts[i] = k + ": " + yamlText(v.vals[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case nil:
		return "null"
	}
	return fmt.Sprint(v)
}

// cell makes text safe inside a Markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

func joinOr(words []string) string {
	switch len(words) {
	case 0:
		return ""
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// plural turns "step id" into "step ids" and "string, number or boolean"
// into "strings, numbers or booleans".
func plural(s string) string {
	for _, kind := range []string{"list", "mapping"} {
		if rest, ok := strings.CutPrefix(s, kind+" "); ok {
			return kind + "s " + rest
		}
	}
	var parts []string
	for _, or := range strings.Split(s, " or ") {
		var words []string
		for _, w := range strings.Split(or, ", ") {
			if !strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "`") && !strings.HasSuffix(w, ")") {
				w += "s"
			}
			words = append(words, w)
		}
		parts = append(parts, strings.Join(words, ", "))
	}
	return strings.Join(parts, " or ")
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

func contains(l []any, s string) bool {
	for _, v := range l {
		if v == s {
			return true
		}
	}
	return false
}

func appendUnique(words []string, w string) []string {
	for _, x := range words {
		if x == w {
			return words
		}
	}
	return append(words, w)
}

package plan

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/taoflow/taoflow/schema"
)

// The plan's tree as JSON: the value the schema validator takes, the view it
// reads in place, and JSON-pointer lookups.

// JSON converts the tree into the JSON-shaped value the schema validator
// takes: map[string]any, []any, string, json.Number, bool, nil.
func (v *Value) JSON() any {
	switch v.Kind {
	case Null:
		return nil
	case List:
		out := make([]any, len(v.Items))
		for i, it := range v.Items {
			out[i] = it.JSON()
		}
		return out
	case Map:
		out := make(map[string]any, len(v.Fields))
		for _, f := range v.Fields {
			out[f.Key] = f.Value.JSON()
		}
		return out
	}
	switch typ, text := v.scalarJSON(); typ {
	case "boolean":
		return text == "true"
	case "number":
		return json.Number(text)
	}
	return v.Text
}

// scalarJSON is the JSON type of scalar v as JSON gives it ("boolean",
// "number" or "string") and its text there: "true" or "false", a number's
// digits, the string.
func (v *Value) scalarJSON() (typ, text string) {
	switch v.Tag {
	case "!!bool":
		if b, err := strconv.ParseBool(strings.ToLower(v.Text)); err == nil {
			return "boolean", strconv.FormatBool(b)
		}
	case "!!int":
		t := strings.ReplaceAll(v.Text, "_", "")
		if i, err := strconv.ParseInt(t, 0, 64); err == nil {
			return "number", strconv.FormatInt(i, 10)
		}
		if f, err := strconv.ParseFloat(t, 64); err == nil && !math.IsInf(f, 0) {
			return "number", strconv.FormatFloat(f, 'g', -1, 64)
		}
	case "!!float":
		if f, err := strconv.ParseFloat(strings.ReplaceAll(v.Text, "_", ""), 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return "number", strconv.FormatFloat(f, 'g', -1, 64)
		}
	}
	return "string", v.Text
}

// jsonView is v as the JSON value JSON makes of it, read in place (a
// schema.Instance): the schema's shortcut for a valid plan needs no copy.
// Its mappings' members are in the order of their fields.
type jsonView struct{ v *Value }

var _ schema.Instance = jsonView{}

func (j jsonView) JSONType() string {
	switch j.v.Kind {
	case Null:
		return "null"
	case List:
		return "array"
	case Map:
		return "object"
	}
	typ, _ := j.v.scalarJSON()
	return typ
}

func (j jsonView) JSONText() string {
	if j.v.Kind != Scalar {
		return ""
	}
	if j.v.Tag == "!!str" {
		return j.v.Text // the common case, without scalarJSON's switch
	}
	_, text := j.v.scalarJSON()
	return text
}

func (j jsonView) JSONLen() int {
	switch j.v.Kind {
	case List:
		return len(j.v.Items)
	case Map:
		return len(j.v.Fields)
	}
	return 0
}

func (j jsonView) JSONItem(i int) schema.Instance { return jsonView{j.v.Items[i]} }

func (j jsonView) JSONMember(i int) (string, schema.Instance) {
	f := &j.v.Fields[i]
	return f.Key, jsonView{f.Value}
}

func (j jsonView) JSONLookup(name string) (schema.Instance, bool) {
	if j.v.Kind != Map {
		return nil, false
	}
	if f := j.v.Field(name); f != nil {
		return jsonView{f.Value}, true
	}
	return nil, false
}

// Lookup follows a JSON pointer ("/steps/3/with") through the tree and
// returns the value there, the position of the key that names it (the
// value's own position for list items and the root), and whether it exists.
func (v *Value) Lookup(pointer string) (val *Value, keyPos Pos, ok bool) {
	val, keyPos = v, v.Pos
	if pointer == "" || pointer == "/" {
		return val, keyPos, true
	}
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch val.Kind {
		case Map:
			f := val.Field(tok)
			if f == nil {
				return val, keyPos, false
			}
			val, keyPos = f.Value, f.KeyPos
		case List:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(val.Items) {
				return val, keyPos, false
			}
			val = val.Items[i]
			keyPos = val.Pos
		default:
			return val, keyPos, false
		}
	}
	return val, keyPos, true
}

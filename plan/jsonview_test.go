package plan

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rogpeppe/go-internal/txtar"

	"github.com/taoflow/taoflow/schema"
)

// TestJSONView checks that the schema reads the same value through
// jsonView as through JSON: the same types, texts and members, and the
// same answer from schema.Valid as from schema.Validate, on every plan of
// the diagnostics tests and the examples, and on scalars of every YAML
// type.
func TestJSONView(t *testing.T) {
	docs := map[string][]byte{
		"scalars": []byte(`{a: 1, b: 0x1F, c: 1_000, d: -0, e: 1.5, f: 1e3, g: .inf, h: .nan, i: 0o17, j: 99999999999999999999,
			k: true, l: False, m: yes, n: null, o: ~, p: "1", q: !!str 2, r: !!int "3", s: !!bool "true", t: !!float 4,
			u: !!bool "yes", v: !!int "x", w: 2001-12-14, x: [1, "a", [], {}], y: "", z: 1.0}`),
	}
	files, _ := filepath.Glob("testdata/diagnostics/*.txtar")
	for _, file := range files {
		ar, err := txtar.ParseFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range ar.Files {
			if f.Name == "plan.yaml" {
				docs[filepath.Base(file)] = f.Data
			}
		}
	}
	examples, _ := filepath.Glob("../examples/plans/*.yaml")
	for _, e := range examples {
		docs[e] = nil
	}
	if len(docs) < 10 {
		t.Fatalf("only %d documents found", len(docs))
	}
	for name, data := range docs {
		t.Run(name, func(t *testing.T) {
			d := &diags{}
			var root *Value
			if data == nil {
				if p, _ := Load(name, Options{}); p != nil {
					root = p.Root
				}
			} else {
				root = parseTree("plan.yaml", data, d)
			}
			if root == nil {
				t.Skip("not a YAML document")
			}
			if diff := cmp.Diff(numbers(root.JSON()), viewJSON(jsonView{root})); diff != "" {
				t.Errorf("jsonView differs from JSON (-JSON +jsonView):\n%s", diff)
			}
			valid := schema.Validate(root.JSON()) == nil
			if schema.Valid(jsonView{root}) != valid {
				t.Errorf("schema.Valid says %v, Validate %v", !valid, valid)
			}
		})
	}
}

// numbers writes the json.Numbers of a JSON-shaped value as viewJSON does.
func numbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		return "number " + string(v)
	case []any:
		for i := range v {
			v[i] = numbers(v[i])
		}
	case map[string]any:
		for k := range v {
			v[k] = numbers(v[k])
		}
	}
	return v
}

// viewJSON rebuilds the JSON-shaped value from what an Instance says.
func viewJSON(v schema.Instance) any {
	switch v.JSONType() {
	case "null":
		return nil
	case "boolean":
		return v.JSONText() == "true"
	case "number":
		return "number " + v.JSONText()
	case "string":
		return v.JSONText()
	case "array":
		out := []any{}
		for i := range v.JSONLen() {
			out = append(out, viewJSON(v.JSONItem(i)))
		}
		return out
	case "object":
		out := map[string]any{}
		for i := range v.JSONLen() {
			name, m := v.JSONMember(i)
			if l, ok := v.JSONLookup(name); !ok || !cmp.Equal(viewJSON(l), viewJSON(m)) {
				out["lookup of "+name] = "differs"
			}
			out[name] = viewJSON(m)
		}
		return out
	}
	return "type " + v.JSONType()
}

// FuzzJSONView: on any document, the schema reads the same through
// jsonView as through JSON, and Valid agrees with Validate.
func FuzzJSONView(f *testing.F) {
	files, _ := filepath.Glob("testdata/diagnostics/*.txtar")
	for _, file := range files {
		if ar, err := txtar.ParseFile(file); err == nil {
			for _, fl := range ar.Files {
				if fl.Name == "plan.yaml" {
					f.Add(fl.Data)
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		root := parseTree("f.yaml", data, &diags{})
		if root == nil || root.size > 10_000 {
			return
		}
		if diff := cmp.Diff(numbers(root.JSON()), viewJSON(jsonView{root})); diff != "" {
			t.Fatalf("jsonView differs from JSON (-JSON +jsonView):\n%s", diff)
		}
		if want := schema.Validate(root.JSON()) == nil; schema.Valid(jsonView{root}) != want {
			t.Fatalf("schema.Valid says %v, Validate %v", !want, want)
		}
	})
}

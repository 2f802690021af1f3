package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v5"
)

// metaschemaURL is the draft 2020-12 metaschema, built into jsonschema/v5
// (no network access is needed to compile it).
const metaschemaURL = "https://json-schema.org/draft/2020-12/schema"

// decode reads JSON the way jsonschema wants it: numbers as json.Number.
func decode(t *testing.T, text []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode: %v\n%s", err, text)
	}
	return v
}

func schemaDoc(t *testing.T) map[string]any {
	t.Helper()
	doc, ok := decode(t, JSON).(map[string]any)
	if !ok {
		t.Fatal("the schema is not a JSON object")
	}
	return doc
}

func TestCompileOnce(t *testing.T) {
	first, err := Compile()
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	second, err := Compile()
	if err != nil {
		t.Fatalf("second Compile: %v", err)
	}
	if first != second {
		t.Error("Compile returned a different schema on the second call; want the cached one")
	}
	if first.Location != URL+"#" {
		t.Errorf("compiled schema location = %q, want %q", first.Location, URL+"#")
	}
	if id := schemaDoc(t)["$id"]; id != URL {
		t.Errorf("$id = %v, want %q", id, URL)
	}
	if s := schemaDoc(t)["$schema"]; s != metaschemaURL {
		t.Errorf("$schema = %v, want %q", s, metaschemaURL)
	}
}

func TestValidAgainstMetaschema(t *testing.T) {
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	meta, err := c.Compile(metaschemaURL)
	if err != nil {
		t.Fatalf("compile the draft 2020-12 metaschema: %v", err)
	}
	if err := meta.Validate(decode(t, JSON)); err != nil {
		t.Fatalf("taoflow.schema.json is not a valid draft 2020-12 schema: %#v", err)
	}
}

// TestPrettyPrinted keeps the file in the one layout the project uses: two
// spaces of indentation, a final newline, nothing else, so diffs stay small.
func TestPrettyPrinted(t *testing.T) {
	var compact, want bytes.Buffer
	if err := json.Compact(&compact, JSON); err != nil {
		t.Fatal(err)
	}
	if err := json.Indent(&want, compact.Bytes(), "", "  "); err != nil {
		t.Fatal(err)
	}
	want.WriteByte('\n')
	if diff := cmp.Diff(want.String(), string(JSON)); diff != "" {
		t.Errorf("taoflow.schema.json is not pretty-printed with 2-space indentation (-want +got):\n%s", diff)
	}
}

// keywords of JSON Schema draft 2020-12. The metaschema allows any other
// key, so a misspelt keyword ("additionalProperty") would otherwise be
// silently ignored.
var keywords = map[string]bool{
	"$schema": true, "$id": true, "$ref": true, "$anchor": true, "$dynamicRef": true,
	"$dynamicAnchor": true, "$vocabulary": true, "$comment": true, "$defs": true,
	"allOf": true, "anyOf": true, "oneOf": true, "not": true, "if": true, "then": true,
	"else": true, "dependentSchemas": true, "prefixItems": true, "items": true,
	"contains": true, "properties": true, "patternProperties": true,
	"additionalProperties": true, "propertyNames": true, "unevaluatedItems": true,
	"unevaluatedProperties": true, "type": true, "const": true, "enum": true,
	"multipleOf": true, "maximum": true, "exclusiveMaximum": true, "minimum": true,
	"exclusiveMinimum": true, "maxLength": true, "minLength": true, "pattern": true,
	"maxItems": true, "minItems": true, "uniqueItems": true, "maxContains": true,
	"minContains": true, "maxProperties": true, "minProperties": true, "required": true,
	"dependentRequired": true, "title": true, "description": true, "default": true,
	"deprecated": true, "readOnly": true, "writeOnly": true, "examples": true,
	"format": true, "contentEncoding": true, "contentMediaType": true, "contentSchema": true,
}

// subschema is one schema object found by walk.
type subschema struct {
	path   string         // JSON pointer into the schema document
	s      map[string]any // the schema object
	isProp bool           // it describes a property or definition (see walk)
	inIf   bool           // it lies inside an `if` condition
}

// walk visits every schema object in the document. A schema "describes a
// property" when it is an entry of properties, patternProperties or $defs,
// or an object-valued additionalProperties: those are what editors show on
// hover and what the reference documents.
func walk(s any, path string, isProp, inIf bool, visit func(subschema)) {
	m, ok := s.(map[string]any)
	if !ok {
		return // boolean schema
	}
	visit(subschema{path: path, s: m, isProp: isProp, inIf: inIf})
	for kw, v := range m {
		p := path + "/" + kw
		switch kw {
		case "properties", "patternProperties", "$defs", "dependentSchemas":
			entries, _ := v.(map[string]any)
			for name, sub := range entries {
				walk(sub, p+"/"+name, kw != "dependentSchemas", inIf, visit)
			}
		case "additionalProperties":
			walk(v, p, true, inIf, visit)
		case "items", "propertyNames", "not", "then", "else", "contains",
			"unevaluatedProperties", "unevaluatedItems", "contentSchema":
			walk(v, p, false, inIf, visit)
		case "if":
			walk(v, p, false, true, visit)
		case "allOf", "anyOf", "oneOf", "prefixItems":
			list, _ := v.([]any)
			for i, sub := range list {
				walk(sub, fmt.Sprintf("%s/%d", p, i), false, inIf, visit)
			}
		}
	}
}

func TestOnlyKnownKeywords(t *testing.T) {
	walk(schemaDoc(t), "#", false, false, func(ss subschema) {
		for kw := range ss.s {
			if strings.HasPrefix(kw, "x-") {
				if _, ok := ss.s["pattern"]; kw == "x-pattern-hint" && !ok {
					t.Errorf("%s: x-pattern-hint without a pattern beside it", ss.path)
				}
				continue
			}
			if !keywords[kw] {
				t.Errorf("%s: unknown keyword %q (misspelt?)", ss.path, kw)
			}
		}
	})
}

// TestEveryPropertyDescribed requires a description on every property and
// definition, for editor hovers and the reference. A bare {"$ref": …} is
// described by its target, itself a checked definition; `if` conditions are
// not documentation and are skipped.
func TestEveryPropertyDescribed(t *testing.T) {
	doc := schemaDoc(t)
	if d, _ := doc["description"].(string); d == "" {
		t.Error("#: no top-level description")
	}
	if d, _ := doc["title"].(string); d == "" {
		t.Error("#: no top-level title")
	}
	defs, _ := doc["$defs"].(map[string]any)
	checked := 0
	walk(doc, "#", false, false, func(ss subschema) {
		if !ss.isProp || ss.inIf {
			return
		}
		checked++
		if d, _ := ss.s["description"].(string); strings.TrimSpace(d) != "" {
			return
		}
		if ref, ok := ss.s["$ref"].(string); ok && len(ss.s) == 1 {
			target, _ := defs[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any)
			if d, _ := target["description"].(string); d != "" {
				return
			}
		}
		t.Errorf("%s: no description", ss.path)
	})
	if checked < 50 {
		t.Errorf("checked only %d property schemas; the walk is broken", checked)
	}
}

func TestStepKinds(t *testing.T) {
	want := []string{"preflight", "ngc-auth", "pull", "run", "wait", "send", "download-s3", "upload-s3", "fetch", "delete"}
	got := StepKinds()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("StepKinds() (-want +got):\n%s", diff)
	}
	got[0] = "changed"
	if StepKinds()[0] != "preflight" {
		t.Error("changing the returned slice changed the next result")
	}

	// Every kind has exactly one if/then branch, whose then refers to its
	// with-KIND definition, and every with-* definition belongs to a kind.
	doc := schemaDoc(t)
	defs := doc["$defs"].(map[string]any)
	step := defs["step"].(map[string]any)
	branches := map[string]string{}
	for i, b := range step["allOf"].([]any) {
		bm := b.(map[string]any)
		kind := dig(bm, "if", "properties", "uses", "const")
		ref := dig(bm, "then", "properties", "with", "$ref")
		if _, dup := branches[kind]; dup {
			t.Errorf("allOf/%d: second branch for kind %q", i, kind)
		}
		branches[kind] = ref
		if req := dig(bm, "if", "required"); req != "[uses]" {
			t.Errorf("allOf/%d: if.required = %s, want [uses] (else a step without uses matches every branch)", i, req)
		}
	}
	wantBranches := map[string]string{}
	for _, k := range want {
		wantBranches[k] = "#/$defs/with-" + k
	}
	if diff := cmp.Diff(wantBranches, branches); diff != "" {
		t.Errorf("uses → with branches (-want +got):\n%s", diff)
	}
	for name := range defs {
		if kind, ok := strings.CutPrefix(name, "with-"); ok && !slices.Contains(want, kind) {
			t.Errorf("$defs/%s belongs to no step kind", name)
		}
	}
}

// dig follows keys through nested objects and renders what it finds.
func dig(v any, keys ...string) string {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[k]
	}
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = fmt.Sprint(e)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return fmt.Sprint(v)
}

// TestDurationPattern checks that what the schema accepts as a duration is
// something Go's time.ParseDuration reads, and that the usual forms pass.
func TestDurationPattern(t *testing.T) {
	defs := schemaDoc(t)["$defs"].(map[string]any)
	re := regexp.MustCompile(defs["duration"].(map[string]any)["pattern"].(string))
	tests := map[string]bool{
		"90s": true, "10m": true, "1h30m": true, "12h": true, "1.5h": true, "300ms": true,
		"2us": true, "2µs": true, "5ns": true, "1h2m3s4ms": true,
		"": false, "10": false, "1d": false, "-5s": false, "1h 30m": false, "5 s": false,
		"s": false, ".5s": false, "5S": false, "${{ vars.t }}": false,
	}
	for in, want := range tests {
		got := re.MatchString(in)
		if got != want {
			t.Errorf("duration pattern on %q = %v, want %v", in, got, want)
		}
		if _, err := time.ParseDuration(in); got && err != nil {
			t.Errorf("the schema accepts %q but time.ParseDuration does not: %v", in, err)
		}
	}
}

// leaves flattens a validation error into "POINTER keyword" lines, sorted
// and without repeats: enough to tell which constraint fired where.
func leaves(err error) []string {
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []string{"not a validation error: " + err.Error()}
	}
	seen := map[string]bool{}
	var out []string
	var rec func(*jsonschema.ValidationError)
	rec = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				rec(c)
			}
			return
		}
		kw := e.KeywordLocation[strings.LastIndexByte(e.KeywordLocation, '/')+1:]
		line := "#" + e.InstanceLocation + " " + kw
		if !seen[line] {
			seen[line] = true
			out = append(out, line)
		}
	}
	rec(ve)
	sort.Strings(out)
	return out
}

// stepPlan wraps one step in an otherwise valid plan.
func stepPlan(step string) string {
	return `{"taoflow": 1, "name": "t", "instances": {"gpu-a": null, "box": null}, "steps": [` + step + `]}`
}

// designPlan is the example plan of docs/design.md §3, as JSON.
const designPlan = `{
  "taoflow": 1,
  "name": "changenet-sweep",
  "description": "optional text",
  "platform": "brev",
  "vars": {"image": "nvcr.io/nvidia/tao/tao-toolkit:7.2.0-pyt", "bucket": "s3://my-bucket/changenet"},
  "secrets": ["NGC_KEY", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"],
  "instances": {
    "gpu-a": {"create": {"type": "g5.xlarge,g5.2xlarge"}, "slots": 1},
    "box": {"existing": "my-dev-box"}
  },
  "steps": [
    {"id": "preflight", "uses": "preflight"},
    {"id": "auth", "uses": "ngc-auth", "needs": ["preflight"]},
    {"id": "pull", "uses": "pull", "needs": ["auth"], "with": {"image": "${{ vars.image }}"}},
    {"id": "train", "uses": "run", "needs": ["pull"], "on": ["gpu-a", "box"],
     "matrix": {"lr": [0.001, 0.0001], "backbone": ["resnet18", "resnet50"]},
     "with": {
       "image": "${{ vars.image }}",
       "command": "visual_changenet train -e /data/spec.yaml train.lr=${{ matrix.lr }} results_dir=/results/${{ cell.id }}",
       "gpus": "all",
       "volumes": ["~/data:/data", "~/results:/results"],
       "env": ["NGC_KEY"]
     }},
    {"id": "wait", "uses": "wait", "needs": ["train"], "matrix": "inherit", "with": {"timeout": "12h"}},
    {"id": "upload", "uses": "upload-s3", "needs": ["wait"], "matrix": "inherit",
     "with": {"from": "~/results/${{ cell.id }}", "to": "${{ vars.bucket }}/${{ run.id }}/${{ cell.id }}"}}
  ],
  "finally": [{"id": "teardown", "uses": "delete"}]
}`

func TestValidate(t *testing.T) {
	sch, err := Compile()
	if err != nil {
		t.Fatal(err)
	}
	// want lists the failing constraints ("POINTER keyword"); nil means valid.
	// Where a constrained string also accepts an expression (anyOf) or a
	// value has two forms (oneOf), the other branches' failures are listed
	// too: that is what the plan package's error mapper sees.
	tests := map[string]struct {
		doc  string
		want []string
	}{
		// Top level.
		"design example": {doc: designPlan},
		// Shapes Validate checks outside the schema's own items (dispatch.go).
		"steps not a list": {
			doc:  `{"taoflow": 1, "name": "t", "instances": {"a": null}, "steps": {"id": "s", "uses": "pull"}}`,
			want: []string{"#/steps type"},
		},
		"step not a mapping": {
			doc:  stepPlan(`"pull"`),
			want: []string{"#/steps/0 type"},
		},
		"finally step of an unknown kind": {
			doc:  `{"taoflow": 1, "name": "t", "instances": {"a": null}, "steps": [{"id": "s", "uses": "delete"}], "finally": [{"id": "f", "uses": "nope", "with": {"x": 1}}]}`,
			want: []string{"#/finally/0/uses enum"},
		},
		"minimal":        {doc: stepPlan(`{"id": "s", "uses": "delete"}`)},
		"empty document": {doc: `{}`, want: []string{"# required"}},
		"not a mapping":  {doc: `[]`, want: []string{"# type"}},
		"format 2": {
			doc:  `{"taoflow": 2, "name": "t", "instances": {"a": null}, "steps": [{"id": "s", "uses": "delete"}]}`,
			want: []string{"#/taoflow const"},
		},
		"format as string": {
			doc:  `{"taoflow": "1", "name": "t", "instances": {"a": null}, "steps": [{"id": "s", "uses": "delete"}]}`,
			want: []string{"#/taoflow type"},
		},
		"name with capitals and underscore": {
			doc:  `{"taoflow": 1, "name": "Bad_Name", "instances": {"a": null}, "steps": [{"id": "s", "uses": "delete"}]}`,
			want: []string{"#/name pattern"},
		},
		"name of 41 characters": {
			doc:  `{"taoflow": 1, "name": "` + strings.Repeat("a", 41) + `", "instances": {"a": null}, "steps": [{"id": "s", "uses": "delete"}]}`,
			want: []string{"#/name maxLength"},
		},
		"unknown top-level key": {
			doc:  `{"taoflow": 1, "name": "t", "instances": {"a": null}, "steps": [{"id": "s", "uses": "delete"}], "stages": []}`,
			want: []string{"# additionalProperties"},
		},
		"fail_fast not a boolean": {
			doc:  `{"taoflow": 1, "name": "t", "instances": {"a": null}, "steps": [{"id": "s", "uses": "delete"}], "fail_fast": "yes"}`,
			want: []string{"#/fail_fast type"},
		},
		"no steps": {
			doc:  `{"taoflow": 1, "name": "t", "instances": {"a": null}, "steps": []}`,
			want: []string{"#/steps minItems"},
		},

		// Platform.
		"platform mapping with every key": {
			doc: `{"taoflow": 1, "name": "t", "instances": {"a": null}, "steps": [{"id": "s", "uses": "delete"}],
				"platform": {"kind": "brev", "binary": "/opt/brev", "transport": "exec", "ssh_config": "~/.ssh/cfg",
				"connect_timeout": "10s", "max_sessions": 4, "instance_env": ["NGC_KEY"]}}`,
		},
		"platform unknown kind": {
			doc:  `{"taoflow": 1, "name": "t", "instances": {"a": null}, "steps": [{"id": "s", "uses": "delete"}], "platform": "gcp"}`,
			want: []string{"#/platform enum", "#/platform type"},
		},
		"platform mapping without kind": {
			doc:  `{"taoflow": 1, "name": "t", "instances": {"a": null}, "steps": [{"id": "s", "uses": "delete"}], "platform": {"transport": "ssh"}}`,
			want: []string{"#/platform required", "#/platform type"},
		},
		"platform unknown transport": {
			doc:  `{"taoflow": 1, "name": "t", "instances": {"a": null}, "steps": [{"id": "s", "uses": "delete"}], "platform": {"kind": "brev", "transport": "scp"}}`,
			want: []string{"#/platform type", "#/platform/transport enum"},
		},
		"platform 11 sessions": {
			doc:  `{"taoflow": 1, "name": "t", "instances": {"a": null}, "steps": [{"id": "s", "uses": "delete"}], "platform": {"kind": "ssh", "max_sessions": 11}}`,
			want: []string{"#/platform type", "#/platform/max_sessions maximum"},
		},
		"platform bad connect timeout": {
			doc:  `{"taoflow": 1, "name": "t", "instances": {"a": null}, "steps": [{"id": "s", "uses": "delete"}], "platform": {"kind": "ssh", "connect_timeout": "ten"}}`,
			want: []string{"#/platform type", "#/platform/connect_timeout pattern"},
		},

		// Vars and secrets.
		"vars of every scalar type": {
			doc: `{"taoflow": 1, "name": "t", "instances": {"a": null}, "steps": [{"id": "s", "uses": "delete"}], "vars": {"image": "x", "epochs": 3, "lr": 0.1, "amp": true}}`,
		},
		"var name starting with a digit": {
			doc:  `{"taoflow": 1, "name": "t", "instances": {"a": null}, "steps": [{"id": "s", "uses": "delete"}], "vars": {"1x": "v"}}`,
			want: []string{"#/vars/1x pattern"},
		},
		"var holding a list": {
			doc:  `{"taoflow": 1, "name": "t", "instances": {"a": null}, "steps": [{"id": "s", "uses": "delete"}], "vars": {"x": [1]}}`,
			want: []string{"#/vars/x type"},
		},
		"duplicate secret": {
			doc:  `{"taoflow": 1, "name": "t", "instances": {"a": null}, "steps": [{"id": "s", "uses": "delete"}], "secrets": ["NGC_KEY", "NGC_KEY"]}`,
			want: []string{"#/secrets uniqueItems"},
		},
		"secret name with a dash": {
			doc:  `{"taoflow": 1, "name": "t", "instances": {"a": null}, "steps": [{"id": "s", "uses": "delete"}], "secrets": ["NGC-KEY"]}`,
			want: []string{"#/secrets/0 pattern"},
		},

		// Instances.
		"instances of every form": {
			doc: `{"taoflow": 1, "name": "t", "steps": [{"id": "s", "uses": "delete"}], "instances": {
				"a": null, "b": {"create": {"type": "g5.xlarge,g5.2xlarge"}, "slots": 4, "keep": true},
				"c": {"existing": "my-box"}, "d": {"host": "ubuntu@10.0.0.5:22"}, "e": {}}}`,
		},
		"no instances": {
			doc:  `{"taoflow": 1, "name": "t", "instances": {}, "steps": [{"id": "s", "uses": "delete"}]}`,
			want: []string{"#/instances minProperties"},
		},
		"instance name with capitals": {
			doc:  `{"taoflow": 1, "name": "t", "instances": {"GPU": null}, "steps": [{"id": "s", "uses": "delete"}]}`,
			want: []string{"#/instances/GPU pattern"},
		},
		"instance name of 31 characters": {
			doc:  `{"taoflow": 1, "name": "t", "instances": {"` + strings.Repeat("a", 31) + `": null}, "steps": [{"id": "s", "uses": "delete"}]}`,
			want: []string{"#/instances/" + strings.Repeat("a", 31) + " maxLength"},
		},
		"zero slots": {
			doc:  `{"taoflow": 1, "name": "t", "instances": {"a": {"slots": 0}}, "steps": [{"id": "s", "uses": "delete"}]}`,
			want: []string{"#/instances/a/slots minimum"},
		},
		"negative slots": {
			doc:  `{"taoflow": 1, "name": "t", "instances": {"a": {"slots": -1}}, "steps": [{"id": "s", "uses": "delete"}]}`,
			want: []string{"#/instances/a/slots minimum"},
		},
		"65 slots": {
			doc:  `{"taoflow": 1, "name": "t", "instances": {"a": {"slots": 65}}, "steps": [{"id": "s", "uses": "delete"}]}`,
			want: []string{"#/instances/a/slots maximum"},
		},
		"create without type": {
			doc:  `{"taoflow": 1, "name": "t", "instances": {"a": {"create": {}}}, "steps": [{"id": "s", "uses": "delete"}]}`,
			want: []string{"#/instances/a/create minProperties"},
		},
		"create type chain with a space": {
			doc:  `{"taoflow": 1, "name": "t", "instances": {"a": {"create": {"type": "g5.xlarge, g5.2xlarge"}}}, "steps": [{"id": "s", "uses": "delete"}]}`,
			want: []string{"#/instances/a/create/type pattern"},
		},
		"unknown instance key": {
			doc:  `{"taoflow": 1, "name": "t", "instances": {"a": {"zone": "us-east-1"}}, "steps": [{"id": "s", "uses": "delete"}]}`,
			want: []string{"#/instances/a additionalProperties"},
		},
		"instance as a string": {
			doc:  `{"taoflow": 1, "name": "t", "instances": {"a": "g5.xlarge"}, "steps": [{"id": "s", "uses": "delete"}]}`,
			want: []string{"#/instances/a type"},
		},

		// Step keys.
		"step with every common key": {
			doc: stepPlan(`{"id": "s_1-x", "uses": "delete", "name": "Tear down", "needs": "pull", "on": "all",
				"timeout": "1h30m", "retries": {"max": 2, "backoff": "30s"}, "continue_on_error": true, "max_parallel": 2, "with": {}}`),
		},
		"step id with capitals":  {doc: stepPlan(`{"id": "Train", "uses": "delete"}`), want: []string{"#/steps/0/id pattern"}},
		"step id with a digit":   {doc: stepPlan(`{"id": "1st", "uses": "delete"}`), want: []string{"#/steps/0/id pattern"}},
		"step id of 41 letters":  {doc: stepPlan(`{"id": "` + strings.Repeat("a", 41) + `", "uses": "delete"}`), want: []string{"#/steps/0/id maxLength"}},
		"step without uses":      {doc: stepPlan(`{"id": "s"}`), want: []string{"#/steps/0 required"}},
		"step without id":        {doc: stepPlan(`{"uses": "delete"}`), want: []string{"#/steps/0 required"}},
		"unknown step key":       {doc: stepPlan(`{"id": "s", "uses": "delete", "run_on": "a"}`), want: []string{"#/steps/0 additionalProperties"}},
		"unknown kind":           {doc: stepPlan(`{"id": "s", "uses": "deploy"}`), want: []string{"#/steps/0/uses enum"}},
		"unknown kind with with": {doc: stepPlan(`{"id": "s", "uses": "deploy", "with": {"anything": 1}}`), want: []string{"#/steps/0/uses enum"}},
		"with not a mapping":     {doc: stepPlan(`{"id": "s", "uses": "delete", "with": 5}`), want: []string{"#/steps/0/with type"}},
		"needs as a list":        {doc: stepPlan(`{"id": "s", "uses": "delete", "needs": ["a", "b"]}`)},
		"needs twice the same": {
			doc:  stepPlan(`{"id": "s", "uses": "delete", "needs": ["a", "a"]}`),
			want: []string{"#/steps/0/needs type", "#/steps/0/needs uniqueItems"},
		},
		"needs a bad id": {
			doc:  stepPlan(`{"id": "s", "uses": "delete", "needs": "Pull"}`),
			want: []string{"#/steps/0/needs pattern", "#/steps/0/needs type"},
		},
		"needs a number": {
			doc:  stepPlan(`{"id": "s", "uses": "delete", "needs": 3}`),
			want: []string{"#/steps/0/needs type"},
		},
		"on a list": {doc: stepPlan(`{"id": "s", "uses": "delete", "on": ["gpu-a", "box"]}`)},
		"on a bad instance name": {
			doc:  stepPlan(`{"id": "s", "uses": "delete", "on": ["GPU"]}`),
			want: []string{"#/steps/0/on type", "#/steps/0/on/0 pattern"},
		},
		"matrix":         {doc: stepPlan(`{"id": "s", "uses": "delete", "matrix": {"lr": [0.1, 0.01], "bb": ["r18"], "amp": [true]}}`)},
		"matrix inherit": {doc: stepPlan(`{"id": "s", "uses": "delete", "matrix": "inherit"}`)},
		"matrix other string": {
			doc:  stepPlan(`{"id": "s", "uses": "delete", "matrix": "repeat"}`),
			want: []string{"#/steps/0/matrix const", "#/steps/0/matrix type"},
		},
		"empty matrix": {
			doc:  stepPlan(`{"id": "s", "uses": "delete", "matrix": {}}`),
			want: []string{"#/steps/0/matrix minProperties", "#/steps/0/matrix type"},
		},
		"matrix key with no values": {
			doc:  stepPlan(`{"id": "s", "uses": "delete", "matrix": {"lr": []}}`),
			want: []string{"#/steps/0/matrix type", "#/steps/0/matrix/lr minItems"},
		},
		"matrix key not a list": {
			doc:  stepPlan(`{"id": "s", "uses": "delete", "matrix": {"lr": 0.1}}`),
			want: []string{"#/steps/0/matrix type", "#/steps/0/matrix/lr type"},
		},
		"matrix of lists": {
			doc:  stepPlan(`{"id": "s", "uses": "delete", "matrix": {"lr": [[0.1]]}}`),
			want: []string{"#/steps/0/matrix type", "#/steps/0/matrix/lr/0 type"},
		},
		"matrix key with a dash": {
			doc:  stepPlan(`{"id": "s", "uses": "delete", "matrix": {"learning-rate": [0.1]}}`),
			want: []string{"#/steps/0/matrix type", "#/steps/0/matrix/learning-rate pattern"},
		},
		"step timeout not a duration": {
			doc:  stepPlan(`{"id": "s", "uses": "delete", "timeout": "12 hours"}`),
			want: []string{"#/steps/0/timeout pattern"},
		},
		"step timeout as a number": {
			doc:  stepPlan(`{"id": "s", "uses": "delete", "timeout": 60}`),
			want: []string{"#/steps/0/timeout type"},
		},
		"retries as a count": {doc: stepPlan(`{"id": "s", "uses": "delete", "retries": 3}`)},
		"negative retries": {
			doc:  stepPlan(`{"id": "s", "uses": "delete", "retries": -1}`),
			want: []string{"#/steps/0/retries minimum"},
		},
		"retries without max": {
			doc:  stepPlan(`{"id": "s", "uses": "delete", "retries": {"backoff": "5s"}}`),
			want: []string{"#/steps/0/retries required"},
		},
		"retries with unknown key": {
			doc:  stepPlan(`{"id": "s", "uses": "delete", "retries": {"max": 1, "jitter": true}}`),
			want: []string{"#/steps/0/retries additionalProperties"},
		},
		"retries bad backoff": {
			doc:  stepPlan(`{"id": "s", "uses": "delete", "retries": {"max": 1, "backoff": "soon"}}`),
			want: []string{"#/steps/0/retries/backoff pattern"},
		},
		"zero max_parallel": {
			doc:  stepPlan(`{"id": "s", "uses": "delete", "max_parallel": 0}`),
			want: []string{"#/steps/0/max_parallel minimum"},
		},
		"continue_on_error not a boolean": {
			doc:  stepPlan(`{"id": "s", "uses": "delete", "continue_on_error": "yes"}`),
			want: []string{"#/steps/0/continue_on_error type"},
		},
		"finally step checked too": {
			doc:  `{"taoflow": 1, "name": "t", "instances": {"a": null}, "steps": [{"id": "s", "uses": "delete"}], "finally": [{"id": "d", "uses": "delete", "with": {"force": "yes"}}]}`,
			want: []string{"#/finally/0/with/force type"},
		},

		// preflight.
		"preflight with every setting": {
			doc: stepPlan(`{"id": "s", "uses": "preflight", "with": {"interval": "5s", "ready_timeout": "${{ vars.ready }}", "gpus": 8, "docker": true}}`),
		},
		"preflight without with":    {doc: stepPlan(`{"id": "s", "uses": "preflight"}`)},
		"preflight zero gpus":       {doc: stepPlan(`{"id": "s", "uses": "preflight", "with": {"gpus": 0}}`)},
		"preflight gpus expression": {doc: stepPlan(`{"id": "s", "uses": "preflight", "with": {"gpus": "${{ vars.gpus }}"}}`)},
		"preflight negative gpus": {
			doc:  stepPlan(`{"id": "s", "uses": "preflight", "with": {"gpus": -1}}`),
			want: []string{"#/steps/0/with/gpus minimum", "#/steps/0/with/gpus type"},
		},
		"preflight interval not a duration": {
			doc:  stepPlan(`{"id": "s", "uses": "preflight", "with": {"interval": "soon"}}`),
			want: []string{"#/steps/0/with/interval pattern"},
		},
		"preflight interval as a number": {
			doc:  stepPlan(`{"id": "s", "uses": "preflight", "with": {"interval": 5}}`),
			want: []string{"#/steps/0/with/interval type"},
		},
		"preflight docker not a boolean": {
			doc:  stepPlan(`{"id": "s", "uses": "preflight", "with": {"docker": "yes"}}`),
			want: []string{"#/steps/0/with/docker type"},
		},
		"preflight unknown setting": {
			doc:  stepPlan(`{"id": "s", "uses": "preflight", "with": {"image": "x"}}`),
			want: []string{"#/steps/0/with additionalProperties"},
		},

		// ngc-auth.
		"ngc-auth with every setting": {
			doc: stepPlan(`{"id": "s", "uses": "ngc-auth", "with": {"registry": "nvcr.io", "username": "$oauthtoken", "secret": "MY_NGC_KEY", "verify_image": "nvcr.io/nvidia/tao/tao-toolkit:7.2.0-pyt"}}`),
		},
		"ngc-auth secret with a dash": {
			doc:  stepPlan(`{"id": "s", "uses": "ngc-auth", "with": {"secret": "ngc-key"}}`),
			want: []string{"#/steps/0/with/secret pattern"},
		},
		"ngc-auth inline password": {
			doc:  stepPlan(`{"id": "s", "uses": "ngc-auth", "with": {"password": "nvapi-xyz"}}`),
			want: []string{"#/steps/0/with additionalProperties"},
		},

		// pull.
		"pull": {doc: stepPlan(`{"id": "s", "uses": "pull", "with": {"image": "${{ vars.image }}"}}`)},
		"pull without with": {
			doc:  stepPlan(`{"id": "s", "uses": "pull"}`),
			want: []string{"#/steps/0 required"},
		},
		"pull without image": {
			doc:  stepPlan(`{"id": "s", "uses": "pull", "with": {}}`),
			want: []string{"#/steps/0/with required"},
		},
		"pull unknown setting": {
			doc:  stepPlan(`{"id": "s", "uses": "pull", "with": {"image": "x", "foo": 1}}`),
			want: []string{"#/steps/0/with additionalProperties"},
		},
		"pull empty image": {
			doc:  stepPlan(`{"id": "s", "uses": "pull", "with": {"image": ""}}`),
			want: []string{"#/steps/0/with/image minLength"},
		},

		// run.
		"run with every setting": {
			doc: stepPlan(`{"id": "s", "uses": "run", "with": {"command": "train", "image": "img", "gpus": "device=0,1",
				"volumes": ["~/data:/data"], "env": ["NGC_KEY"], "workdir": "/work", "ipc": "host", "shm_size": "16g",
				"memory": "64G", "user": "1000:1000", "results": "~/results"}}`),
		},
		"run host process":      {doc: stepPlan(`{"id": "s", "uses": "run", "with": {"command": "python train.py"}}`)},
		"run image only":        {doc: stepPlan(`{"id": "s", "uses": "run", "with": {"image": "img"}}`)},
		"run gpu count":         {doc: stepPlan(`{"id": "s", "uses": "run", "with": {"image": "img", "gpus": 2}}`)},
		"run gpus expression":   {doc: stepPlan(`{"id": "s", "uses": "run", "with": {"image": "img", "gpus": "${{ matrix.gpus }}"}}`)},
		"run ipc expression":    {doc: stepPlan(`{"id": "s", "uses": "run", "with": {"image": "img", "ipc": "${{ vars.ipc }}"}}`)},
		"run shm_size in bytes": {doc: stepPlan(`{"id": "s", "uses": "run", "with": {"image": "img", "shm_size": "1073741824"}}`)},
		"run without with": {
			doc:  stepPlan(`{"id": "s", "uses": "run"}`),
			want: []string{"#/steps/0 required"},
		},
		"run without command or image": {
			doc:  stepPlan(`{"id": "s", "uses": "run", "with": {"gpus": "all"}}`),
			want: []string{"#/steps/0/with required"},
		},
		"run negative gpus": {
			doc:  stepPlan(`{"id": "s", "uses": "run", "with": {"image": "img", "gpus": -1}}`),
			want: []string{"#/steps/0/with/gpus minimum", "#/steps/0/with/gpus type"},
		},
		"run gpus word": {
			doc:  stepPlan(`{"id": "s", "uses": "run", "with": {"image": "img", "gpus": "two"}}`),
			want: []string{"#/steps/0/with/gpus pattern", "#/steps/0/with/gpus type"},
		},
		"run unknown ipc": {
			doc:  stepPlan(`{"id": "s", "uses": "run", "with": {"image": "img", "ipc": "none"}}`),
			want: []string{"#/steps/0/with/ipc enum", "#/steps/0/with/ipc pattern"},
		},
		"run shm_size with unit word": {
			doc:  stepPlan(`{"id": "s", "uses": "run", "with": {"image": "img", "shm_size": "16 GB"}}`),
			want: []string{"#/steps/0/with/shm_size pattern"},
		},
		"run memory not a size": {
			doc:  stepPlan(`{"id": "s", "uses": "run", "with": {"image": "img", "memory": "lots"}}`),
			want: []string{"#/steps/0/with/memory pattern"},
		},
		"run env twice the same": {
			doc:  stepPlan(`{"id": "s", "uses": "run", "with": {"image": "img", "env": ["A", "A"]}}`),
			want: []string{"#/steps/0/with/env uniqueItems"},
		},
		"run env with a value": {
			doc:  stepPlan(`{"id": "s", "uses": "run", "with": {"image": "img", "env": ["A=secret"]}}`),
			want: []string{"#/steps/0/with/env/0 pattern"},
		},
		"run volume not a string": {
			doc:  stepPlan(`{"id": "s", "uses": "run", "with": {"image": "img", "volumes": [1]}}`),
			want: []string{"#/steps/0/with/volumes/0 type"},
		},
		"run wait setting": {
			doc:  stepPlan(`{"id": "s", "uses": "run", "with": {"image": "img", "timeout": "1h"}}`),
			want: []string{"#/steps/0/with additionalProperties"},
		},

		// wait.
		"wait":              {doc: stepPlan(`{"id": "s", "uses": "wait", "with": {"timeout": "12h", "interval": "30s"}}`)},
		"wait without with": {doc: stepPlan(`{"id": "s", "uses": "wait"}`)},
		"wait timeout expression": {
			doc: stepPlan(`{"id": "s", "uses": "wait", "with": {"timeout": "${{ vars.budget }}"}}`),
		},
		"wait timeout in days": {
			doc:  stepPlan(`{"id": "s", "uses": "wait", "with": {"timeout": "2d"}}`),
			want: []string{"#/steps/0/with/timeout pattern"},
		},
		"wait timeout as a number": {
			doc:  stepPlan(`{"id": "s", "uses": "wait", "with": {"timeout": 3600}}`),
			want: []string{"#/steps/0/with/timeout type"},
		},
		"wait unknown setting": {
			doc:  stepPlan(`{"id": "s", "uses": "wait", "with": {"image": "img"}}`),
			want: []string{"#/steps/0/with additionalProperties"},
		},

		// upload-s3.
		"upload-s3 with every setting": {
			doc: stepPlan(`{"id": "s", "uses": "upload-s3", "with": {"from": "~/results", "to": "s3://b/p", "endpoint_url": "http://minio:9000",
				"region": "us-east-1", "env": ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"], "exclude": ["*.tmp"], "verify": false}}`),
		},
		"upload-s3 to a file URL":    {doc: stepPlan(`{"id": "s", "uses": "upload-s3", "with": {"from": "r", "to": "file:///mnt/shared/r"}}`)},
		"upload-s3 to an expression": {doc: stepPlan(`{"id": "s", "uses": "upload-s3", "with": {"from": "r", "to": "${{ vars.bucket }}/x"}}`)},
		"upload-s3 to gs": {
			doc:  stepPlan(`{"id": "s", "uses": "upload-s3", "with": {"from": "r", "to": "gs://b/p"}}`),
			want: []string{"#/steps/0/with/to pattern"},
		},
		"upload-s3 without to": {
			doc:  stepPlan(`{"id": "s", "uses": "upload-s3", "with": {"from": "r"}}`),
			want: []string{"#/steps/0/with required"},
		},
		"upload-s3 without with": {
			doc:  stepPlan(`{"id": "s", "uses": "upload-s3"}`),
			want: []string{"#/steps/0 required"},
		},
		"upload-s3 verify not a boolean": {
			doc:  stepPlan(`{"id": "s", "uses": "upload-s3", "with": {"from": "r", "to": "s3://b", "verify": "no"}}`),
			want: []string{"#/steps/0/with/verify type"},
		},
		"upload-s3 unknown setting": {
			doc:  stepPlan(`{"id": "s", "uses": "upload-s3", "with": {"from": "r", "to": "s3://b", "delete": true}}`),
			want: []string{"#/steps/0/with additionalProperties"},
		},

		// delete.
		"delete forced": {doc: stepPlan(`{"id": "s", "uses": "delete", "with": {"force": true}}`)},
		"delete force not a boolean": {
			doc:  stepPlan(`{"id": "s", "uses": "delete", "with": {"force": "yes"}}`),
			want: []string{"#/steps/0/with/force type"},
		},
		"delete unknown setting": {
			doc:  stepPlan(`{"id": "s", "uses": "delete", "with": {"instances": ["a"]}}`),
			want: []string{"#/steps/0/with additionalProperties"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got []string
			if err := sch.Validate(decode(t, []byte(tc.doc))); err != nil {
				got = leaves(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("failing constraints (-want +got):\n%s", diff)
			}
			if v := valid(sch, anyInstance(decode(t, []byte(tc.doc)))); v != (got == nil) {
				t.Errorf("valid says %v, the library's failures are %v", v, got)
			}
			// Validate, which dispatches on uses once per step, finds the
			// same failures at the same places, with the same messages.
			full := leafDetails(sch.Validate(decode(t, []byte(tc.doc))))
			fast := leafDetails(Validate(decode(t, []byte(tc.doc))))
			if diff := cmp.Diff(full, fast); diff != "" {
				t.Errorf("Validate's failures differ from the full schema's (-full +Validate):\n%s", diff)
			}
		})
	}
}

// leafDetails lists each leaf failure with its instance location, keyword,
// absolute keyword location and message, sorted: what plan's error mapper
// reads from an error.
func leafDetails(err error) []string {
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []string{"not a validation error: " + err.Error()}
	}
	var out []string
	var rec func(*jsonschema.ValidationError)
	rec = func(e *jsonschema.ValidationError) {
		for _, c := range e.Causes {
			rec(c)
		}
		if len(e.Causes) == 0 {
			kw := e.KeywordLocation[strings.LastIndexByte(e.KeywordLocation, '/')+1:]
			out = append(out, "#"+e.InstanceLocation+" "+kw+" "+e.AbsoluteKeywordLocation+" "+e.Message)
		}
	}
	rec(ve)
	slices.Sort(out)
	return out
}

// TestEveryKindTested makes sure TestValidate's table cannot silently miss
// a step kind added to the schema: each kind needs a valid instance and a
// rejected unknown `with` key.
func TestEveryKindTested(t *testing.T) {
	sch, err := Compile()
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range StepKinds() {
		doc := stepPlan(`{"id": "s", "uses": "` + kind + `", "with": {"no_such_setting": 1}}`)
		err := sch.Validate(decode(t, []byte(doc)))
		if !slices.Contains(leaves(err), "#/steps/0/with additionalProperties") {
			t.Errorf("%s: an unknown with key is not rejected; failures: %v", kind, leaves(err))
		}
	}
}

// TestStepSummaries: every step kind has a one-line summary (x-summary of
// its with-KIND definition), which `taoflow --help` lists; a new kind
// without one fails here, not silently in the help.
func TestStepSummaries(t *testing.T) {
	for _, k := range StepKinds() {
		s := StepSummary(k)
		switch {
		case s == "":
			t.Errorf("%s: no x-summary in $defs/with-%s", k, k)
		case len(s) > 72 || strings.ContainsAny(s, "\n`"):
			t.Errorf("%s: summary %q: want one plain line of at most 72 characters", k, s)
		}
	}
	if s := StepSummary("no-such-kind"); s != "" {
		t.Errorf("StepSummary(unknown) = %q, want empty", s)
	}
}

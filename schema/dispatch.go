package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// Validate checks a plan (the JSON-shaped value of a YAML plan) against the
// schema and returns nil or a *jsonschema.ValidationError whose leaves are
// the same failures, at the same instance and absolute keyword locations, as
// Compile().Validate would report.
//
// It is faster on large plans because a step's `uses` selects the settings
// schema of its kind once: the schema writes that choice as an allOf of
// seven `if uses == K then S` branches on $defs/step (the standard form, for
// editors), which a general validator evaluates seven times per step, each
// failed `if` allocating an error. Validate compiles the schema without that
// allOf, then checks each step against the one `then` its `uses` names. The
// branches are read from the schema, so the two cannot drift; a branch of
// another form is a compile error (see dispatcher).
//
// A plan the whole schema accepts is recognized first by valid, which
// builds no errors; only a plan with failures goes through the dispatch.
func Validate(doc any) error {
	if full, err := Compile(); err == nil && valid(full, anyInstance(doc)) {
		return nil
	}
	d, err := compileDispatch()
	if err != nil {
		return err
	}
	var causes []*jsonschema.ValidationError
	if err := d.base.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return err
		}
		causes = append(causes, ve)
	}
	root, _ := doc.(map[string]any)
	for _, list := range stepLists {
		steps, _ := root[list].([]any)
		errs := make([][]*jsonschema.ValidationError, len(steps))
		fail := make([]error, len(steps))
		// Steps are independent: large plans check them on every core.
		workers := min(goruntime.GOMAXPROCS(0), 1+len(steps)/512)
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < len(steps); i += workers {
					errs[i], fail[i] = d.step(list, i, steps[i])
				}
			}()
		}
		wg.Wait()
		for i := range steps {
			if fail[i] != nil {
				return fail[i]
			}
			causes = append(causes, errs[i]...)
		}
	}
	if len(causes) == 0 {
		return nil
	}
	return &jsonschema.ValidationError{
		AbsoluteKeywordLocation: URL + "#",
		Message:                 "doesn't validate with " + URL + "#",
		Causes:                  causes,
	}
}

// step validates item i of a steps list: against $defs/step (less its
// allOf), then against the one branch its uses selects. The errors' locations
// are made relative to the plan.
func (d *dispatcher) step(list string, i int, item any) ([]*jsonschema.ValidationError, error) {
	at := "/" + list + "/" + strconv.Itoa(i)
	kw := "/properties/" + list + "/items/$ref"
	var out []*jsonschema.ValidationError
	check := func(s *jsonschema.Schema, keyword string) error {
		err := s.Validate(item)
		if err == nil {
			return nil
		}
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return err
		}
		rebase(ve, at, keyword)
		out = append(out, ve)
		return nil
	}
	if err := check(d.step0, kw); err != nil {
		return nil, err
	}
	step, _ := item.(map[string]any)
	for _, p := range d.typed {
		v, ok := step[p.name]
		if !ok {
			continue
		}
		if b := p.byType[jsonType(v)]; b != nil && b.Validate(v) == nil {
			continue
		}
		err := p.full.Validate(v)
		if err == nil {
			continue
		}
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return nil, err
		}
		rebase(ve, at+"/"+p.name, kw+"/properties/"+p.name)
		out = append(out, ve)
	}
	uses, _ := step["uses"].(string)
	if k, ok := d.kinds[uses]; ok && step != nil && !k.holds(step) { // else no branch's if holds
		if err := check(k.schema, kw+"/"+k.keyword); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// holds reports whether step surely satisfies the branch, checking only
// its required keys and the values of its properties; false sends the
// step through the whole branch schema (also for its errors).
func (k kindSchema) holds(step map[string]any) bool {
	if k.props == nil {
		return false
	}
	for _, r := range k.required {
		if _, ok := step[r]; !ok {
			return false
		}
	}
	for name, s := range k.props {
		if v, ok := step[name]; ok && s.Validate(v) != nil {
			return false
		}
	}
	return true
}

// stepLists are the top-level keys whose items are $defs/step, the only
// places the schema refers to it (checked when compiling).
var stepLists = []string{"steps", "finally"}

// rebase makes the locations of an error found by validating one step on
// its own relative to the plan.
func rebase(ve *jsonschema.ValidationError, instance, keyword string) {
	ve.InstanceLocation = instance + ve.InstanceLocation
	ve.KeywordLocation = keyword + ve.KeywordLocation
	for _, c := range ve.Causes {
		rebase(c, instance, keyword)
	}
}

type kindSchema struct {
	schema  *jsonschema.Schema
	keyword string // "allOf/N/then", relative to $defs/step
	// A branch made only of required and properties is checked key by key
	// first (holds): validating the step object again costs more.
	required []string
	props    map[string]*jsonschema.Schema // nil: use schema
}

type dispatcher struct {
	base  *jsonschema.Schema    // the plan less its steps' items
	step0 *jsonschema.Schema    // $defs/step less its allOf and its typed oneOfs
	kinds map[string]kindSchema // by the value of uses
	typed []typedOneOf          // properties of $defs/step checked by typedOneOf
}

// typedOneOf is a property of $defs/step whose schema is a oneOf of
// branches that each require another JSON type (needs: a step id or a list
// of them). A value of one of those types can only match the branch of its
// type, so that branch alone is evaluated; a general validator evaluates
// every branch, and each failing one allocates an error. A value no branch
// takes, or that fails its branch, is validated against the whole property
// schema, for the same errors as the full schema's.
type typedOneOf struct {
	name   string
	full   *jsonschema.Schema
	byType map[string]*jsonschema.Schema // "string", "array", "object"
}

var compileDispatch = sync.OnceValues(func() (*dispatcher, error) {
	dec := json.NewDecoder(bytes.NewReader(JSON))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("schema: decode: %w", err)
	}
	if refs := refsTo(doc, "#/$defs/step", ""); !reflect.DeepEqual(refs, []string{"/properties/finally/items", "/properties/steps/items"}) {
		return nil, fmt.Errorf("schema: $defs/step is referred to at %v; Validate dispatches only steps and finally items", refs)
	}
	defs, _ := doc["$defs"].(map[string]any)
	step, _ := defs["step"].(map[string]any)
	branches, _ := step["allOf"].([]any)
	d := &dispatcher{kinds: map[string]kindSchema{}}
	full, err := newCompiler(JSON)
	if err != nil {
		return nil, err
	}
	for i, b := range branches {
		kind, ok := usesBranch(b)
		if !ok {
			return nil, fmt.Errorf("schema: $defs/step/allOf/%d is not {if: {properties: {uses: {const: KIND}}, required: [uses]}, then: …}", i)
		}
		if _, dup := d.kinds[kind]; dup {
			return nil, fmt.Errorf("schema: $defs/step/allOf/%d: a second branch for uses %q", i, kind)
		}
		kw := "allOf/" + strconv.Itoa(i) + "/then"
		s, err := full.Compile(URL + "#/$defs/step/" + kw)
		if err != nil {
			return nil, fmt.Errorf("schema: compile %s: %w", kw, err)
		}
		k := kindSchema{schema: s, keyword: kw}
		if req, props, ok := plainBranch(b.(map[string]any)["then"]); ok {
			k.required, k.props = req, map[string]*jsonschema.Schema{}
			for _, name := range props {
				if k.props[name], err = full.Compile(URL + "#/$defs/step/" + kw + "/properties/" + name); err != nil {
					return nil, fmt.Errorf("schema: compile %s/properties/%s: %w", kw, name, err)
				}
			}
		}
		d.kinds[kind] = k
	}
	delete(step, "allOf")
	stepProps, _ := step["properties"].(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(stepProps)) {
		types, ok := branchTypes(defs, stepProps[name])
		if !ok {
			continue
		}
		p := typedOneOf{name: name, byType: map[string]*jsonschema.Schema{}}
		loc := URL + "#/$defs/step/properties/" + name
		if p.full, err = full.Compile(loc); err != nil {
			return nil, fmt.Errorf("schema: compile %s: %w", loc, err)
		}
		for i, t := range types {
			if p.byType[t], err = full.Compile(loc + "/oneOf/" + strconv.Itoa(i)); err != nil {
				return nil, fmt.Errorf("schema: compile %s/oneOf/%d: %w", loc, i, err)
			}
		}
		d.typed = append(d.typed, p)
		stepProps[name] = map[string]any{} // checked by d.typed
	}
	props, _ := doc["properties"].(map[string]any)
	for _, list := range stepLists {
		l, _ := props[list].(map[string]any)
		if !reflect.DeepEqual(l["items"], map[string]any{"$ref": "#/$defs/step"}) {
			return nil, fmt.Errorf("schema: properties/%s/items is not {$ref: #/$defs/step}; Validate checks those items itself", list)
		}
		delete(l, "items")
	}
	text, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("schema: encode: %w", err)
	}
	c, err := newCompiler(text)
	if err != nil {
		return nil, err
	}
	if d.base, err = c.Compile(URL); err != nil {
		return nil, fmt.Errorf("schema: compile: %w", err)
	}
	if d.step0, err = c.Compile(URL + "#/$defs/step"); err != nil {
		return nil, fmt.Errorf("schema: compile $defs/step: %w", err)
	}
	return d, nil
})

func newCompiler(text []byte) (*jsonschema.Compiler, error) {
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	c.AssertFormat = false
	if err := c.AddResource(URL, bytes.NewReader(text)); err != nil {
		return nil, fmt.Errorf("schema: load %s: %w", URL, err)
	}
	return c, nil
}

// plainBranch reports whether a then schema has no keywords but required
// (a list of names) and properties, and returns both.
func plainBranch(then any) (required, props []string, ok bool) {
	m, _ := then.(map[string]any)
	if m == nil {
		return nil, nil, false
	}
	for k, v := range m {
		switch k {
		case "required":
			list, _ := v.([]any)
			for _, r := range list {
				name, isStr := r.(string)
				if !isStr {
					return nil, nil, false
				}
				required = append(required, name)
			}
		case "properties":
			pm, _ := v.(map[string]any)
			if pm == nil {
				return nil, nil, false
			}
			props = slices.Sorted(maps.Keys(pm))
		default:
			return nil, nil, false
		}
	}
	return required, props, true
}

// branchTypes returns, for a property schema made only of a oneOf (and
// annotations), the JSON type each branch requires, when each requires one
// of string, array or object, all different: its own type, or that of the
// $defs entry it refers to. ok is false for any other schema.
func branchTypes(defs map[string]any, prop any) (types []string, ok bool) {
	m, _ := prop.(map[string]any)
	branches, _ := m["oneOf"].([]any)
	if len(branches) == 0 {
		return nil, false
	}
	for k := range m {
		switch k {
		case "oneOf", "description", "title", "default", "examples":
		default:
			return nil, false
		}
	}
	for _, b := range branches {
		bm, _ := b.(map[string]any)
		t, _ := bm["type"].(string)
		if ref, ok := bm["$ref"].(string); ok && t == "" {
			name, found := strings.CutPrefix(ref, "#/$defs/")
			def, _ := defs[name].(map[string]any)
			if !found || def == nil {
				return nil, false
			}
			t, _ = def["type"].(string)
		}
		if (t != "string" && t != "array" && t != "object") || slices.Contains(types, t) {
			return nil, false
		}
		types = append(types, t)
	}
	return types, true
}

// jsonType is the JSON type of a decoded value, as branchTypes names it
// ("" for the others).
func jsonType(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return ""
}

// usesBranch reports whether b is exactly {if: {properties: {uses: {const:
// KIND}}, required: [uses]}, then: …} and returns KIND. Any other form
// could hold for a step whatever its uses, so it is refused.
func usesBranch(b any) (string, bool) {
	m, _ := b.(map[string]any)
	cond, _ := m["if"].(map[string]any)
	if len(m) != 2 || m["then"] == nil || len(cond) != 2 {
		return "", false
	}
	if !reflect.DeepEqual(cond["required"], []any{"uses"}) {
		return "", false
	}
	props, _ := cond["properties"].(map[string]any)
	uses, _ := props["uses"].(map[string]any)
	kind, ok := uses["const"].(string)
	if len(props) != 1 || len(uses) != 1 || !ok {
		return "", false
	}
	return kind, true
}

// refsTo lists the JSON pointers of the subschemas holding "$ref": ref,
// sorted.
func refsTo(v any, ref, at string) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		if v["$ref"] == ref {
			out = append(out, at)
		}
		for k, c := range v {
			out = append(out, refsTo(c, ref, at+"/"+k)...)
		}
	case []any:
		for i, c := range v {
			out = append(out, refsTo(c, ref, at+"/"+strconv.Itoa(i))...)
		}
	}
	slices.Sort(out)
	return out
}

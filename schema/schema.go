package schema

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// URL is the schema's $id, the resource URL it is compiled under and the
// address editors can be pointed at.
const URL = "https://taoflow.dev/schema/taoflow.schema.json"

// JSON is the raw text of taoflow.schema.json. Callers must not modify it.
//
//go:embed taoflow.schema.json
var JSON []byte

var (
	compileOnce sync.Once
	compiled    *jsonschema.Schema
	compileErr  error
)

// Compile returns the compiled plan schema (draft 2020-12, format assertions
// off). It compiles on the first call and returns the same schema, or the
// same error, afterwards; the result is safe for concurrent use.
func Compile() (*jsonschema.Schema, error) {
	compileOnce.Do(func() {
		c := jsonschema.NewCompiler()
		c.Draft = jsonschema.Draft2020
		c.AssertFormat = false
		if err := c.AddResource(URL, bytes.NewReader(JSON)); err != nil {
			compileErr = fmt.Errorf("schema: load %s: %w", URL, err)
			return
		}
		compiled, compileErr = c.Compile(URL)
		if compileErr != nil {
			compileErr = fmt.Errorf("schema: compile: %w", compileErr)
		}
	})
	return compiled, compileErr
}

// StepKinds returns the step kinds a step's `uses` accepts, in the order the
// schema lists them. The list is read from the schema, so it cannot drift
// from what validation accepts. The caller owns the returned slice.
func StepKinds() []string {
	return slices.Clone(stepKinds())
}

var stepKinds = sync.OnceValue(func() []string {
	var doc struct {
		Defs struct {
			Step struct {
				Properties struct {
					Uses struct {
						Enum []string `json:"enum"`
					} `json:"uses"`
				} `json:"properties"`
			} `json:"step"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(JSON, &doc); err != nil {
		// The embedded file is checked by this package's tests.
		panic("schema: embedded taoflow.schema.json is not JSON: " + err.Error())
	}
	return doc.Defs.Step.Properties.Uses.Enum
})

// StepSummary returns the one-line summary (x-summary) of the step kind
// kind, as `taoflow --help` lists it, or "" for a kind the schema does not
// know.
func StepSummary(kind string) string {
	return stepSummaries()[kind]
}

var stepSummaries = sync.OnceValue(func() map[string]string {
	var doc struct {
		Defs map[string]struct {
			Summary string `json:"x-summary"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(JSON, &doc); err != nil {
		panic("schema: embedded taoflow.schema.json is not JSON: " + err.Error())
	}
	out := map[string]string{}
	for _, k := range stepKinds() {
		out[k] = doc.Defs["with-"+k].Summary
	}
	return out
})

var (
	defsMu  sync.Mutex
	defsMap = map[string]*jsonschema.Schema{}
)

// CompileDef returns the compiled schema of one definition of the plan
// schema, such as "with-run" (the settings of a run step), to check a value
// on its own: taoflow checks each with: value again after its ${{ }}
// expressions are substituted. The result is cached and safe for concurrent
// use.
func CompileDef(name string) (*jsonschema.Schema, error) {
	defsMu.Lock()
	defer defsMu.Unlock()
	if s, ok := defsMap[name]; ok {
		return s, nil
	}
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	c.AssertFormat = false
	if err := c.AddResource(URL, bytes.NewReader(JSON)); err != nil {
		return nil, fmt.Errorf("schema: load %s: %w", URL, err)
	}
	s, err := c.Compile(URL + "#/$defs/" + name)
	if err != nil {
		return nil, fmt.Errorf("schema: compile %s: %w", name, err)
	}
	defsMap[name] = s
	return s, nil
}

// ValidateDef validates v against the definition name of the plan schema
// (see CompileDef), with the same result as CompileDef(name) and its
// Validate, but without the library's per-value cost when v is valid.
func ValidateDef(name string, v any) error {
	s, err := CompileDef(name)
	if err != nil {
		return err
	}
	if valid(s, anyInstance(v)) {
		return nil
	}
	return s.Validate(v)
}

// Package schema owns taoflow.schema.json, the JSON Schema (draft 2020-12) of
// taoflow plan format 1, and the few helpers built on it.
//
// The schema file is the single source of truth for the shape of a plan: the
// plan package validates every plan against it (mapping each failure back to
// a YAML position by its JSON pointer), editors use it for completion and
// hovers, and Reference renders the user documentation in
// docs/plan-reference.md from it. Keeping all three on one file means a new
// key or step kind is added in one place.
//
// The schema is embedded (JSON) and compiled once (Compile). Validate checks
// a plan with the same result as Compile().Validate, but selects each step's
// settings schema by its uses once instead of evaluating every kind's
// branch (dispatch.go), and first asks valid (valid.go), a yes/no
// evaluation of the compiled schema that builds no errors, so that the
// library's error reporting runs only for a plan with failures: a
// 10,000-step plan is validated in a fraction of the time. ValidateDef does
// the same for one definition. Valid and ValidDef give that yes/no answer
// alone, on an Instance read in place (package plan's YAML tree), so that
// a valid plan is not even copied into a JSON-shaped value. Semantic checks
// that a schema cannot express well — unique ids, references between steps
// and instances, cycles, expressions, inline secrets — belong to package
// plan, not here.
package schema

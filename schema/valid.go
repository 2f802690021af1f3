package schema

import (
	"encoding/json"
	"maps"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// Instance is a JSON value that valid reads in place: package plan passes
// its YAML tree, with no JSON-shaped copy made for a plan that is valid.
// The methods of a value answer for its own JSON type only.
type Instance interface {
	// JSONType is "null", "boolean", "number", "string", "array" or
	// "object", or "" for a value that is none of them.
	JSONType() string
	// JSONText is a string's text, a number's digits as a json.Number
	// holds them, or "true" or "false".
	JSONText() string
	// JSONLen is the number of items of an array or members of an object.
	JSONLen() int
	// JSONItem is item i of an array.
	JSONItem(i int) Instance
	// JSONMember is member i of an object: its name and value.
	JSONMember(i int) (string, Instance)
	// JSONLookup is the member of an object named name.
	JSONLookup(name string) (Instance, bool)
}

// Valid reports whether the plan schema accepts doc: whether Validate
// would return nil for doc as a JSON-shaped value. It builds no errors
// and no copy of doc; call Validate, for the errors, when it says no.
func Valid(doc Instance) bool {
	full, err := Compile()
	return err == nil && valid(full, doc)
}

// ValidDef reports whether the definition name of the plan schema accepts
// v: whether ValidateDef would return nil. It says no also when name is no
// definition.
func ValidDef(name string, v Instance) bool {
	s, err := CompileDef(name)
	return err == nil && valid(s, v)
}

// valid reports whether v satisfies s, with the answer jsonschema/v5's
// s.Validate gives (nil or not) for v as a JSON-shaped value, but without
// building errors, instance locations or unevaluated-property maps: on a
// valid plan that is most of the library's cost (a 10,000-step plan: 1 M
// allocations, half of its load). Callers run the library when valid says
// no, for its errors; valid is only ever a shortcut to nil.
//
// It reads the compiled schema's own fields, so it follows the schema's
// compiled meaning (regular expressions, $ref targets). It handles only the
// keywords the plan schema uses (see supported); a schema with any other
// keyword, or a value it does not decide exactly (a Go number that is not
// a json.Number, say), makes it answer no, and the library decides.
func valid(s *jsonschema.Schema, v Instance) bool {
	n := nodeOf(s)
	if n == nil {
		return false
	}
	var c validator
	return c.valid(n, v) && !c.unsure
}

// validator evaluates one value. unsure is set where it cannot decide
// exactly; its answer is then no.
type validator struct {
	unsure bool
}

func (c *validator) valid(n *node, v Instance) bool {
	if c.unsure {
		return false
	}
	s := n.s
	if s.Always != nil {
		return *s.Always
	}
	vt := v.JSONType()
	if vt == "" {
		c.unsure = true // not a JSON value: the library decides (or refuses it)
		return false
	}
	if len(s.Types) > 0 && !c.hasType(s.Types, vt, v) {
		return false
	}
	if n.constant != nil && !c.equal(v, n.constant) {
		return false
	}
	if len(n.enum) > 0 {
		found := false
		for _, e := range n.enum {
			if c.equal(v, e) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	switch vt {
	case "object":
		if !c.object(n, v) {
			return false
		}
	case "array":
		if !c.array(n, v) {
			return false
		}
	case "string":
		text := v.JSONText()
		if s.MinLength != -1 || s.MaxLength != -1 {
			l := utf8.RuneCountInString(text)
			if s.MinLength != -1 && l < s.MinLength || s.MaxLength != -1 && l > s.MaxLength {
				return false
			}
		}
		if s.Pattern != nil && !s.Pattern.MatchString(text) {
			return false
		}
	case "number":
		if s.Minimum != nil || s.ExclusiveMinimum != nil || s.Maximum != nil || s.ExclusiveMaximum != nil {
			r, ok := new(big.Rat).SetString(v.JSONText())
			if !ok {
				c.unsure = true
				return false
			}
			if s.Minimum != nil && r.Cmp(s.Minimum) < 0 ||
				s.ExclusiveMinimum != nil && r.Cmp(s.ExclusiveMinimum) <= 0 ||
				s.Maximum != nil && r.Cmp(s.Maximum) > 0 ||
				s.ExclusiveMaximum != nil && r.Cmp(s.ExclusiveMaximum) >= 0 {
				return false
			}
		}
	}
	if n.ref != nil && !c.valid(n.ref, v) {
		return false
	}
	if n.not != nil && c.valid(n.not, v) {
		return false
	}
	for _, sub := range n.allOf {
		if !c.valid(sub, v) {
			return false
		}
	}
	if len(n.anyOf) > 0 {
		found := false
		for _, sub := range n.anyOf {
			if c.valid(sub, v) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if len(n.oneOf) > 0 {
		k := 0
		for _, sub := range n.oneOf {
			if c.valid(sub, v) {
				k++
			}
		}
		if k != 1 {
			return false
		}
	}
	if n.cond != nil {
		if c.valid(n.cond, v) {
			if n.then != nil && !c.valid(n.then, v) {
				return false
			}
		} else if n.els != nil && !c.valid(n.els, v) {
			return false
		}
	}
	return !c.unsure
}

func (c *validator) object(n *node, v Instance) bool {
	s := n.s
	size := v.JSONLen()
	if s.MinProperties != -1 && size < s.MinProperties || s.MaxProperties != -1 && size > s.MaxProperties {
		return false
	}
	for _, r := range s.Required {
		if _, ok := v.JSONLookup(r); !ok {
			return false
		}
	}
	if n.namedOnly {
		// Only the named properties are checked (an if's condition, most
		// often): look them up instead of going through the object.
		for _, p := range n.propList {
			if val, ok := v.JSONLookup(p.name); ok && !c.valid(p.node, val) {
				return false
			}
		}
		return true
	}
	for i := range size {
		name, val := v.JSONMember(i)
		if n.propertyNames != nil && !c.valid(n.propertyNames, stringInstance(name)) {
			return false
		}
		evaluated := false
		if p, ok := n.props[name]; ok {
			evaluated = true
			if !c.valid(p, val) {
				return false
			}
		}
		for _, p := range n.patterns {
			if p.re.MatchString(name) {
				evaluated = true
				if !c.valid(p.node, val) {
					return false
				}
			}
		}
		if evaluated {
			continue
		}
		if n.additional != nil && !c.valid(n.additional, val) {
			return false
		}
	}
	return true
}

func (c *validator) array(n *node, v Instance) bool {
	s := n.s
	size := v.JSONLen()
	if s.MinItems != -1 && size < s.MinItems || s.MaxItems != -1 && size > s.MaxItems {
		return false
	}
	if s.UniqueItems && !c.unique(v) {
		return false
	}
	if n.items != nil {
		for i := range size {
			if !c.valid(n.items, v.JSONItem(i)) {
				return false
			}
		}
	}
	for i := range size {
		switch {
		case i < len(n.prefixItems):
			if !c.valid(n.prefixItems[i], v.JSONItem(i)) {
				return false
			}
		case n.items2020 != nil:
			if !c.valid(n.items2020, v.JSONItem(i)) {
				return false
			}
		default:
			return true
		}
	}
	return true
}

// unique reports whether no two items are equal.
func (c *validator) unique(v Instance) bool {
	size := v.JSONLen()
	if size > 32 {
		seen := make(map[string]bool, size)
		for i := range size {
			it := v.JSONItem(i)
			if it.JSONType() != "string" {
				seen = nil
				break
			}
			if seen[it.JSONText()] {
				return false
			}
			seen[it.JSONText()] = true
		}
		if seen != nil {
			return true
		}
	}
	for i := 1; i < size; i++ {
		for j := 0; j < i; j++ {
			if c.equal(v.JSONItem(i), v.JSONItem(j)) {
				return false
			}
		}
	}
	return true
}

func (c *validator) hasType(types []string, vt string, v Instance) bool {
	for _, t := range types {
		if t == vt {
			return true
		}
		if t == "integer" && vt == "number" {
			text := v.JSONText()
			if _, err := strconv.ParseInt(text, 10, 64); err == nil {
				return true
			}
			r, ok := new(big.Rat).SetString(text)
			if !ok {
				c.unsure = true
				return false
			}
			if r.IsInt() {
				return true
			}
		}
	}
	return false
}

// equal is the library's equality of JSON values (numbers by value).
func (c *validator) equal(a, b Instance) bool {
	ta, tb := a.JSONType(), b.JSONType()
	if ta == "" || tb == "" {
		c.unsure = true
		return false
	}
	if ta != tb {
		return false
	}
	switch ta {
	case "null":
		return true
	case "array":
		if a.JSONLen() != b.JSONLen() {
			return false
		}
		for i := range a.JSONLen() {
			if !c.equal(a.JSONItem(i), b.JSONItem(i)) {
				return false
			}
		}
		return true
	case "object":
		if a.JSONLen() != b.JSONLen() {
			return false
		}
		for i := range a.JSONLen() {
			name, va := a.JSONMember(i)
			vb, ok := b.JSONLookup(name)
			if !ok || !c.equal(va, vb) {
				return false
			}
		}
		return true
	case "number":
		x, y := a.JSONText(), b.JSONText()
		if x == y {
			return true
		}
		rx, okx := new(big.Rat).SetString(x)
		ry, oky := new(big.Rat).SetString(y)
		if !okx || !oky {
			c.unsure = true
			return false
		}
		return rx.Cmp(ry) == 0
	}
	return a.JSONText() == b.JSONText()
}

// stringInstance is a string as an Instance (a property name, for
// propertyNames).
type stringInstance string

func (s stringInstance) JSONType() string                   { return "string" }
func (s stringInstance) JSONText() string                   { return string(s) }
func (s stringInstance) JSONLen() int                       { return 0 }
func (s stringInstance) JSONItem(int) Instance              { return nil }
func (s stringInstance) JSONMember(int) (string, Instance)  { return "", nil }
func (s stringInstance) JSONLookup(string) (Instance, bool) { return nil, false }

// jsonValue is a JSON-shaped value (map[string]any, []any, string,
// json.Number, bool, nil) as an Instance. An object's members are in
// sorted order.
type jsonValue struct {
	v    any
	keys []string // an object's names, sorted
}

func anyInstance(v any) Instance {
	j := &jsonValue{v: v}
	if m, ok := v.(map[string]any); ok {
		j.keys = slices.Sorted(maps.Keys(m))
	}
	return j
}

func (j *jsonValue) JSONType() string {
	switch j.v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return ""
}

func (j *jsonValue) JSONText() string {
	switch v := j.v.(type) {
	case bool:
		return strconv.FormatBool(v)
	case json.Number:
		return string(v)
	case string:
		return v
	}
	return ""
}

func (j *jsonValue) JSONLen() int {
	switch v := j.v.(type) {
	case []any:
		return len(v)
	case map[string]any:
		return len(v)
	}
	return 0
}

func (j *jsonValue) JSONItem(i int) Instance { return anyInstance(j.v.([]any)[i]) }

func (j *jsonValue) JSONMember(i int) (string, Instance) {
	name := j.keys[i]
	return name, anyInstance(j.v.(map[string]any)[name])
}

func (j *jsonValue) JSONLookup(name string) (Instance, bool) {
	v, ok := j.v.(map[string]any)[name]
	if !ok {
		return nil, false
	}
	return anyInstance(v), true
}

// node is a compiled schema as valid walks it: its subschemas linked as
// nodes, its properties in a list as well as a map.
type node struct {
	s                         *jsonschema.Schema
	constant                  Instance // const, if any
	enum                      []Instance
	ref, not, cond, then, els *node
	allOf, anyOf, oneOf       []*node
	props                     map[string]*node
	propList                  []namedNode
	patterns                  []patternNode
	propertyNames             *node
	additional                *node // additionalProperties; false is a node whose Always is false
	// namedOnly: no propertyNames, patternProperties or
	// additionalProperties, so only the named properties are checked.
	namedOnly        bool
	items, items2020 *node
	prefixItems      []*node
}

type namedNode struct {
	name string
	node *node
}

type patternNode struct {
	re   *regexp.Regexp
	node *node
}

var (
	nodesMu sync.Mutex
	nodes   = map[*jsonschema.Schema]*node{}
	refused = map[*jsonschema.Schema]bool{}
)

// nodeOf returns the node of s, or nil when s or a schema under it uses
// a keyword valid does not evaluate. Nodes are made once per compiled
// schema.
func nodeOf(s *jsonschema.Schema) *node {
	nodesMu.Lock()
	defer nodesMu.Unlock()
	if refused[s] {
		return nil
	}
	if n, ok := nodes[s]; ok {
		return n
	}
	made := map[*jsonschema.Schema]*node{}
	n, ok := makeNode(s, made)
	if !ok {
		refused[s] = true
		return nil
	}
	for k, v := range made {
		nodes[k] = v
	}
	return n
}

// supported reports whether valid decides s and every schema under it.
func supported(s *jsonschema.Schema) bool { return nodeOf(s) != nil }

func makeNode(s *jsonschema.Schema, made map[*jsonschema.Schema]*node) (*node, bool) {
	if s == nil {
		return nil, true
	}
	if n, ok := nodes[s]; ok {
		return n, true
	}
	if n, ok := made[s]; ok {
		return n, true // a cycle through $ref: filled in below
	}
	if !supportedHere(s) {
		return nil, false
	}
	n := &node{s: s}
	made[s] = n
	if len(s.Constant) > 0 {
		n.constant = anyInstance(s.Constant[0])
	}
	for _, e := range s.Enum {
		n.enum = append(n.enum, anyInstance(e))
	}
	ok := true
	sub := func(s *jsonschema.Schema) *node {
		m, good := makeNode(s, made)
		ok = ok && good
		return m
	}
	subs := func(list []*jsonschema.Schema) []*node {
		out := make([]*node, len(list))
		for i, s := range list {
			out[i] = sub(s)
		}
		return out
	}
	n.ref, n.not, n.cond, n.then, n.els = sub(s.Ref), sub(s.Not), sub(s.If), sub(s.Then), sub(s.Else)
	n.allOf, n.anyOf, n.oneOf, n.prefixItems = subs(s.AllOf), subs(s.AnyOf), subs(s.OneOf), subs(s.PrefixItems)
	n.propertyNames, n.items2020 = sub(s.PropertyNames), sub(s.Items2020)
	if items, isSchema := s.Items.(*jsonschema.Schema); isSchema {
		n.items = sub(items)
	}
	n.props = make(map[string]*node, len(s.Properties))
	for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
		p := sub(s.Properties[name])
		n.props[name] = p
		n.propList = append(n.propList, namedNode{name, p})
	}
	for re, p := range s.PatternProperties {
		n.patterns = append(n.patterns, patternNode{re, sub(p)})
	}
	switch ap := s.AdditionalProperties.(type) {
	case bool:
		if !ap {
			no := false
			n.additional = &node{s: &jsonschema.Schema{Always: &no}}
		}
	case *jsonschema.Schema:
		n.additional = sub(ap)
	}
	n.namedOnly = n.propertyNames == nil && len(n.patterns) == 0 && n.additional == nil
	return n, ok
}

// supportedHere reports whether s itself uses only keywords valid
// evaluates as the library does.
func supportedHere(s *jsonschema.Schema) bool {
	switch s.AdditionalProperties.(type) {
	case nil, bool, *jsonschema.Schema:
	default:
		return false
	}
	switch s.Items.(type) {
	case nil, *jsonschema.Schema:
	default:
		return false
	}
	return s.Format == "" &&
		s.RecursiveRef == nil && s.DynamicRef == nil &&
		!s.RegexProperties &&
		len(s.Dependencies) == 0 && len(s.DependentRequired) == 0 && len(s.DependentSchemas) == 0 &&
		s.UnevaluatedProperties == nil && s.UnevaluatedItems == nil &&
		s.AdditionalItems == nil && s.Contains == nil &&
		s.ContentEncoding == "" && s.ContentMediaType == "" && s.ContentSchema == nil &&
		s.MultipleOf == nil &&
		len(s.Extensions) == 0
}

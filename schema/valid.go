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

// valid reports whether v satisfies s, with the answer jsonschema/v5's
// s.Validate(v) == nil gives, but without building errors, instance
// locations or unevaluated-property maps: on a valid plan that is most of
// the library's cost (a 10,000-step plan: 1 M allocations, half of its
// load). Callers run the library when valid says no, for its errors; valid
// is only ever a shortcut to nil.
//
// It reads the compiled schema's own fields, so it follows the schema's
// compiled meaning (regular expressions, $ref targets). It handles only the
// keywords the plan schema uses (see supported); a schema with any other
// keyword, or a value of a kind it does not decide exactly (a Go number
// that is not a json.Number), makes it answer no, and the library decides.
func valid(s *jsonschema.Schema, v any) bool {
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

func (c *validator) valid(n *node, v any) bool {
	if c.unsure {
		return false
	}
	s := n.s
	if s.Always != nil {
		return *s.Always
	}
	if len(s.Types) > 0 && !c.hasType(s.Types, v) {
		return false
	}
	if len(s.Constant) > 0 && !c.equal(v, s.Constant[0]) {
		return false
	}
	if len(s.Enum) > 0 {
		found := false
		for _, e := range s.Enum {
			if c.equal(v, e) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	switch v := v.(type) {
	case map[string]any:
		if !c.object(n, v) {
			return false
		}
	case []any:
		if !c.array(n, v) {
			return false
		}
	case string:
		if s.MinLength != -1 || s.MaxLength != -1 {
			l := utf8.RuneCountInString(v)
			if s.MinLength != -1 && l < s.MinLength || s.MaxLength != -1 && l > s.MaxLength {
				return false
			}
		}
		if s.Pattern != nil && !s.Pattern.MatchString(v) {
			return false
		}
	case json.Number:
		if s.Minimum != nil || s.ExclusiveMinimum != nil || s.Maximum != nil || s.ExclusiveMaximum != nil {
			r, ok := new(big.Rat).SetString(string(v))
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
	case nil, bool:
	default:
		c.unsure = true // another Go type: the library decides (or refuses it)
		return false
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

func (c *validator) object(n *node, v map[string]any) bool {
	s := n.s
	if s.MinProperties != -1 && len(v) < s.MinProperties || s.MaxProperties != -1 && len(v) > s.MaxProperties {
		return false
	}
	for _, r := range s.Required {
		if _, ok := v[r]; !ok {
			return false
		}
	}
	if n.namedOnly {
		// Only the named properties are checked (an if's condition, most
		// often): look them up instead of going through the object.
		for _, p := range n.propList {
			if val, ok := v[p.name]; ok && !c.valid(p.node, val) {
				return false
			}
		}
		return true
	}
	for name, val := range v {
		if n.propertyNames != nil && !c.valid(n.propertyNames, name) {
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

func (c *validator) array(n *node, v []any) bool {
	s := n.s
	if s.MinItems != -1 && len(v) < s.MinItems || s.MaxItems != -1 && len(v) > s.MaxItems {
		return false
	}
	if s.UniqueItems && !c.unique(v) {
		return false
	}
	if n.items != nil {
		for _, it := range v {
			if !c.valid(n.items, it) {
				return false
			}
		}
	}
	for i, it := range v {
		switch {
		case i < len(n.prefixItems):
			if !c.valid(n.prefixItems[i], it) {
				return false
			}
		case n.items2020 != nil:
			if !c.valid(n.items2020, it) {
				return false
			}
		default:
			return true
		}
	}
	return true
}

// unique reports whether no two items are equal.
func (c *validator) unique(v []any) bool {
	if len(v) > 32 {
		seen := make(map[string]bool, len(v))
		for _, it := range v {
			str, ok := it.(string)
			if !ok {
				seen = nil
				break
			}
			if seen[str] {
				return false
			}
			seen[str] = true
		}
		if seen != nil {
			return true
		}
	}
	for i := 1; i < len(v); i++ {
		for j := 0; j < i; j++ {
			if c.equal(v[i], v[j]) {
				return false
			}
		}
	}
	return true
}

// jsonType is the JSON type of a value as the library names it, and "" for
// a Go type it does not take or that valid leaves to it.
func jsonTypeOf(v any) string {
	switch v.(type) {
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

func (c *validator) hasType(types []string, v any) bool {
	vt := jsonTypeOf(v)
	if vt == "" {
		c.unsure = true
		return false
	}
	for _, t := range types {
		if t == vt {
			return true
		}
		if t == "integer" && vt == "number" {
			n := string(v.(json.Number))
			if _, err := strconv.ParseInt(n, 10, 64); err == nil {
				return true
			}
			r, ok := new(big.Rat).SetString(n)
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
func (c *validator) equal(a, b any) bool {
	ta, tb := jsonTypeOf(a), jsonTypeOf(b)
	if ta == "" || tb == "" {
		c.unsure = true
		return false
	}
	if ta != tb {
		return false
	}
	switch a := a.(type) {
	case []any:
		b := b.([]any)
		if len(a) != len(b) {
			return false
		}
		for i := range a {
			if !c.equal(a[i], b[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		b := b.(map[string]any)
		if len(a) != len(b) {
			return false
		}
		for k, va := range a {
			vb, ok := b[k]
			if !ok || !c.equal(va, vb) {
				return false
			}
		}
		return true
	case json.Number:
		b := b.(json.Number)
		if a == b {
			return true
		}
		ra, oka := new(big.Rat).SetString(string(a))
		rb, okb := new(big.Rat).SetString(string(b))
		if !oka || !okb {
			c.unsure = true
			return false
		}
		return ra.Cmp(rb) == 0
	}
	return a == b
}

// node is a compiled schema as valid walks it: its subschemas linked as
// nodes, its properties in a list as well as a map.
type node struct {
	s                         *jsonschema.Schema
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

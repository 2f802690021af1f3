package schema

import (
	"encoding/json"
	"math/big"
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
	if !supported(s) {
		return false
	}
	var c validator
	return c.valid(s, v) && !c.unsure
}

// validator evaluates one value. unsure is set where it cannot decide
// exactly; its answer is then no.
type validator struct {
	unsure bool
}

func (c *validator) valid(s *jsonschema.Schema, v any) bool {
	if c.unsure {
		return false
	}
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
		if !c.object(s, v) {
			return false
		}
	case []any:
		if !c.array(s, v) {
			return false
		}
	case string:
		if s.MinLength != -1 || s.MaxLength != -1 {
			n := utf8.RuneCountInString(v)
			if s.MinLength != -1 && n < s.MinLength || s.MaxLength != -1 && n > s.MaxLength {
				return false
			}
		}
		if s.Pattern != nil && !s.Pattern.MatchString(v) {
			return false
		}
	case json.Number:
		if s.Minimum != nil || s.ExclusiveMinimum != nil || s.Maximum != nil || s.ExclusiveMaximum != nil {
			n, ok := new(big.Rat).SetString(string(v))
			if !ok {
				c.unsure = true
				return false
			}
			if s.Minimum != nil && n.Cmp(s.Minimum) < 0 ||
				s.ExclusiveMinimum != nil && n.Cmp(s.ExclusiveMinimum) <= 0 ||
				s.Maximum != nil && n.Cmp(s.Maximum) > 0 ||
				s.ExclusiveMaximum != nil && n.Cmp(s.ExclusiveMaximum) >= 0 {
				return false
			}
		}
	case nil, bool:
	default:
		c.unsure = true // another Go type: the library decides (or refuses it)
		return false
	}
	if s.Ref != nil && !c.valid(s.Ref, v) {
		return false
	}
	if s.Not != nil && c.valid(s.Not, v) {
		return false
	}
	for _, sub := range s.AllOf {
		if !c.valid(sub, v) {
			return false
		}
	}
	if len(s.AnyOf) > 0 {
		found := false
		for _, sub := range s.AnyOf {
			if c.valid(sub, v) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if len(s.OneOf) > 0 {
		n := 0
		for _, sub := range s.OneOf {
			if c.valid(sub, v) {
				n++
			}
		}
		if n != 1 {
			return false
		}
	}
	if s.If != nil {
		if c.valid(s.If, v) {
			if s.Then != nil && !c.valid(s.Then, v) {
				return false
			}
		} else if s.Else != nil && !c.valid(s.Else, v) {
			return false
		}
	}
	return !c.unsure
}

func (c *validator) object(s *jsonschema.Schema, v map[string]any) bool {
	if s.MinProperties != -1 && len(v) < s.MinProperties || s.MaxProperties != -1 && len(v) > s.MaxProperties {
		return false
	}
	for _, r := range s.Required {
		if _, ok := v[r]; !ok {
			return false
		}
	}
	if s.PropertyNames == nil && len(s.PatternProperties) == 0 && s.AdditionalProperties == nil {
		// Only the named properties are checked (an if's condition, most
		// often): look them up instead of going through the object.
		for name, p := range s.Properties {
			if val, ok := v[name]; ok && !c.valid(p, val) {
				return false
			}
		}
		return true
	}
	for name, val := range v {
		if s.PropertyNames != nil && !c.valid(s.PropertyNames, name) {
			return false
		}
		evaluated := false
		if p, ok := s.Properties[name]; ok {
			evaluated = true
			if !c.valid(p, val) {
				return false
			}
		}
		for re, p := range s.PatternProperties {
			if re.MatchString(name) {
				evaluated = true
				if !c.valid(p, val) {
					return false
				}
			}
		}
		if evaluated {
			continue
		}
		switch ap := s.AdditionalProperties.(type) {
		case nil:
		case bool:
			if !ap {
				return false
			}
		case *jsonschema.Schema:
			if !c.valid(ap, val) {
				return false
			}
		default:
			c.unsure = true
			return false
		}
	}
	return true
}

func (c *validator) array(s *jsonschema.Schema, v []any) bool {
	if s.MinItems != -1 && len(v) < s.MinItems || s.MaxItems != -1 && len(v) > s.MaxItems {
		return false
	}
	if s.UniqueItems && !c.unique(v) {
		return false
	}
	if items, ok := s.Items.(*jsonschema.Schema); ok {
		for _, it := range v {
			if !c.valid(items, it) {
				return false
			}
		}
	}
	for i, it := range v {
		switch {
		case i < len(s.PrefixItems):
			if !c.valid(s.PrefixItems[i], it) {
				return false
			}
		case s.Items2020 != nil:
			if !c.valid(s.Items2020, it) {
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

var (
	supportedMu   sync.Mutex
	supportedMemo = map[*jsonschema.Schema]bool{}
)

// supported reports whether valid decides s and every schema under it:
// whether they use only the keywords valid evaluates. The answer is kept
// per compiled schema.
func supported(s *jsonschema.Schema) bool {
	supportedMu.Lock()
	defer supportedMu.Unlock()
	return supportedLocked(s)
}

func supportedLocked(s *jsonschema.Schema) bool {
	if s == nil {
		return true
	}
	if ok, seen := supportedMemo[s]; seen {
		return ok
	}
	supportedMemo[s] = true // a cycle through $ref is decided by the rest
	ok := supportedHere(s)
	subs := []*jsonschema.Schema{s.Ref, s.Not, s.If, s.Then, s.Else, s.PropertyNames, s.Items2020}
	subs = append(subs, s.AllOf...)
	subs = append(subs, s.AnyOf...)
	subs = append(subs, s.OneOf...)
	subs = append(subs, s.PrefixItems...)
	for _, p := range s.Properties {
		subs = append(subs, p)
	}
	for _, p := range s.PatternProperties {
		subs = append(subs, p)
	}
	if ap, isSchema := s.AdditionalProperties.(*jsonschema.Schema); isSchema {
		subs = append(subs, ap)
	}
	if items, isSchema := s.Items.(*jsonschema.Schema); isSchema {
		subs = append(subs, items)
	}
	for _, sub := range subs {
		if !supportedLocked(sub) {
			ok = false
		}
	}
	supportedMemo[s] = ok
	return ok
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

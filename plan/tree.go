package plan

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Kind is the shape of a Value.
type Kind int

// Value kinds.
const (
	Null Kind = iota
	Scalar
	List
	Map
)

// Value is a YAML value with aliases and merge keys resolved and the
// position of every element kept. Values reached through an alias are
// shared with their anchor, and so report the anchor's position.
type Value struct {
	Kind   Kind
	Tag    string // resolved YAML tag of a scalar: !!str, !!int, !!float, !!bool, …
	Text   string // a scalar as written (unquoted)
	Items  []*Value
	Fields []Field
	Pos    Pos

	size  int // number of values in the expanded tree rooted here
	bytes int // bytes of text (scalars and keys) in the expanded tree rooted here
	// shared is set on the root of a tree where an alias made a value
	// reachable twice.
	shared bool
}

// Field is one key of a mapping.
type Field struct {
	Key    string
	KeyPos Pos
	Value  *Value
}

// Field returns the field named key, or nil.
func (v *Value) Field(key string) *Field {
	if v == nil {
		return nil
	}
	for i := range v.Fields {
		if v.Fields[i].Key == key {
			return &v.Fields[i]
		}
	}
	return nil
}

// Get returns the value of key, or nil.
func (v *Value) Get(key string) *Value {
	if f := v.Field(key); f != nil {
		return f.Value
	}
	return nil
}

// IsString reports whether v is a scalar that reads as a string.
func (v *Value) IsString() bool { return v != nil && v.Kind == Scalar && v.Tag == "!!str" }

// maxValues and maxBytes bound the size of a plan after alias expansion,
// so a small file of nested aliases (an "alias bomb") is rejected instead
// of expanded: by count of values, and by bytes of text (a long string
// aliased a thousand times is few values but much text, which every later
// stage — schema, checks, rendering per node — would copy).
const (
	maxValues = 1_000_000
	maxBytes  = 32 << 20
)

type treeBuilder struct {
	file    string
	d       *diags
	anchors map[*yaml.Node]*Value // resolved anchors, shared by every alias of them
	busy    map[*yaml.Node]bool   // anchors being resolved (alias cycles)
	tooBig  bool
	shared  bool    // an alias reused a resolved value
	slab    []Value // Values are allocated from here, many at a time
	block   int     // the size of the last block of slab
}

// newValue returns a new zero Value of kind k at the position of n. A
// plan has a Value per node: allocating them in blocks saves most of the
// allocations of a large one.
func (b *treeBuilder) newValue(k Kind, n *yaml.Node) *Value {
	if len(b.slab) == 0 {
		b.block = min(max(2*b.block, 16), 256) // small documents stay small
		b.slab = make([]Value, b.block)
	}
	v := &b.slab[0]
	b.slab = b.slab[1:]
	v.Kind, v.Pos, v.size = k, b.pos(n), 1
	return v
}

var errTooBig = errors.New("too big")

// parseTree parses data as one YAML document into a Value tree. Syntax
// problems are reported into d and a nil Value is returned.
func parseTree(file string, data []byte, d *diags) *Value {
	if p, ok := badEncoding(file, data); ok {
		d.errorf(p.pos, "%s", p.msg)
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			d.errorf(Pos{File: file, Line: 1, Col: 1}, "the plan is empty: expected a mapping with taoflow:, name:, instances: and steps:")
			return nil
		}
		if p, ok := flowExpr(file, data); ok {
			d.errorf(p, "a value holding ${{ }} inside a flow mapping { … } must be quoted: YAML reads the braces of ${{ }} as its own; write it in quotes, e.g. {command: \"echo ${{ vars.x }}\"}")
			return nil
		}
		d.errorf(yamlErrorPos(file, data, err), "%s", yamlErrorMessage(file, data, err))
		return nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		d.errorf(Pos{File: file, Line: extra.Line, Col: extra.Column}, "a plan file holds one YAML document; remove the second document (after ---)")
	} else if !errors.Is(err, io.EOF) {
		d.errorf(yamlErrorPos(file, data, err), "%s", yamlErrorMessage(file, data, err))
		return nil
	}
	b := &treeBuilder{file: file, d: d, anchors: map[*yaml.Node]*Value{}, busy: map[*yaml.Node]bool{}}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			d.errorf(Pos{File: file, Line: 1, Col: 1}, "the plan is empty: expected a mapping with taoflow:, name:, instances: and steps:")
			return nil
		}
		root = root.Content[0]
	}
	v, err := b.value(root)
	if err != nil {
		return nil
	}
	if v.Kind == Null {
		d.errorf(Pos{File: file, Line: 1, Col: 1}, "the plan is empty: expected a mapping with taoflow:, name:, instances: and steps:")
		return nil
	}
	v.shared = b.shared
	return v
}

func (b *treeBuilder) pos(n *yaml.Node) Pos { return Pos{File: b.file, Line: n.Line, Col: n.Column} }

func (b *treeBuilder) grow(v *Value, child *Value) error {
	v.size += child.size
	v.bytes += child.bytes
	if v.size > maxValues || v.size < 0 {
		if !b.tooBig {
			b.tooBig = true
			b.d.errorf(v.Pos, "the plan expands to more than %d values through aliases; refusing to expand it (an alias bomb?)", maxValues)
		}
		return errTooBig
	}
	if v.bytes > maxBytes || v.bytes < 0 {
		if !b.tooBig {
			b.tooBig = true
			b.d.errorf(v.Pos, "the plan expands to more than %d MiB of text through aliases; refusing to expand it (an alias bomb?): alias long values fewer times", maxBytes>>20)
		}
		return errTooBig
	}
	return nil
}

func (b *treeBuilder) value(n *yaml.Node) (*Value, error) {
	switch n.Kind {
	case yaml.AliasNode:
		return b.alias(n)
	case yaml.ScalarNode:
		v := b.newValue(Scalar, n)
		v.Tag, v.Text, v.bytes = n.ShortTag(), n.Value, len(n.Value)
		if v.Tag == "!!null" {
			v.Kind = Null
		}
		return v, b.anchored(n, v)
	case yaml.SequenceNode:
		v := b.newValue(List, n)
		v.Items = make([]*Value, 0, len(n.Content))
		if n.Anchor != "" {
			b.busy[n] = true
			defer delete(b.busy, n)
		}
		for _, c := range n.Content {
			item, err := b.value(c)
			if err != nil {
				return nil, err
			}
			v.Items = append(v.Items, item)
			if err := b.grow(v, item); err != nil {
				return nil, err
			}
		}
		return v, b.anchored(n, v)
	case yaml.MappingNode:
		return b.mapping(n)
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return &Value{Kind: Null, Pos: b.pos(n), size: 1}, nil
		}
		return b.value(n.Content[0])
	}
	b.d.errorf(b.pos(n), "unsupported YAML node")
	return nil, errTooBig
}

func (b *treeBuilder) anchored(n *yaml.Node, v *Value) error {
	if n.Anchor != "" {
		b.anchors[n] = v
	}
	return nil
}

func (b *treeBuilder) alias(n *yaml.Node) (*Value, error) {
	target := n.Alias
	if target == nil {
		b.d.errorf(b.pos(n), "unknown alias *%s", n.Value)
		return nil, errTooBig
	}
	if b.busy[target] {
		b.d.errorf(b.pos(n), "alias *%s refers to a value that contains it", n.Value)
		return nil, errTooBig
	}
	if v, ok := b.anchors[target]; ok {
		b.shared = true
		return v, nil
	}
	return b.value(target)
}

func (b *treeBuilder) mapping(n *yaml.Node) (*Value, error) {
	v := b.newValue(Map, n)
	v.Fields = make([]Field, 0, len(n.Content)/2)
	if n.Anchor != "" {
		b.busy[n] = true
		defer delete(b.busy, n)
	}
	// The keys seen so far are v.Fields' (merged keys come last); a map
	// only pays for itself on large mappings.
	var seen map[string]Pos
	if len(n.Content) > 32 {
		seen = make(map[string]Pos, len(n.Content)/2)
	}
	first := func(key string) (Pos, bool) {
		if seen != nil {
			p, ok := seen[key]
			return p, ok
		}
		for i := range v.Fields {
			if v.Fields[i].Key == key {
				return v.Fields[i].KeyPos, true
			}
		}
		return Pos{}, false
	}
	var merges []*Value
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		if kn.Kind == yaml.ScalarNode && kn.ShortTag() == "!!merge" {
			m, err := b.value(vn)
			if err != nil {
				return nil, err
			}
			switch m.Kind {
			case Map:
				merges = append(merges, m)
			case List:
				for _, it := range m.Items {
					if it.Kind != Map {
						b.d.errorf(it.Pos, "a merge key (<<) takes a mapping or a list of mappings")
						continue
					}
					merges = append(merges, it)
				}
			default:
				b.d.errorf(m.Pos, "a merge key (<<) takes a mapping or a list of mappings")
			}
			continue
		}
		if kn.Kind != yaml.ScalarNode {
			b.d.errorf(b.pos(kn), "mapping keys must be plain strings")
			continue
		}
		key := kn.Value
		if at, dup := first(key); dup {
			b.d.errorf(b.pos(kn), "duplicate key %q (first defined at line %d)", clip(key), at.Line)
			continue
		}
		if seen != nil {
			seen[key] = b.pos(kn)
		}
		val, err := b.value(vn)
		if err != nil {
			return nil, err
		}
		v.Fields = append(v.Fields, Field{Key: key, KeyPos: b.pos(kn), Value: val})
		v.bytes += len(key)
		if err := b.grow(v, val); err != nil {
			return nil, err
		}
	}
	for _, m := range merges {
		for _, f := range m.Fields {
			if _, ok := first(f.Key); ok {
				continue
			}
			if seen != nil {
				seen[f.Key] = f.KeyPos
			}
			v.Fields = append(v.Fields, f)
			v.bytes += len(f.Key)
			if err := b.grow(v, f.Value); err != nil {
				return nil, err
			}
		}
	}
	return v, b.anchored(n, v)
}

type posMsg struct {
	pos Pos
	msg string
}

// badEncoding finds bytes that YAML would reject without a position:
// invalid UTF-8 and control characters.
func badEncoding(file string, data []byte) (posMsg, bool) {
	line, col := 1, 1
	for i := 0; i < len(data); {
		if c := data[i]; c >= 0x20 && c < 0x7f { // printable ASCII, most of a plan
			i++
			col++
			continue
		}
		r, size := utf8.DecodeRune(data[i:])
		p := Pos{File: file, Line: line, Col: col}
		switch {
		case r == utf8.RuneError && size == 1:
			return posMsg{p, fmt.Sprintf("the file is not valid UTF-8 (byte 0x%02x)", data[i])}, true
		case r == '\n':
			line, col = line+1, 0
		case r < 0x20 && r != '\t' && r != '\r', r == 0x7f:
			return posMsg{p, fmt.Sprintf("control character U+%04X is not allowed in a plan", r)}, true
		case r == 0xFEFF && i == 0:
			col = 0
		}
		i += size
		col++
	}
	return posMsg{}, false
}

var (
	yamlLineRE   = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
	yamlAnchorRE = regexp.MustCompile(`unknown anchor '([^']*)' referenced`)
)

func yamlErrorPos(file string, data []byte, err error) Pos {
	m := yamlLineRE.FindStringSubmatch(err.Error())
	if m == nil {
		if a := yamlAnchorRE.FindStringSubmatch(err.Error()); a != nil {
			if i := bytes.Index(data, []byte("*"+a[1])); i >= 0 {
				line := bytes.Count(data[:i], []byte("\n")) + 1
				col := utf8.RuneCount(data[bytes.LastIndexByte(data[:i], '\n')+1:i]) + 1
				return Pos{File: file, Line: line, Col: col}
			}
		}
		return Pos{File: file, Line: 1, Col: 1}
	}
	line, _ := strconv.Atoi(m[1])
	col := 1
	if strings.Contains(m[2], "tab character") {
		if l, c, ok := indentTab(data, line); ok {
			return Pos{File: file, Line: l, Col: c}
		}
	}
	if text, ok := lineText(data, line); ok {
		if strings.Contains(m[2], "cannot start any token") {
			if i := strings.IndexByte(text, '\t'); i >= 0 {
				col = utf8.RuneCountInString(text[:i]) + 1
			}
		} else {
			col = len(text) - len(strings.TrimLeft(text, " ")) + 1
		}
	}
	return Pos{File: file, Line: line, Col: col}
}

func yamlErrorMessage(file string, data []byte, err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		msg = m[2]
		line, _ := strconv.Atoi(m[1])
		if text, ok := lineText(data, line); ok && strings.Contains(msg, "cannot start any token") && strings.Contains(text, "\t") {
			return "tab character: YAML indentation must use spaces"
		}
		if _, _, ok := indentTab(data, line); ok && strings.Contains(msg, "tab character") {
			return "tab character: YAML indentation must use spaces"
		}
	}
	return "invalid YAML: " + msg
}

func lineText(data []byte, line int) (string, bool) {
	lines := bytes.Split(data, []byte("\n"))
	if line < 1 || line > len(lines) {
		return "", false
	}
	return string(lines[line-1]), true
}

// indentTab finds the first tab in the indentation of a line at or after
// line (yaml.v3 reports a tab that breaks indentation at the line before
// it): its line and column.
func indentTab(data []byte, line int) (int, int, bool) {
	lines := bytes.Split(data, []byte("\n"))
	for l := max(line, 1); l <= len(lines) && l <= line+3; l++ {
		text := lines[l-1]
		for i, c := range text {
			if c == '\t' {
				return l, i + 1, true
			}
			if c != ' ' {
				break
			}
		}
	}
	return 0, 0, false
}

// flowExpr finds an unquoted ${{ inside a flow collection ({…} or […]):
// YAML reads its braces as the collection's and fails, at a line that is
// not the value's. It returns the position of that ${{.
func flowExpr(file string, data []byte) (Pos, bool) {
	depth := 0
	var quote byte // the quote of the scalar we are in, inside flow
	blockIndent := -1
	for ln, raw := range strings.Split(string(data), "\n") {
		line := strings.TrimSuffix(raw, "\r")
		indent := len(line) - len(strings.TrimLeft(line, " "))
		if blockIndent >= 0 {
			if strings.TrimSpace(line) == "" || indent > blockIndent {
				continue // a block scalar's text
			}
			blockIndent = -1
		}
		var prev byte // the last non-blank character before i on this line
		for i := 0; i < len(line); i++ {
			c := line[i]
			switch {
			case quote == '"':
				if c == '\\' {
					i++
				} else if c == '"' {
					quote = 0
				}
				continue
			case quote == '\'':
				if c == '\'' {
					if i+1 < len(line) && line[i+1] == '\'' {
						i++
					} else {
						quote = 0
					}
				}
				continue
			}
			// Where a value may begin: a quote opens a quoted scalar and
			// a brace a flow collection there, not inside a plain scalar.
			valueStart := prev == 0 || prev == ':' || prev == '-' || depth > 0 && (prev == ',' || prev == '{' || prev == '[')
			switch {
			case c == ' ' || c == '\t':
				continue
			case c == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
				i = len(line)
				continue
			case (c == '"' || c == '\'') && valueStart:
				quote = c
			case strings.HasPrefix(line[i:], "${{"):
				if depth > 0 {
					return Pos{File: file, Line: ln + 1, Col: utf8.RuneCountInString(line[:i]) + 1}, true
				}
				if j := strings.Index(line[i:], "}}"); j >= 0 {
					i += j + 1
				}
			case (c == '{' || c == '[') && valueStart:
				depth++
			case (c == '}' || c == ']') && depth > 0:
				depth--
			}
			prev = line[i]
		}
		if depth == 0 && quote == 0 {
			t := strings.TrimRight(line, " \t")
			t = strings.TrimRight(t, "+-0123456789")
			if strings.HasSuffix(t, "|") || strings.HasSuffix(t, ">") {
				blockIndent = indent
			}
		}
	}
	return Pos{}, false
}

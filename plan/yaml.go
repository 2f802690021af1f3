package plan

import "gopkg.in/yaml.v3"

// Node converts the value back into a YAML node, for showing resolved
// values in their original shape.
func (v *Value) Node() *yaml.Node {
	switch v.Kind {
	case Null:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
	case List:
		n := &yaml.Node{Kind: yaml.SequenceNode}
		for _, it := range v.Items {
			n.Content = append(n.Content, it.Node())
		}
		return n
	case Map:
		n := &yaml.Node{Kind: yaml.MappingNode}
		for _, f := range v.Fields {
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: f.Key}, f.Value.Node())
		}
		return n
	}
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: v.Tag, Value: v.Text}
	if v.Tag == "!!str" && len(v.Text) > 0 && v.Text[len(v.Text)-1] == '\n' {
		n.Style = yaml.LiteralStyle
	}
	return n
}

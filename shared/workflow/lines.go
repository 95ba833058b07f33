package workflow

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// lineMap is where each field of a parsed file is: its key's line by path
// ("steps[1]", "steps[1].timeout", "agents.payment.auth"), and the path of
// the value at each line and column.
type lineMap struct {
	keys   map[string]int
	values map[[2]int]string
}

// fieldLines maps every field of a YAML (or JSON) document to its line.
func fieldLines(root *yaml.Node) lineMap {
	m := lineMap{keys: map[string]int{}, values: map[[2]int]string{}}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		m.values[[2]int{n.Line, n.Column}] = path
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := join(path, n.Content[i].Value)
				m.keys[k] = n.Content[i].Line
				walk(n.Content[i+1], k)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				k := fmt.Sprintf("%s[%d]", path, i)
				m.keys[k] = c.Line
				walk(c, k)
			}
		}
	}
	walk(root, "")
	return m
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// of is the line of path, or of its nearest written parent (a field left out
// is reported where its step is); 0 if none.
func (m lineMap) of(path string) int {
	for p := path; p != ""; {
		if l, ok := m.keys[p]; ok {
			return l
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return 0
}

// value is the path of the value written at line and column, or "".
func (m lineMap) value(line, column int) string { return m.values[[2]int{line, column}] }

// key is the path of the field named key written on line, or "".
func (m lineMap) key(line int, key string) string {
	for p, l := range m.keys {
		if l == line && (p == key || strings.HasSuffix(p, "."+key)) {
			return p
		}
	}
	return ""
}

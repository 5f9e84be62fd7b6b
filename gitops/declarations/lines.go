package declarations

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// fieldInError finds the field path a decoding error names: quoted in
// strict errors (`unknown field "spec.replicas"`), after the Go type in
// type errors (`Go struct field WarmPoolSpec.spec.replicas of type int32`).
var fieldInError = regexp.MustCompile(`field "([^"]+)"|Go struct field [A-Za-z0-9]+\.(\S+) of type`)

// withLine appends the line of the field a strict decoding error names:
// the JSON decoder works on YAML converted to JSON, which has no lines, so
// the field is looked up again in the YAML document.
func withLine(doc []byte, firstLine int, msg string) string {
	m := fieldInError.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	var root yamlv3.Node
	if err := yamlv3.Unmarshal(doc, &root); err != nil || len(root.Content) == 0 {
		return msg
	}
	path := m[1] + m[2]
	if line := lineOf(root.Content[0], path); line > 0 {
		return fmt.Sprintf("line %d: %s", firstLine+line-1, msg)
	}
	return msg
}

// lineOf walks path (a.b[2].c) through the node tree and returns the line
// of its last key, 0 when the path is not there.
func lineOf(n *yamlv3.Node, path string) int {
	line := 0
	for _, part := range strings.Split(path, ".") {
		name, indexes := part, []int(nil)
		for {
			open := strings.LastIndex(name, "[")
			if open < 0 || !strings.HasSuffix(name, "]") {
				break
			}
			i, err := strconv.Atoi(name[open+1 : len(name)-1])
			if err != nil {
				return 0
			}
			indexes = append([]int{i}, indexes...)
			name = name[:open]
		}
		if name != "" {
			if n.Kind != yamlv3.MappingNode {
				return 0
			}
			found := false
			// A duplicate key reports the later occurrence, so the last
			// match wins.
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == name {
					line, n, found = n.Content[i].Line, n.Content[i+1], true
				}
			}
			if !found {
				return 0
			}
		}
		for _, i := range indexes {
			if n.Kind != yamlv3.SequenceNode || i >= len(n.Content) {
				return 0
			}
			n = n.Content[i]
			line = n.Line
		}
	}
	return line
}

// failingField finds the deepest field of the document m whose value alone
// fails to decode into kind gvk, as a path (spec.ttl), or "" when none
// does on its own. at is the path of m in the document.
func failingField(gvk schema.GroupVersionKind, m map[string]any, at []string) string {
	for _, key := range slices.Sorted(maps.Keys(m)) {
		path := append(slices.Clone(at), key)
		if decodes(gvk, nest(path, m[key])) {
			continue
		}
		if inner, ok := m[key].(map[string]any); ok {
			if deeper := failingField(gvk, inner, path); deeper != "" {
				return deeper
			}
		}
		return strings.Join(path, ".")
	}
	return ""
}

// nest wraps value in maps along path: nest([a b], v) is {a: {b: v}}.
func nest(path []string, value any) map[string]any {
	for i := len(path) - 1; i > 0; i-- {
		value = map[string]any{path[i]: value}
	}
	return map[string]any{path[0]: value}
}

// decodes reports whether the fields of m decode into kind gvk.
func decodes(gvk schema.GroupVersionKind, m map[string]any) bool {
	js, err := json.Marshal(m)
	if err != nil {
		return false
	}
	typed, err := scheme.New(gvk)
	if err != nil {
		return false
	}
	return json.Unmarshal(js, typed) == nil
}

package applier

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/declarations"
)

// Change is what applying one declaration would do to the cluster.
type Change struct {
	Declaration declarations.Declaration
	// Action is ssa.CreatedAction, ssa.ConfiguredAction or
	// ssa.UnchangedAction.
	Action ssa.Action
	// Fields lists the changed fields of a configured object as
	// `path: live → applied`.
	Fields []string
}

// Diff dry-runs every declaration and reports what an apply would create
// or change, field by field, without writing anything.
func (a *Applier) Diff(ctx context.Context, decls []declarations.Declaration) ([]Change, error) {
	out := make([]Change, 0, len(decls))
	for _, d := range decls {
		entry, live, merged, err := a.rm.Diff(ctx, d.Object.DeepCopy(), ssa.DefaultDiffOptions())
		if err != nil {
			return nil, fmt.Errorf("%s: %s %q: %w", d.Where(), d.Object.GetKind(), d.Object.GetName(), err)
		}
		c := Change{Declaration: d, Action: entry.Action}
		if entry.Action == ssa.ConfiguredAction {
			c.Fields = fieldChanges(live, merged)
		}
		out = append(out, c)
	}
	return out, nil
}

// fieldChanges compares the parts of two objects a declaration sets:
// labels, annotations and spec.
func fieldChanges(live, merged *unstructured.Unstructured) []string {
	before, after := map[string]string{}, map[string]string{}
	for _, part := range [][]string{{"metadata", "labels"}, {"metadata", "annotations"}, {"spec"}} {
		if v, ok, _ := unstructured.NestedFieldNoCopy(live.Object, part...); ok {
			flatten(strings.Join(part, "."), v, before)
		}
		if v, ok, _ := unstructured.NestedFieldNoCopy(merged.Object, part...); ok {
			flatten(strings.Join(part, "."), v, after)
		}
	}
	var paths []string
	for p := range before {
		paths = append(paths, p)
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	var out []string
	for _, p := range paths {
		b, inBefore := before[p]
		a, inAfter := after[p]
		switch {
		case !inBefore:
			out = append(out, fmt.Sprintf("%s: (unset) → %s", p, a))
		case !inAfter:
			out = append(out, fmt.Sprintf("%s: %s → (unset)", p, b))
		case a != b:
			out = append(out, fmt.Sprintf("%s: %s → %s", p, b, a))
		}
	}
	return out
}

// flatten writes the leaves of v below path as JSON values.
func flatten(path string, v any, out map[string]string) {
	switch t := v.(type) {
	case map[string]any:
		for k, child := range t {
			flatten(path+"."+k, child, out)
		}
	case []any:
		for i, child := range t {
			flatten(fmt.Sprintf("%s[%d]", path, i), child, out)
		}
	default:
		js, _ := json.Marshal(t)
		out[path] = string(js)
	}
}

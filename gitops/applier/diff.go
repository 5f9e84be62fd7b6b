package applier

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	ssautils "github.com/fluxcd/pkg/ssa/utils"
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
	// `path: live → applied`, when Validate was asked for detail.
	Fields []string
	// Generation is the object's metadata.generation: the live one for an
	// unchanged object, the one the apply answered with once applied.
	Generation int64
}

func (c Change) entry() ssa.ChangeSetEntry {
	obj := c.Declaration.Object
	return ssa.ChangeSetEntry{
		ObjMetadata:  object.UnstructuredToObjMetadata(obj),
		GroupVersion: obj.GroupVersionKind().Version,
		Subject:      ssautils.FmtUnstructured(obj),
		Action:       c.Action,
	}
}

// decide compares the live object (nil when the listing did not have it)
// with merged, the dry run's result, as ssa does: labels, annotations and
// everything but metadata and status.
func decide(d declarations.Declaration, live *LiveObject, merged *unstructured.Unstructured) Change {
	c := Change{Declaration: d, Action: ssa.ConfiguredAction}
	switch {
	case merged.GetResourceVersion() == "":
		c.Action = ssa.CreatedAction
	case live == nil:
		// Created since the listing: applying again is harmless.
	case !drifted(live, merged):
		c.Action, c.Generation = ssa.UnchangedAction, live.Generation
	case live.full != nil:
		c.Fields = fieldChanges(live.full, merged)
	}
	return c
}

// drifted is ssa's drift test: labels, annotations, or anything outside
// metadata and status differ.
func drifted(live *LiveObject, merged *unstructured.Unstructured) bool {
	return live.content != contentDigest(merged)
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

package applier

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"slices"
	"strings"

	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	ssautils "github.com/fluxcd/pkg/ssa/utils"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

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
	// ResourceVersion is the one the apply answered with.
	ResourceVersion string
	// Adopted: the object exists without the ownership label the
	// declaration carries (created with kubectl, say, or applied by another
	// GitSync), and applying takes it over.
	Adopted bool
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

// liveContent is what Validate compares a dry run's result with.
type liveContent struct {
	generation int64
	// digest covers the labels, the annotations and everything outside
	// metadata and status: ssa's drift test.
	digest [sha256.Size]byte
	// full is the object without managed fields, kept only when asked
	// for, to show field changes.
	full *unstructured.Unstructured
	// owner is its GitSync ownership label.
	owner string
}

// listContents lists the declared objects whole, as JSON: only the
// labelled ones (see ListLive) unless detail, which keeps each object to
// show its field changes, and so shows them for an object not labelled
// yet too.
func (a *Applier) listContents(ctx context.Context, decls []declarations.Declaration, detail bool) (map[ObjectKey]*liveContent, error) {
	out := map[ObjectKey]*liveContent{}
	err := listPages(ctx, a.client, decls, listOptions(decls, !detail), true, unstructuredList,
		func(gvk schema.GroupVersionKind, list *unstructured.UnstructuredList) {
			for i := range list.Items {
				out[ObjectKey{gvk, list.Items[i].GetName()}] = newLiveContent(&list.Items[i], detail)
			}
		})
	return out, err
}

func newLiveContent(obj *unstructured.Unstructured, full bool) *liveContent {
	c := &liveContent{generation: obj.GetGeneration(), digest: contentDigest(obj), owner: obj.GetLabels()[v1.LabelGitSync]}
	if full {
		obj.SetManagedFields(nil)
		c.full = obj
	}
	return c
}

// decide compares the live object (nil when the listing did not have it)
// with merged, the dry run's result, as ssa does: labels, annotations and
// everything but metadata and status.
func decide(d declarations.Declaration, live *liveContent, merged *unstructured.Unstructured) Change {
	c := Change{Declaration: d, Action: ssa.ConfiguredAction}
	if owner := d.Object.GetLabels()[v1.LabelGitSync]; owner != "" && merged.GetResourceVersion() != "" {
		// The listing had only owner's objects (or had it not labelled).
		c.Adopted = live == nil || live.owner != owner
	}
	switch {
	case merged.GetResourceVersion() == "":
		c.Action = ssa.CreatedAction
	case live == nil:
		// Not labelled yet, or created since the listing: applied.
	case live.digest == contentDigest(merged):
		c.Action, c.Generation = ssa.UnchangedAction, live.generation
	case live.full != nil:
		c.Fields = fieldChanges(live.full, merged)
	}
	return c
}

// contentDigest hashes the labels, the annotations (none and empty alike)
// and everything outside metadata and status. JSON sorts map keys, so
// equal content hashes equally; both sides of a comparison are decoded by
// the same client, so numbers have the same types.
func contentDigest(obj *unstructured.Unstructured) [sha256.Size]byte {
	rest := make(map[string]any, len(obj.Object)+2)
	for k, v := range obj.Object {
		if k != "metadata" && k != "status" {
			rest[k] = v
		}
	}
	// Keys with a dot: no top-level field of an object has one.
	if labels := obj.GetLabels(); len(labels) > 0 {
		rest["metadata.labels"] = labels
	}
	if annotations := obj.GetAnnotations(); len(annotations) > 0 {
		rest["metadata.annotations"] = annotations
	}
	b, _ := json.Marshal(rest) // maps of JSON values always marshal
	return sha256.Sum256(b)
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

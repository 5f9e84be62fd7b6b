// Package apply writes the objects the controllers derive from declarations,
// with server-side apply under one field manager, so a controller states the
// whole desired object and the API server keeps the fields others own.
package apply

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// FieldManager owns every field the reconciler writes.
const FieldManager = "agentsandbox-reconciler"

// Object server-side applies obj, a typed object holding exactly the fields
// the controller means to own: a field it leaves out is released, not kept.
func Object(ctx context.Context, c client.Client, obj client.Object) error {
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		return err
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	// Zero values a typed struct cannot omit would otherwise be applied as
	// owned fields.
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("failed to apply %s %s: %w", gvk.Kind, client.ObjectKeyFromObject(obj), err)
	}
	return nil
}

// IfChanged applies obj only when the cached object differs from it: every
// field obj sets must already hold the same value. Level-based controllers
// run often; a write for each pass would cost API capacity (and sandbox
// claim latency) for nothing. It reports whether it wrote.
func IfChanged(ctx context.Context, c client.Client, obj client.Object) (bool, error) {
	current, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return false, fmt.Errorf("%T is not a client.Object", obj)
	}
	err := c.Get(ctx, client.ObjectKeyFromObject(obj), current)
	if client.IgnoreNotFound(err) != nil {
		return false, err
	}
	if err == nil {
		want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return false, err
		}
		have, err := runtime.DefaultUnstructuredConverter.ToUnstructured(current)
		if err != nil {
			return false, err
		}
		delete(want, "status")
		unstructured.RemoveNestedField(want, "metadata", "creationTimestamp")
		if Contains(have, want) {
			return false, nil
		}
	}
	return true, Object(ctx, c, obj)
}

// Contains reports whether every value set in want is set to the same value
// in have. Lists must match element by element; fields have sets that want
// leaves out (server defaults, other managers' fields) do not matter.
func Contains(have, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return len(w) == 0 && have == nil
		}
		for k, wv := range w {
			if !Contains(h[k], wv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return len(w) == 0 && have == nil
		}
		for i := range w {
			if !Contains(h[i], w[i]) {
				return false
			}
		}
		return true
	case nil:
		return true
	default:
		return fmt.Sprint(have) == fmt.Sprint(want)
	}
}

package applier

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/declarations"
)

// WaitHealthy polls the declared objects every interval until each has
// converged, and returns an error naming the objects still waiting when ctx
// ends. An object that failed (Stalled) ends the wait at once: waiting
// longer cannot help.
//
// Converged is kstatus's Current (the controller observed the generation
// and reports Ready, or reports nothing), and for a warm pool also
// readyReplicas == replicas, which kstatus cannot know. An object whose
// controller has not written any status yet counts as converged, as in
// kstatus.
//
// A non-nil live is used for the first pass instead of a new listing: a
// sync that wrote nothing has just listed the objects.
func (a *Applier) WaitHealthy(ctx context.Context, decls []declarations.Declaration, live Live, interval time.Duration) error {
	pending := slices.Clone(decls)
	for {
		// One list per kind a pass, not one read per object: a sync of
		// thousands of objects checks them in a few requests.
		var err error
		if live == nil {
			live, err = a.ListLive(ctx, pending)
		}
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("not healthy in time: %s", strings.Join(unchecked(pending), "; "))
			}
			return err
		}
		var waiting []string
		next := pending[:0]
		for _, d := range pending {
			obj, found := live[KeyOf(d)]
			if !found {
				return fmt.Errorf("%s: %s %q is not on the cluster", d.Where(), d.Object.GetKind(), d.Object.GetName())
			}
			ok, failed, why := health(obj)
			if failed {
				return fmt.Errorf("%s: %s %q failed: %s", d.Where(), d.Object.GetKind(), d.Object.GetName(), why)
			}
			if !ok {
				next = append(next, d)
				waiting = append(waiting, fmt.Sprintf("%s %q: %s", d.Object.GetKind(), d.Object.GetName(), why))
			}
		}
		pending, live = next, nil
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not healthy in time: %s", strings.Join(waiting, "; "))
		case <-time.After(interval):
		}
	}
}

// ObjectKey names a live object.
type ObjectKey struct {
	GVK  schema.GroupVersionKind
	Name string
}

// KeyOf is the key of the object a declaration declares.
func KeyOf(d declarations.Declaration) ObjectKey {
	return ObjectKey{d.Object.GroupVersionKind(), d.Object.GetName()}
}

// Live are live objects by key, as ListLive returns them.
type Live map[ObjectKey]*unstructured.Unstructured

// listPage is how many objects one list request returns: a sync of
// thousands of objects never holds more than one page of raw response.
const listPage = 500

// ListLive lists every kind the declarations use, straight from the API
// server (the client does not cache unstructured objects), so what it
// returns includes changes made a moment ago. Each object is trimmed to
// what a sync compares and checks (see compact): a listing of ten
// thousand objects would otherwise keep their managed fields, the larger
// part of each, several times over.
func (a *Applier) ListLive(ctx context.Context, decls []declarations.Declaration) (Live, error) {
	kinds := map[schema.GroupVersionKind]bool{}
	for _, d := range decls {
		kinds[d.Object.GroupVersionKind()] = true
	}
	out := Live{}
	for gvk := range kinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		for {
			if err := a.client.List(ctx, list, client.Limit(listPage), client.Continue(list.GetContinue())); err != nil {
				return nil, fmt.Errorf("failed to list %s: %w", gvk.Kind, err)
			}
			for i := range list.Items {
				obj := compact(&list.Items[i])
				out[ObjectKey{gvk, obj.GetName()}] = obj
			}
			if list.GetContinue() == "" {
				break
			}
			list.Items = nil
		}
	}
	return out, nil
}

// compact keeps of a live object what a sync reads: its name, generation,
// labels, annotations and deletion timestamp (drift, the skip of
// untouched objects, kstatus), and everything outside metadata (spec for
// drift, status for health). Managed fields, the bulk of a small object,
// and the rest of metadata are dropped.
func compact(obj *unstructured.Unstructured) *unstructured.Unstructured {
	meta := map[string]any{"name": obj.GetName()}
	old, _ := obj.Object["metadata"].(map[string]any)
	for _, k := range []string{"generation", "labels", "annotations", "deletionTimestamp"} {
		if v, ok := old[k]; ok {
			meta[k] = v
		}
	}
	out := make(map[string]any, len(obj.Object))
	for k, v := range obj.Object {
		out[k] = v
	}
	out["metadata"] = meta
	return &unstructured.Unstructured{Object: out}
}

// unchecked names the objects a wait ended before looking at.
func unchecked(decls []declarations.Declaration) []string {
	out := make([]string, len(decls))
	for i, d := range decls {
		out[i] = fmt.Sprintf("%s %q: not checked yet", d.Object.GetKind(), d.Object.GetName())
	}
	return out
}

// health says whether a live object has converged, or failed, and why not.
func health(live *unstructured.Unstructured) (ok, failed bool, why string) {
	res, err := kstatus.Compute(live)
	if err != nil {
		return false, false, err.Error()
	}
	switch res.Status {
	case kstatus.FailedStatus:
		return false, true, res.Message
	case kstatus.CurrentStatus:
	default:
		return false, false, res.Message
	}
	if live.GetKind() == "WarmPool" {
		replicas, found, _ := unstructured.NestedInt64(live.Object, "spec", "replicas")
		if !found {
			replicas = 1 // the CRD default
		}
		ready, _, _ := unstructured.NestedInt64(live.Object, "status", "readyReplicas")
		if ready != replicas {
			return false, false, fmt.Sprintf("%d of %d replicas ready", ready, replicas)
		}
	}
	return true, false, ""
}

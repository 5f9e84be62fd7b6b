package applier

import (
	"context"
	"crypto/sha256"
	"encoding/json"
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
	var states map[ObjectKey]healthState
	if live != nil {
		states = make(map[ObjectKey]healthState, len(live))
		for k, obj := range live {
			states[k] = obj.healthState
		}
	}
	for {
		// One list per kind a pass, not one read per object: a sync of
		// thousands of objects checks them in a few requests.
		var err error
		if states == nil {
			states, err = a.listHealth(ctx, pending)
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
			state, found := states[KeyOf(d)]
			if !found {
				return fmt.Errorf("%s: %s %q is not on the cluster", d.Where(), d.Object.GetKind(), d.Object.GetName())
			}
			if state.failed {
				return fmt.Errorf("%s: %s %q failed: %s", d.Where(), d.Object.GetKind(), d.Object.GetName(), state.why)
			}
			if !state.healthy {
				next = append(next, d)
				waiting = append(waiting, fmt.Sprintf("%s %q: %s", d.Object.GetKind(), d.Object.GetName(), state.why))
			}
		}
		pending, states = next, nil
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

// listHealth lists the health of the declared objects and nothing else:
// the wait after a sync of thousands of objects holds a few bytes of each,
// not what ListLive keeps to compare them.
func (a *Applier) listHealth(ctx context.Context, decls []declarations.Declaration) (map[ObjectKey]healthState, error) {
	out := map[ObjectKey]healthState{}
	err := a.eachLive(ctx, decls, true, func(key ObjectKey, obj *unstructured.Unstructured) {
		out[key] = health(obj)
	})
	return out, err
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
type Live map[ObjectKey]*LiveObject

// LiveObject is what a sync needs of a live object, and no more: a
// listing of ten thousand objects would otherwise hold their specs, as
// defaulted by the API server, statuses and managed fields, or at least a
// map of labels each.
type LiveObject struct {
	Generation int64
	// KeepsDeclaredMetadata is whether the object has every label and
	// annotation its declaration sets, with the declared value: a sync
	// that skips unchanged objects must still put back one removed by
	// hand.
	KeepsDeclaredMetadata bool
	// content is a digest of the labels, the annotations and everything
	// outside metadata and status: ssa's drift test.
	content [sha256.Size]byte
	healthState
	// full is the object without managed fields, kept only when asked
	// for, to show field changes.
	full *unstructured.Unstructured
}

// listPage is how many objects one list request returns: a sync of
// thousands of objects never holds more than one page of raw response.
// A page of 100 peaked 8 MiB lower but made the no-op resync of 10,000
// objects 0.5 s slower, 100 lists instead of 20 (make bench-gitops, one
// run each).
const listPage = 500

// ListLive lists every kind the declarations use, straight from the API
// server (the client does not cache unstructured objects), so what it
// returns includes changes made a moment ago. When the declarations carry
// a GitSync's ownership label (SetOwner), only objects with that label
// are listed: a GitSync of a few objects does not read the thousands
// another one applied. A declared object without the label yet is then
// missing from the result, which callers treat as "to be applied". full
// keeps each object (without managed fields) for Change.Fields, and lists
// every object of the kinds, so that an object not labelled yet shows its
// field changes too.
func (a *Applier) ListLive(ctx context.Context, decls []declarations.Declaration, full bool) (Live, error) {
	declared := make(map[ObjectKey]*unstructured.Unstructured, len(decls))
	for _, d := range decls {
		declared[KeyOf(d)] = d.Object
	}
	out := Live{}
	err := a.eachLive(ctx, decls, !full, func(key ObjectKey, obj *unstructured.Unstructured) {
		out[key] = newLiveObject(obj, declared[key], full)
	})
	return out, err
}

// eachLive lists every kind the declarations use, a page at a time, only
// the objects with the declarations' common ownership label when labelled,
// and calls keep with each object; the object is not used afterwards.
func (a *Applier) eachLive(ctx context.Context, decls []declarations.Declaration, labelled bool, keep func(ObjectKey, *unstructured.Unstructured)) error {
	// Each kind with the first declaration of it, which a failed list
	// names: "forbidden" alone does not say which file asked for it.
	kinds := map[schema.GroupVersionKind]declarations.Declaration{}
	for _, d := range decls {
		if _, seen := kinds[d.Object.GroupVersionKind()]; !seen {
			kinds[d.Object.GroupVersionKind()] = d
		}
	}
	opts := []client.ListOption{client.Limit(listPage)}
	if owner, ok := commonOwner(decls); ok && labelled {
		opts = append(opts, client.MatchingLabels{LabelGitSync: owner})
	}
	for gvk, first := range kinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		for {
			if err := a.client.List(ctx, list, append(opts, client.Continue(list.GetContinue()))...); err != nil {
				return fmt.Errorf("%s: failed to list %s: %w", first.Where(), gvk.Kind, err)
			}
			for i := range list.Items {
				keep(ObjectKey{gvk, list.Items[i].GetName()}, &list.Items[i])
			}
			if list.GetContinue() == "" {
				break
			}
			list.Items = nil
		}
	}
	return nil
}

// commonOwner is the ownership label every declaration carries, if they
// all carry the same.
func commonOwner(decls []declarations.Declaration) (string, bool) {
	if len(decls) == 0 {
		return "", false
	}
	owner, ok := decls[0].Object.GetLabels()[LabelGitSync]
	for _, d := range decls[1:] {
		if !ok || d.Object.GetLabels()[LabelGitSync] != owner {
			return "", false
		}
	}
	return owner, ok
}

// newLiveObject keeps what a sync needs of obj, declared as decl (nil
// when not declared); with full, obj itself too, without its managed
// fields.
func newLiveObject(obj, decl *unstructured.Unstructured, full bool) *LiveObject {
	l := &LiveObject{Generation: obj.GetGeneration(), content: contentDigest(obj), healthState: health(obj)}
	if decl != nil {
		l.KeepsDeclaredMetadata = hasAll(obj, decl, "labels") && hasAll(obj, decl, "annotations")
	}
	if full {
		obj.SetManagedFields(nil)
		l.full = obj
	}
	return l
}

// hasAll reports whether metadata.<field> of obj holds every key of decl's
// with the same value.
func hasAll(obj, decl *unstructured.Unstructured, field string) bool {
	want, _, _ := unstructured.NestedFieldNoCopy(decl.Object, "metadata", field)
	have, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "metadata", field)
	wantMap, _ := want.(map[string]any)
	haveMap, _ := have.(map[string]any)
	for k, v := range wantMap {
		want, _ := v.(string)
		if got, ok := haveMap[k].(string); !ok || got != want {
			return false
		}
	}
	return true
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

// unchecked names the objects a wait ended before looking at.
func unchecked(decls []declarations.Declaration) []string {
	out := make([]string, len(decls))
	for i, d := range decls {
		out[i] = fmt.Sprintf("%s %q: not checked yet", d.Object.GetKind(), d.Object.GetName())
	}
	return out
}

// healthState is whether a live object has converged, or failed, and why
// not.
type healthState struct {
	healthy, failed bool
	why             string
}

// health judges a live object: kstatus's Current, and for a warm pool
// readyReplicas == replicas too.
func health(live *unstructured.Unstructured) healthState {
	res, err := kstatus.Compute(live)
	if err != nil {
		return healthState{why: err.Error()}
	}
	switch res.Status {
	case kstatus.FailedStatus:
		return healthState{failed: true, why: res.Message}
	case kstatus.CurrentStatus:
	default:
		return healthState{why: res.Message}
	}
	if live.GetKind() == "WarmPool" {
		replicas, found, _ := unstructured.NestedInt64(live.Object, "spec", "replicas")
		if !found {
			replicas = 1 // the CRD default
		}
		ready, _, _ := unstructured.NestedInt64(live.Object, "status", "readyReplicas")
		if ready != replicas {
			return healthState{why: fmt.Sprintf("%d of %d replicas ready", ready, replicas)}
		}
	}
	return healthState{healthy: true}
}

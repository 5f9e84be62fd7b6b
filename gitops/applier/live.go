package applier

import (
	"context"
	"fmt"
	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/declarations"
)

// ObjectKey names a live object.
type ObjectKey struct {
	GVK  schema.GroupVersionKind
	Name string
}

// KeyOf is the key of the object a declaration declares.
func KeyOf(d declarations.Declaration) ObjectKey {
	return ObjectKey{d.Object.GroupVersionKind(), d.Object.GetName()}
}

// Live are live objects by key, as ListLive returns them and Record
// updates them.
type Live map[ObjectKey]*LiveObject

// LiveObject is what a sync needs of a live object before it validates
// anything, and no more: which version it is, whether anyone changed its
// spec, and whether it still has its declared metadata.
type LiveObject struct {
	ResourceVersion string
	Generation      int64
	// KeepsDeclaredMetadata is whether the object has every label and
	// annotation its declaration sets, with the declared value: a sync
	// that skips unchanged objects must still put back one removed by
	// hand.
	KeepsDeclaredMetadata bool
}

// Record notes the version Apply answered with for each object it created
// or changed: the newest version of each, which WaitHealthy waits to see.
func (l Live) Record(changes []Change) {
	for _, c := range changes {
		if c.ResourceVersion != "" {
			l[KeyOf(c.Declaration)] = &LiveObject{ResourceVersion: c.ResourceVersion, Generation: c.Generation, KeepsDeclaredMetadata: true}
		}
	}
}

// listPage is how many objects one list request returns: a sync of
// thousands of objects never holds more than one page of raw response.
// A page of 100 saved little memory and made the no-op resync of 10,000
// objects slower, with five times the lists (make bench-gitops).
const listPage = 500

// ListLive lists the metadata of the declared objects straight from the
// API server (the applier's client reads no cache), so what it returns
// includes changes made a moment ago: a sync decides on it what to
// validate. Metadata alone come as protobuf, without spec, status or
// JSON: a list of 10,000 templates takes a fraction of the time the whole
// objects take as JSON (bench/README.md, GitSync). When the
// declarations carry a GitSync's ownership label (SetOwner), only objects
// with that label are listed: a GitSync of a few objects does not read
// the thousands another one applied. A declared object without the label
// yet is then missing from the result, which callers treat as "to be
// applied".
func (a *Applier) ListLive(ctx context.Context, decls []declarations.Declaration) (Live, error) {
	declared := make(map[ObjectKey]*unstructured.Unstructured, len(decls))
	for _, d := range decls {
		declared[KeyOf(d)] = d.Object
	}
	out := Live{}
	err := listPages(ctx, a.client, decls, listOptions(decls, true), true, metadataList,
		func(gvk schema.GroupVersionKind, list *metav1.PartialObjectMetadataList) {
			for i := range list.Items {
				key := ObjectKey{gvk, list.Items[i].Name}
				out[key] = newLiveObject(&list.Items[i].ObjectMeta, declared[key])
			}
		})
	return out, err
}

// newLiveObject keeps what a sync needs of the live object with metadata
// meta, declared as decl (nil when not declared).
func newLiveObject(meta *metav1.ObjectMeta, decl *unstructured.Unstructured) *LiveObject {
	l := &LiveObject{ResourceVersion: meta.ResourceVersion, Generation: meta.Generation}
	if decl != nil {
		l.KeepsDeclaredMetadata = hasAll(meta.Labels, decl, "labels") && hasAll(meta.Annotations, decl, "annotations")
	}
	return l
}

// hasAll reports whether have holds every key of decl's metadata.<field>
// with the same value.
func hasAll(have map[string]string, decl *unstructured.Unstructured, field string) bool {
	want, _, _ := unstructured.NestedFieldNoCopy(decl.Object, "metadata", field)
	wantMap, _ := want.(map[string]any)
	for k, v := range wantMap {
		want, _ := v.(string)
		if got, ok := have[k]; !ok || got != want {
			return false
		}
	}
	return true
}

// listOptions select the declarations' objects: only those with their
// common ownership label when labelled and they all carry the same.
func listOptions(decls []declarations.Declaration, labelled bool) []client.ListOption {
	if owner, ok := commonOwner(decls); ok && labelled {
		return []client.ListOption{client.MatchingLabels{v1.LabelGitSync: owner}}
	}
	return nil
}

// commonOwner is the ownership label every declaration carries, if they
// all carry the same.
func commonOwner(decls []declarations.Declaration) (string, bool) {
	if len(decls) == 0 {
		return "", false
	}
	owner, ok := decls[0].Object.GetLabels()[v1.LabelGitSync]
	for _, d := range decls[1:] {
		if !ok || d.Object.GetLabels()[v1.LabelGitSync] != owner {
			return "", false
		}
	}
	return owner, ok
}

// listPages lists every kind the declarations use through r, into lists
// made by newList, a page at a time when paged (an informer cache cannot
// page), and calls keep with each list; the list is not used afterwards.
func listPages[L client.ObjectList](ctx context.Context, r client.Reader, decls []declarations.Declaration, opts []client.ListOption, paged bool,
	newList func(schema.GroupVersionKind) (L, error), keep func(schema.GroupVersionKind, L)) error {
	// Each kind with the first declaration of it, which a failed list
	// names: "forbidden" alone does not say which file asked for it.
	kinds := map[schema.GroupVersionKind]declarations.Declaration{}
	for _, d := range decls {
		if _, seen := kinds[d.Object.GroupVersionKind()]; !seen {
			kinds[d.Object.GroupVersionKind()] = d
		}
	}
	for gvk, first := range kinds {
		next := ""
		for {
			list, err := newList(gvk)
			if err != nil {
				return fmt.Errorf("%s: %w", first.Where(), err)
			}
			page := opts
			if paged {
				page = append(slices.Clip(opts), client.Limit(listPage), client.Continue(next))
			}
			if err := r.List(ctx, list, page...); err != nil {
				return fmt.Errorf("%s: failed to list %s: %w", first.Where(), gvk.Kind, err)
			}
			keep(gvk, list)
			if next = list.GetContinue(); !paged || next == "" {
				break
			}
		}
	}
	return nil
}

// metadataList is an empty list of the metadata of gvk's objects.
func metadataList(gvk schema.GroupVersionKind) (*metav1.PartialObjectMetadataList, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	return list, nil
}

// unstructuredList is an empty list of gvk's whole objects.
func unstructuredList(gvk schema.GroupVersionKind) (*unstructured.UnstructuredList, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	return list, nil
}

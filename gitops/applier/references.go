package applier

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/declarations"
)

// CheckReferences reports every reference of decls (v1alpha1.References)
// that names an object neither declared nor on the cluster, or one this
// sync is about to prune (an entry of pruned without the prune-disabled
// annotation). The API server accepts a dangling reference (the
// referencing object's controller reports it later), so the GitSync checks
// them itself: a revision that references what it does not declare, and
// the cluster does not have, is refused before anything is applied.
func (a *Applier) CheckReferences(ctx context.Context, decls []declarations.Declaration, pruned []v1.InventoryEntry) error {
	declared := map[string]bool{}
	for _, d := range decls {
		declared[declarations.ID(d.Object)] = true
	}
	goingAway := map[string]bool{}
	for _, e := range pruned {
		goingAway[e.ID] = true
	}
	var errs []error
	for _, d := range decls {
		for _, ref := range v1.References {
			if ref.From != d.Object.GetKind() {
				continue
			}
			name, found, _ := unstructured.NestedString(d.Object.Object, strings.Split(ref.Field, ".")...)
			if !found || name == "" {
				continue
			}
			target := &unstructured.Unstructured{}
			target.SetGroupVersionKind(v1.GroupVersion.WithKind(ref.To))
			target.SetName(name)
			id := declarations.ID(target)
			if declared[id] {
				continue
			}
			err := a.client.Get(ctx, client.ObjectKey{Name: name}, target)
			switch {
			case apierrors.IsNotFound(err):
				errs = append(errs, fmt.Errorf("%s: %s %q: %s: %s %q is neither declared nor on the cluster",
					d.Where(), d.Object.GetKind(), d.Object.GetName(), ref.Field, ref.To, name))
			case err != nil:
				return err
			case goingAway[id] && target.GetAnnotations()[v1.AnnotationPrune] != PruneDisabled:
				errs = append(errs, fmt.Errorf("%s: %s %q: %s: %s %q is no longer declared and would be pruned",
					d.Where(), d.Object.GetKind(), d.Object.GetName(), ref.Field, ref.To, name))
			}
		}
	}
	return errors.Join(errs...)
}

// Stale lists the entries of previous that current no longer has: what a
// prune deletes.
func Stale(previous, current []v1.InventoryEntry) []v1.InventoryEntry {
	keep := map[string]bool{}
	for _, e := range current {
		keep[e.ID] = true
	}
	var out []v1.InventoryEntry
	for _, e := range previous {
		if !keep[e.ID] {
			out = append(out, e)
		}
	}
	return out
}

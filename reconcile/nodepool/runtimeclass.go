package nodepool

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/apply"
)

// applyRuntimeClass server-side applies the pool's RuntimeClass. A
// RuntimeClass of that name that the pool does not control is someone
// else's (another tool, or a cluster's built-in gVisor class): it is left
// alone and described in the returned conflict instead.
func (r *Reconciler) applyRuntimeClass(ctx context.Context, pool *v1.NodePool) (conflict string, err error) {
	existing, err := r.getRuntimeClass(ctx, pool.Name)
	if err != nil {
		return "", err
	}
	if existing != nil && !metav1.IsControlledBy(existing, pool) {
		if ref := metav1.GetControllerOf(existing); ref != nil && ref.Kind == v1.KindNodePool && ref.Name == pool.Name {
			// A pool deleted and created again: the garbage collector
			// has yet to delete the old pool's RuntimeClass, and its
			// deletion event brings the pool back here.
			return "", fmt.Errorf("failed to apply RuntimeClass %s: it still belongs to a deleted NodePool of this name, waiting for its garbage collection", pool.Name)
		}
		return runtimeClassConflictMessage(existing), nil
	}
	if err := apply.Object(ctx, r.Client, desiredRuntimeClass(pool)); err != nil {
		return "", err
	}
	if existing == nil {
		r.recorder.Eventf(pool, nil, corev1.EventTypeNormal, "RuntimeClassCreated", "CreateRuntimeClass",
			"created RuntimeClass %s with handler %s", pool.Name, pool.Spec.RuntimeHandler)
	}
	return "", nil
}

// getRuntimeClass returns the RuntimeClass of that name, or nil. A miss in
// the cache is confirmed with the API server: the cache may not have seen a
// RuntimeClass created a moment ago, and applying over it would take over
// someone else's object.
func (r *Reconciler) getRuntimeClass(ctx context.Context, name string) (*nodev1.RuntimeClass, error) {
	rc := &nodev1.RuntimeClass{}
	err := r.Get(ctx, client.ObjectKey{Name: name}, rc)
	if apierrors.IsNotFound(err) {
		err = r.apiReader.Get(ctx, client.ObjectKey{Name: name}, rc)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("failed to get RuntimeClass %s: %w", name, err)
	}
	return rc, nil
}

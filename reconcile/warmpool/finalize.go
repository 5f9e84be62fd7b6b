package warmpool

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/statuspatch"
)

// membersGoing is how often a pool being deleted looks again while members
// are left, besides the events of their namespaces and bindings that bring
// it back sooner.
const membersGoing = 5 * time.Second

// finalize deletes the members of a pool being deleted that nobody took,
// and keeps the pool (its finalizer) until no namespace is labelled as its
// member any more: those it deleted are gone, and those Sandboxes claimed
// are relabelled as theirs, which the sandbox controller does once claims
// pause (or deleted, their claim abandoned: settleTaken). A client that
// deletes the pool in the foreground, as the provider does, so waits for
// its members as it did when they carried the pool's owner reference.
func (r *Reconciler) finalize(ctx context.Context, pool *v1.WarmPool) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(pool, v1.FinalizerWarmPool) {
		return ctrl.Result{}, nil
	}
	members, taken, err := environment.Members(ctx, r.Client, pool)
	if err != nil {
		return ctrl.Result{}, err
	}
	for _, m := range members {
		if _, err := r.takeAndDelete(ctx, m.Namespace); err != nil {
			return ctrl.Result{}, err
		}
	}
	if _, err := r.settleTaken(ctx, taken, time.Now()); err != nil {
		return ctrl.Result{}, err
	}
	left, err := environment.LabelledMembers(ctx, r.Client, pool.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	for _, ns := range left {
		if environment.MemberOf(ns, pool) {
			ctrl.LoggerFrom(ctx).V(1).Info("waiting for the pool's members to go", "member", ns.Name)
			return ctrl.Result{RequeueAfter: membersGoing}, nil
		}
	}
	r.memory.forget(pool.Name)
	return ctrl.Result{}, statuspatch.SetFinalizer(ctx, r.Client, pool, v1.FinalizerWarmPool, false)
}

// removeStrangers deletes the unclaimed members labelled for pool's name
// that pool did not build: an earlier pool's of that name, which is gone
// (names are unique), or, when pool is only the name of one that is gone
// (its UID empty), any pool's. A pool's finalizer deletes its members;
// these are what is left where it was removed by hand, or where a delete
// with propagationPolicy Orphan stripped the owner reference from members
// built before they carried their pool's UID. They would run on,
// unclaimable, for good. Members a pool still controls are left to
// garbage collection.
func (r *Reconciler) removeStrangers(ctx context.Context, pool *v1.WarmPool) error {
	left, err := environment.LabelledMembers(ctx, r.Client, pool.Name)
	if err != nil {
		return err
	}
	for _, ns := range left {
		if ns.DeletionTimestamp != nil || environment.MemberOf(ns, pool) || metav1.GetControllerOf(ns) != nil {
			continue
		}
		if _, err := r.takeAndDelete(ctx, ns); err != nil {
			return err
		}
	}
	return nil
}

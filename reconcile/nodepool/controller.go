// Package nodepool reconciles NodePools: each becomes a RuntimeClass of the
// same name, and the nodes its selector matches are labelled with the pool
// and carry its taints, so that only sandboxes of that runtime run there.
package nodepool

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fluxcd/pkg/runtime/conditions"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/statuspatch"
)

// controllerName names the controller in logs, metrics and as the reporting
// controller of its events, like the project's other controllers.
const controllerName = "nodepool-controller"

// Least privilege: every write is a patch (server-side apply for the
// RuntimeClass, merge patches for nodes and the pool), creating a
// RuntimeClass by apply needs create, and setting blockOwnerDeletion on the
// RuntimeClass's owner reference needs update on nodepools/finalizers.
//
// +kubebuilder:rbac:groups=agentsandbox.dev,resources=nodepools,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=agentsandbox.dev,resources=nodepools/status,verbs=patch
// +kubebuilder:rbac:groups=agentsandbox.dev,resources=nodepools/finalizers,verbs=update
// +kubebuilder:rbac:groups=node.k8s.io,resources=runtimeclasses,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler reconciles NodePools.
type Reconciler struct {
	client.Client
	// apiReader reads nodes uncached before writing them: their taints are
	// written whole, so they must be the latest.
	apiReader client.Reader
	recorder  events.EventRecorder
	status    *statuspatch.Writer
}

// NewReconciler returns a Reconciler that uses the manager's client, cache
// and event recorder.
func NewReconciler(mgr ctrl.Manager) *Reconciler {
	return &Reconciler{
		Client:    mgr.GetClient(),
		apiReader: mgr.GetAPIReader(),
		recorder:  mgr.GetEventRecorder(controllerName),
		status:    statuspatch.NewWriter(mgr.GetClient()),
	}
}

// SetupWithManager registers the controller. A pool is reconciled when its
// spec or annotations change (status writes would only wake it for
// nothing), when the RuntimeClass of its name changes (so a foreign one
// going away ends a conflict) and when a node it selects or holds changes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(controllerName).
		For(&v1.NodePool{}, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&nodev1.RuntimeClass{}, handler.EnqueueRequestsFromMapFunc(poolOfRuntimeClass)).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.poolsOfNode),
			builder.WithPredicates(nodeChangedPredicate())).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrentReconciles}).
		Complete(statuspatch.RequeueConflicts(r))
}

// concurrentReconciles is how many pools are reconciled at once. A new
// pool's first pass labels each node it selects with a read and a write,
// and its templates wait for the pool's RuntimeClass, which the status
// names at the end of that pass: one pass at a time kept ten new pools of
// a hundred nodes each waiting up to 86 s. Two pools that select the same
// node may now label it at once; the write is locked to the node's
// version, so one wins and the other reports the node as a conflict
// (reconcileNodes).
const concurrentReconciles = 4

// Reconcile converges one pool. The finalizer is in place before any node
// is touched. The status is written once, at the end, from what this run
// found; only a first sight of the pool or of a new generation is written
// earlier, so Reconciling shows while the work runs.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	pool := &v1.NodePool{}
	if err := r.Get(ctx, req.NamespacedName, pool); err != nil {
		if apierrors.IsNotFound(err) {
			r.status.Forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("failed to get NodePool %s: %w", req.Name, err)
	}
	if !pool.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, pool)
	}

	readyBefore := conditions.Get(pool, v1.ReadyCondition).DeepCopy()
	needsFinalizer, err := r.needsFinalizer(ctx, pool)
	if err != nil {
		return ctrl.Result{}, err
	}
	if needsFinalizer {
		if err := statuspatch.SetFinalizer(ctx, r.Client, pool, v1.FinalizerNodePool, true); err != nil {
			return ctrl.Result{}, err
		}
	}
	patcher := r.status.For(pool)
	if needsFinalizer || startsGeneration(pool) {
		conditions.MarkReconciling(pool, v1.ReasonProgressing, "reconciling generation %d", pool.Generation)
		if err := patcher.Patch(ctx, pool); err != nil {
			return ctrl.Result{}, err
		}
	}

	var o outcome
	defer func() {
		setStatus(pool, o)
		if err := patcher.Patch(ctx, pool); err != nil {
			retErr = errors.Join(retErr, err)
			return
		}
		r.recordReadyTransition(pool, readyBefore)
	}()
	o = r.reconcile(ctx, pool)
	return ctrl.Result{}, o.err
}

// needsFinalizer reports whether the finalizer must be added before this
// run touches a node: only a pool that selects (or already labelled) a node
// has anything to clean up, so a pool selecting no node is deleted at once.
func (r *Reconciler) needsFinalizer(ctx context.Context, pool *v1.NodePool) (bool, error) {
	if controllerutil.ContainsFinalizer(pool, v1.FinalizerNodePool) {
		return false, nil
	}
	nodes, err := r.listNodes(ctx)
	if err != nil {
		return false, err
	}
	for _, n := range nodes {
		if selects(pool, n.Labels) || n.Labels[v1.LabelNodePool] == pool.Name {
			return true, nil
		}
	}
	return false, nil
}

// reconcile applies the RuntimeClass, then the node membership. A foreign
// RuntimeClass stops it before any node is touched: tainting nodes for a
// runtime no pod can ask for would only keep other workloads off them.
func (r *Reconciler) reconcile(ctx context.Context, pool *v1.NodePool) outcome {
	conflict, err := r.applyRuntimeClass(ctx, pool)
	switch {
	case err != nil:
		return outcome{err: err}
	case conflict != "":
		return outcome{runtimeClassConflict: conflict}
	}
	nodes, err := r.reconcileNodes(ctx, pool)
	return outcome{runtimeClass: pool.Name, nodes: nodes, err: err}
}

// finalize releases the pool's nodes, then lets the pool go. The
// RuntimeClass is left to the garbage collector, which deletes it once the
// pool is gone.
func (r *Reconciler) finalize(ctx context.Context, pool *v1.NodePool) error {
	if !controllerutil.ContainsFinalizer(pool, v1.FinalizerNodePool) {
		return nil
	}
	if err := r.releaseNodes(ctx, pool); err != nil {
		return err
	}
	return statuspatch.SetFinalizer(ctx, r.Client, pool, v1.FinalizerNodePool, false)
}

// recordReadyTransition emits an event when Ready changed status in this
// run, and nothing otherwise.
func (r *Reconciler) recordReadyTransition(pool *v1.NodePool, before *metav1.Condition) {
	eventType, reason, message, ok := readyEvent(before, conditions.Get(pool, v1.ReadyCondition))
	if ok {
		r.recorder.Eventf(pool, nil, eventType, reason, "Reconcile", "%s", message)
	}
}

// poolOfRuntimeClass maps a RuntimeClass to the pool of its name, whether
// the pool controls it or is in conflict with it.
func poolOfRuntimeClass(_ context.Context, rc client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: rc.GetName()}}}
}

// poolsOfNode maps a node to the pools that select it, which may have to
// admit it, and to the pool whose label it carries, which may have to
// release it.
func (r *Reconciler) poolsOfNode(ctx context.Context, node client.Object) []reconcile.Request {
	pools := &v1.NodePoolList{}
	if err := r.List(ctx, pools); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "failed to list NodePools for a node event", "node", node.GetName())
		return nil
	}
	var reqs []reconcile.Request
	for i := range pools.Items {
		pool := &pools.Items[i]
		if pool.Name == node.GetLabels()[v1.LabelNodePool] || selects(pool, node.GetLabels()) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(pool)})
		}
	}
	return reqs
}

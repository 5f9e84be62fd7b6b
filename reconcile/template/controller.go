// Package template is the SandboxTemplate controller: it checks what the CRD
// schema cannot, resolves the node pool reference, and publishes a content
// hash warm pools roll their members on.
package template

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/index"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/problem"
)

// Reconciler reconciles SandboxTemplates.
type Reconciler struct {
	client.Client
	recorder recorder.EventRecorder
}

// NewReconciler returns a Reconciler using the manager's client.
func NewReconciler(mgr ctrl.Manager) *Reconciler {
	return &Reconciler{Client: mgr.GetClient(), recorder: mgr.GetEventRecorder("sandboxtemplate-controller")}
}

// SetupWithManager watches templates and the node pools they reference.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := index.Register(mgr); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.SandboxTemplate{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1.NodePool{}, handler.EnqueueRequestsFromMapFunc(r.templatesOfPool),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { return false }})).
		// A check is one status write; with one worker a GitSync of
		// 10,000 templates waited on them one round trip at a time.
		WithOptions(controller.Options{MaxConcurrentReconciles: 8}).
		Complete(r)
}

// +kubebuilder:rbac:groups=agentsandbox.dev,resources=sandboxtemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=agentsandbox.dev,resources=sandboxtemplates/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agentsandbox.dev,resources=nodepools,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile validates one template and records the verdict in its status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	tpl := &v1.SandboxTemplate{}
	if err := r.Get(ctx, req.NamespacedName, tpl); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := tpl.DeepCopy()
	wasReady := conditions.IsTrue(tpl, v1.ReadyCondition)
	defer func() {
		// One merge patch for the whole status, and none when nothing
		// changed. Only this controller writes a template's status, so
		// there is nothing to merge conditions with: Flux's patch helper
		// would write them in a second, conflict-checked patch, doubling
		// the writes of a GitSync of thousands of templates.
		tpl.Status.ObservedGeneration = tpl.Generation
		if equality.Semantic.DeepEqual(before.Status, tpl.Status) {
			return
		}
		// An object deleted meanwhile has no status left to write.
		if err := r.Status().Patch(ctx, tpl, client.MergeFrom(before)); client.IgnoreNotFound(err) != nil && retErr == nil {
			retErr = fmt.Errorf("failed to patch status: %w", err)
		}
	}()

	hash, err := contentHash(tpl.Spec)
	if err != nil {
		return ctrl.Result{}, err
	}
	tpl.Status.ContentHash = hash

	p := validateSpec(tpl.Spec)
	if p == nil && tpl.Spec.NodePoolRef != nil {
		p, err = r.checkNodePool(ctx, tpl.Spec.NodePoolRef.Name)
		if err != nil {
			return ctrl.Result{}, err
		}
	}
	// Events on failure and recovery only: a template found valid the
	// first time says so in its status, and a GitSync of thousands of
	// templates should not cost as many event writes.
	wasInvalid := conditions.IsFalse(tpl, v1.ReadyCondition)
	setConditions(tpl, p)
	switch {
	case p != nil && (wasReady || tpl.Generation != tpl.Status.ObservedGeneration):
		r.recorder.Eventf(tpl, nil, corev1.EventTypeWarning, p.Reason, "Validate", p.Message)
	case p == nil && wasInvalid:
		r.recorder.Eventf(tpl, nil, corev1.EventTypeNormal, v1.ReasonValid, "Validate", "template is valid; content hash %s", hash)
	}
	if p != nil && p.Stalled {
		return ctrl.Result{}, reconcile.TerminalError(p)
	}
	return ctrl.Result{}, nil
}

// checkNodePool reports a missing node pool as a problem, not an error: the
// pool may simply not be created yet, and its creation requeues the template.
func (r *Reconciler) checkNodePool(ctx context.Context, name string) (*problem.Problem, error) {
	err := r.Get(ctx, types.NamespacedName{Name: name}, &v1.NodePool{})
	if apierrors.IsNotFound(err) {
		return problem.New(v1.ReasonNodePoolNotFound,
			"spec.nodePoolRef names NodePool %q, which does not exist; create it or fix the reference", name), nil
	}
	if err != nil {
		return nil, fmt.Errorf("failed to get NodePool %s: %w", name, err)
	}
	return nil, nil
}

// setConditions turns the verdict into kstatus conditions.
func setConditions(tpl *v1.SandboxTemplate, p *problem.Problem) {
	conditions.Delete(tpl, v1.ReconcilingCondition)
	if p != nil {
		p.Mark(tpl)
		return
	}
	conditions.MarkTrue(tpl, v1.ReadyCondition, v1.ReasonValid, "template is valid")
	conditions.Delete(tpl, v1.StalledCondition)
}

func (r *Reconciler) templatesOfPool(ctx context.Context, pool client.Object) []reconcile.Request {
	list := &v1.SandboxTemplateList{}
	if err := r.List(ctx, list, client.MatchingFields{index.TemplateNodePool: pool.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "failed to list templates of node pool", "nodePool", pool.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, t := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: t.Name}})
	}
	return reqs
}

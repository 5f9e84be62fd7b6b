// Package template is the SandboxTemplate controller: it checks what the CRD
// schema cannot, resolves the node pool reference, and publishes a content
// hash warm pools roll their members on.
package template

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/patch"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/index"
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
	patcher := patch.NewSerialPatcher(tpl, r.Client)
	wasReady := conditions.IsTrue(tpl, v1.ReadyCondition)
	defer func() {
		// An object deleted meanwhile has no status left to write; the
		// helper reports that as an aggregate, which FilterOut unpacks.
		err := kerrors.FilterOut(patcher.Patch(ctx, tpl, patch.WithOwnedConditions{Conditions: []string{
			v1.ReadyCondition, v1.ReconcilingCondition, v1.StalledCondition,
		}}, patch.WithStatusObservedGeneration{}), apierrors.IsNotFound)
		if err != nil && retErr == nil {
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
	setConditions(tpl, p)
	switch {
	case p != nil && (wasReady || tpl.Generation != tpl.Status.ObservedGeneration):
		r.recorder.Eventf(tpl, nil, corev1.EventTypeWarning, p.reason, "Validate", p.message)
	case p == nil && !wasReady:
		r.recorder.Eventf(tpl, nil, corev1.EventTypeNormal, ReasonValid, "Validate", "template is valid; content hash %s", hash)
	}
	if p != nil && p.terminal {
		return ctrl.Result{}, reconcile.TerminalError(fmt.Errorf("%s", p.message))
	}
	return ctrl.Result{}, nil
}

// checkNodePool reports a missing node pool as a problem, not an error: the
// pool may simply not be created yet, and its creation requeues the template.
func (r *Reconciler) checkNodePool(ctx context.Context, name string) (*problem, error) {
	err := r.Get(ctx, types.NamespacedName{Name: name}, &v1.NodePool{})
	if apierrors.IsNotFound(err) {
		return &problem{reason: ReasonNodePoolNotFound,
			message: fmt.Sprintf("spec.nodePoolRef names NodePool %q, which does not exist; create it or fix the reference", name)}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("failed to get NodePool %s: %w", name, err)
	}
	return nil, nil
}

// setConditions turns the verdict into kstatus conditions.
func setConditions(tpl *v1.SandboxTemplate, p *problem) {
	conditions.Delete(tpl, v1.ReconcilingCondition)
	switch {
	case p == nil:
		conditions.MarkTrue(tpl, v1.ReadyCondition, ReasonValid, "template is valid")
		conditions.Delete(tpl, v1.StalledCondition)
	case p.terminal:
		conditions.MarkFalse(tpl, v1.ReadyCondition, p.reason, "%s", p.message)
		conditions.MarkStalled(tpl, p.reason, "%s", p.message)
	default:
		conditions.MarkFalse(tpl, v1.ReadyCondition, p.reason, "%s", p.message)
		conditions.Delete(tpl, v1.StalledCondition)
	}
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

// Package template is the SandboxTemplate controller: it checks what the CRD
// schema cannot, resolves the node pool reference, and publishes a content
// hash warm pools roll their members on.
package template

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
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
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/statuspatch"
)

// Reconciler reconciles SandboxTemplates.
type Reconciler struct {
	client.Client
	recorder recorder.EventRecorder
	status   *statuspatch.Writer
}

// NewReconciler returns a Reconciler using the manager's client.
func NewReconciler(mgr ctrl.Manager) *Reconciler {
	return &Reconciler{
		Client:   mgr.GetClient(),
		recorder: mgr.GetEventRecorder("sandboxtemplate-controller"),
		status:   statuspatch.NewWriter(mgr.GetClient()),
	}
}

// SetupWithManager watches templates and the node pools they reference.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := index.Register(mgr); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.SandboxTemplate{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A pool's status changes with its nodes; only its RuntimeClass
		// being made or lost, or its stalling, changes what its templates
		// can start.
		Watches(&v1.NodePool{}, handler.EnqueueRequestsFromMapFunc(r.templatesOfPool),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
				return offerOf(e.ObjectOld) != offerOf(e.ObjectNew)
			}})).
		// A check is one status write; with one worker a GitSync of
		// 10,000 templates waited on them one round trip at a time.
		WithOptions(controller.Options{MaxConcurrentReconciles: 8}).
		Complete(statuspatch.RequeueConflicts(r))
}

// +kubebuilder:rbac:groups=agentsandbox.dev,resources=sandboxtemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=agentsandbox.dev,resources=sandboxtemplates/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agentsandbox.dev,resources=nodepools,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile validates one template and records the verdict in its status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	tpl := &v1.SandboxTemplate{}
	if err := r.Get(ctx, req.NamespacedName, tpl); err != nil {
		if apierrors.IsNotFound(err) {
			r.status.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	patcher := r.status.For(tpl)
	wasReady, wasInvalid := conditions.IsTrue(tpl, v1.ReadyCondition), conditions.IsFalse(tpl, v1.ReadyCondition)
	newGeneration := tpl.Generation != tpl.Status.ObservedGeneration
	o := r.check(ctx, tpl)
	if o.err != nil {
		return ctrl.Result{}, o.err
	}
	setStatus(tpl, o)
	if err := patcher.Patch(ctx, tpl); err != nil {
		return ctrl.Result{}, err
	}
	// Events on failure and recovery only: a template found valid the
	// first time says so in its status, and a GitSync of thousands of
	// templates should not cost as many event writes.
	switch p := o.problem; {
	case p != nil && (wasReady || newGeneration):
		r.recorder.Eventf(tpl, nil, corev1.EventTypeWarning, p.Reason, "Validate", p.Message)
	case p == nil && wasInvalid:
		r.recorder.Eventf(tpl, nil, corev1.EventTypeNormal, v1.ReasonValid, "Validate", "template is valid; content hash %s", o.contentHash)
	}
	if o.problem != nil && o.problem.Stalled {
		return ctrl.Result{}, reconcile.TerminalError(o.problem)
	}
	return ctrl.Result{}, nil
}

// outcome is what one check of a template found.
type outcome struct {
	contentHash string
	// problem is why the template is not valid; nil when it is.
	problem *problem.Problem
	// err is a failure to check, retried with backoff; the status is left
	// as it was.
	err error
}

// check hashes the template and checks what the CRD schema cannot.
func (r *Reconciler) check(ctx context.Context, tpl *v1.SandboxTemplate) outcome {
	hash, err := contentHash(tpl.Spec)
	if err != nil {
		return outcome{err: err}
	}
	o := outcome{contentHash: hash, problem: validateSpec(tpl.Spec)}
	if o.problem == nil && tpl.Spec.NodePoolRef != nil {
		o.problem, o.err = r.checkNodePool(ctx, tpl.Spec.NodePoolRef.Name)
	}
	return o
}

// checkNodePool reports a missing node pool, or one without its
// RuntimeClass yet, as a problem, not an error: the pool may simply not be
// created yet, or its controller not have reached it (a new pool's status
// names its RuntimeClass at the end of its first pass, which labels its
// nodes: ten new pools of a hundred nodes each, four reconciled at a time,
// had theirs after up to 65 s), and either change requeues the template. Until then the API server would
// refuse the template's pods, so warm pools and sandboxes wait for the
// template to be Ready instead of failing their builds.
func (r *Reconciler) checkNodePool(ctx context.Context, name string) (*problem.Problem, error) {
	pool := &v1.NodePool{}
	err := r.Get(ctx, types.NamespacedName{Name: name}, pool)
	if apierrors.IsNotFound(err) {
		return problem.New(v1.ReasonNodePoolNotFound,
			"spec.nodePoolRef names NodePool %q, which does not exist; create it or fix the reference", name), nil
	}
	if err != nil {
		return nil, fmt.Errorf("failed to get NodePool %s: %w", name, err)
	}
	switch {
	case pool.Status.RuntimeClassName != "":
		return nil, nil
	case conditions.IsTrue(pool, v1.StalledCondition):
		// A RuntimeClass of its name that is not its own: the template
		// waits for the same change the pool does.
		return problem.Stall(v1.ReasonNodePoolNotReady, "spec.nodePoolRef names NodePool %q, which cannot make its RuntimeClass: %s",
			name, conditions.GetMessage(pool, v1.StalledCondition)), nil
	default:
		return problem.New(v1.ReasonNodePoolNotReady,
			"spec.nodePoolRef names NodePool %q, which has no RuntimeClass yet; sandboxes of this template wait for it", name), nil
	}
}

// offer is what a NodePool's status tells its templates: the RuntimeClass
// it made, empty if none yet, and whether it stalled.
type offer struct {
	runtimeClass string
	stalled      bool
}

// offerOf is a NodePool's offer; anything else offers nothing.
func offerOf(obj client.Object) offer {
	pool, ok := obj.(*v1.NodePool)
	if !ok {
		return offer{}
	}
	return offer{pool.Status.RuntimeClassName, conditions.IsTrue(pool, v1.StalledCondition)}
}

// setStatus records what the check found: the content hash and the
// verdict as kstatus conditions.
func setStatus(tpl *v1.SandboxTemplate, o outcome) {
	tpl.Status.ObservedGeneration = tpl.Generation
	tpl.Status.ContentHash = o.contentHash
	p := o.problem
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

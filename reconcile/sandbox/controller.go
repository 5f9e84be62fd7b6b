// Package sandbox is the Sandbox controller: it turns a Sandbox into a
// dedicated namespace with default-deny networking, quota, owner-only access,
// a workspace and the sandbox pod, and runs its lifecycle (stop, start,
// expiry).
package sandbox

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/patch"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/apply"
)

// AnnotationChangedBy is stamped on every Sandbox create and update by the
// shipped MutatingAdmissionPolicy with the requesting identity, so events
// can name who asked for a transition.
const AnnotationChangedBy = "agentsandbox.dev/changed-by"

// templateIndex and warmPoolIndex find the sandboxes of a template or pool.
const (
	templateIndex     = "spec.templateRef.name"
	warmPoolIndex     = "spec.warmPoolRef.name"
	poolTemplateIndex = "spec.templateRef.name"
)

// waitRetry is how often a sandbox waiting on something the controller does
// not watch (a warm pool's template) looks again.
const waitRetry = 10 * time.Second

// Reconciler reconciles Sandboxes.
type Reconciler struct {
	client.Client
	recorder recorder.EventRecorder

	// BlockedEgress are ranges broader egress rules never open.
	BlockedEgress []netip.Prefix
}

// NewReconciler returns a Reconciler with the default blocked ranges.
func NewReconciler(mgr ctrl.Manager) *Reconciler {
	return &Reconciler{
		Client:        mgr.GetClient(),
		recorder:      mgr.GetEventRecorder("sandbox-controller"),
		BlockedEgress: DefaultBlockedEgress,
	}
}

// SetupWithManager watches sandboxes, their namespaces and pods, and the
// templates and pools they come from.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	indexes := []struct {
		obj   client.Object
		field string
		ref   func(client.Object) *v1.LocalObjectReference
	}{
		{&v1.Sandbox{}, templateIndex, func(o client.Object) *v1.LocalObjectReference { return o.(*v1.Sandbox).Spec.TemplateRef }},
		{&v1.Sandbox{}, warmPoolIndex, func(o client.Object) *v1.LocalObjectReference { return o.(*v1.Sandbox).Spec.WarmPoolRef }},
		{&v1.WarmPool{}, poolTemplateIndex, func(o client.Object) *v1.LocalObjectReference { return &o.(*v1.WarmPool).Spec.TemplateRef }},
	}
	for _, ix := range indexes {
		err := mgr.GetFieldIndexer().IndexField(context.Background(), ix.obj, ix.field, func(o client.Object) []string {
			if ref := ix.ref(o); ref != nil {
				return []string{ref.Name}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("failed to index %T by %s: %w", ix.obj, ix.field, err)
		}
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.Sandbox{}).
		Owns(&corev1.Namespace{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(sandboxOfObject)).
		Watches(&v1.SandboxTemplate{}, handler.EnqueueRequestsFromMapFunc(r.sandboxesOfTemplate)).
		Watches(&v1.WarmPool{}, handler.EnqueueRequestsFromMapFunc(r.sandboxesBy(warmPoolIndex))).
		Complete(r)
}

// +kubebuilder:rbac:groups=agentsandbox.dev,resources=sandboxes,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=agentsandbox.dev,resources=sandboxes/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agentsandbox.dev,resources=sandboxes/finalizers,verbs=update
// +kubebuilder:rbac:groups=agentsandbox.dev,resources=sandboxtemplates;warmpools;nodepools,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims;resourcequotas;limitranges,verbs=get;create;patch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;create;patch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=get;create;patch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=bind,resourceNames=agentsandbox-sandbox-owner
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile converges one sandbox. It is level-based: every pass derives
// everything from the Sandbox, its template and what exists, so a restart
// at any point resumes where it stopped.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	sbx := &v1.Sandbox{}
	if err := r.Get(ctx, req.NamespacedName, sbx); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !sbx.DeletionTimestamp.IsZero() {
		// The namespace and everything in it go by garbage collection.
		return ctrl.Result{}, nil
	}
	patcher := patch.NewSerialPatcher(sbx, r.Client)
	before := sbx.DeepCopy()
	defer func() {
		r.recordTransition(before, sbx)
		if err := patcher.Patch(ctx, sbx, patch.WithOwnedConditions{Conditions: []string{
			v1.ReadyCondition, v1.ReconcilingCondition, v1.StalledCondition,
		}}, patch.WithStatusObservedGeneration{}); err != nil && !apierrors.IsNotFound(err) && retErr == nil {
			retErr = fmt.Errorf("failed to patch status: %w", err)
		}
	}()
	if sbx.Status.RequestedAt == nil {
		sbx.Status.RequestedAt = sbx.CreationTimestamp.DeepCopy()
	}

	bp, waiting, err := r.resolve(ctx, sbx)
	if err != nil {
		return ctrl.Result{}, err
	}
	if waiting != nil {
		conditions.MarkFalse(sbx, v1.ReadyCondition, waiting.reason, "%s", waiting.message)
		if waiting.terminal {
			conditions.MarkStalled(sbx, waiting.reason, "%s", waiting.message)
			return ctrl.Result{}, reconcile.TerminalError(fmt.Errorf("%s", waiting.message))
		}
		conditions.MarkReconciling(sbx, waiting.reason, "%s", waiting.message)
		return ctrl.Result{RequeueAfter: waitRetry}, nil
	}
	conditions.Delete(sbx, v1.StalledCondition)

	lt := lifetimeOf(sbx, bp.template)
	sbx.Status.ShutdownAt = lt.end
	expired, left := lt.expired(time.Now())
	if expired && lt.policy == v1.ShutdownPolicyDelete {
		r.recorder.Eventf(sbx, nil, corev1.EventTypeNormal, ReasonExpired, "Delete", "lifetime ended at %s; deleting the sandbox", lt.end.UTC().Format(time.RFC3339))
		return ctrl.Result{}, client.IgnoreNotFound(r.Delete(ctx, sbx))
	}
	desired := sbx.Spec.State
	if expired {
		desired = v1.SandboxStopped
	}

	if err := r.applyEnvironment(ctx, bp); err != nil {
		conditions.MarkFalse(sbx, v1.ReadyCondition, "ApplyFailed", "%v", err)
		return ctrl.Result{}, err
	}
	pod, err := r.convergePod(ctx, bp, desired)
	if err != nil {
		conditions.MarkFalse(sbx, v1.ReadyCondition, "PodFailed", "%v", err)
		return ctrl.Result{}, err
	}
	r.setStatus(sbx, observed{desired: desired, pod: pod, expired: expired})
	if left > 0 {
		return ctrl.Result{RequeueAfter: left}, nil
	}
	return ctrl.Result{}, nil
}

// wait is a reason the sandbox cannot be built yet, or (terminal) at all.
type wait struct {
	reason, message string
	terminal        bool
}

// resolve finds the template (directly or through the warm pool), the node
// pool and the merged environment.
func (r *Reconciler) resolve(ctx context.Context, sbx *v1.Sandbox) (blueprint, *wait, error) {
	bp := blueprint{sandbox: sbx}
	templateName := ""
	switch {
	case sbx.Spec.TemplateRef != nil:
		templateName = sbx.Spec.TemplateRef.Name
		sbx.Status.LaunchType, sbx.Status.LaunchMessage = v1.LaunchCold, ""
	case sbx.Spec.WarmPoolRef != nil:
		pool := &v1.WarmPool{}
		if err := r.Get(ctx, types.NamespacedName{Name: sbx.Spec.WarmPoolRef.Name}, pool); err != nil {
			if apierrors.IsNotFound(err) {
				return bp, &wait{reason: ReasonWarmPoolNotFound, message: fmt.Sprintf("WarmPool %q does not exist", sbx.Spec.WarmPoolRef.Name)}, nil
			}
			return bp, nil, fmt.Errorf("failed to get WarmPool %s: %w", sbx.Spec.WarmPoolRef.Name, err)
		}
		templateName = pool.Spec.TemplateRef.Name
		if sbx.Status.LaunchType == "" {
			sbx.Status.LaunchType = v1.LaunchCold
			sbx.Status.LaunchMessage = "started from the pool's template: this reconciler version does not hand out warm members yet"
		}
	}
	bp.template = &v1.SandboxTemplate{}
	if err := r.Get(ctx, types.NamespacedName{Name: templateName}, bp.template); err != nil {
		if apierrors.IsNotFound(err) {
			return bp, &wait{reason: ReasonTemplateNotFound, message: fmt.Sprintf("SandboxTemplate %q does not exist", templateName)}, nil
		}
		return bp, nil, fmt.Errorf("failed to get SandboxTemplate %s: %w", templateName, err)
	}
	if c := conditions.Get(bp.template, v1.ReadyCondition); c == nil || c.Status != metav1.ConditionTrue ||
		bp.template.Status.ObservedGeneration != bp.template.Generation {
		msg := fmt.Sprintf("SandboxTemplate %q is not Ready yet", templateName)
		if c != nil && c.Status == metav1.ConditionFalse {
			msg = fmt.Sprintf("SandboxTemplate %q is not Ready: %s", templateName, c.Message)
		}
		return bp, &wait{reason: ReasonTemplateNotReady, message: msg}, nil
	}
	env, err := mergeEnv(bp.template.Spec, sbx.Spec.Env)
	if err != nil {
		return bp, &wait{reason: ReasonEnvRejected, message: err.Error(), terminal: true}, nil
	}
	bp.env = env
	if ref := bp.template.Spec.NodePoolRef; ref != nil {
		bp.nodePool = &v1.NodePool{}
		if err := r.Get(ctx, types.NamespacedName{Name: ref.Name}, bp.nodePool); err != nil {
			return bp, nil, fmt.Errorf("failed to get NodePool %s: %w", ref.Name, err)
		}
	}
	return bp, nil, nil
}

// applyEnvironment applies the namespace and the objects that isolate it.
// The namespace comes first: everything else lives in it.
func (r *Reconciler) applyEnvironment(ctx context.Context, bp blueprint) error {
	objs := []client.Object{
		bp.namespace(),
		networkPolicy(NamespaceName(bp.sandbox.Name), bp.template.Spec.Network, r.BlockedEgress),
		bp.resourceQuota(),
		bp.limitRange(),
		bp.roleBinding(),
	}
	if pvc := bp.workspaceClaim(); pvc != nil {
		objs = append(objs, pvc)
	}
	for _, obj := range objs {
		if err := apply.Object(ctx, r.Client, obj); err != nil {
			return err
		}
	}
	return nil
}

// convergePod creates the pod when the sandbox should run and deletes it
// when it should not. A running pod is never rewritten: template changes
// reach a sandbox when it is next started.
func (r *Reconciler) convergePod(ctx context.Context, bp blueprint, desired v1.SandboxState) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	key := types.NamespacedName{Namespace: NamespaceName(bp.sandbox.Name), Name: PodName}
	if err := r.Get(ctx, key, pod); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("failed to get pod %s: %w", key, err)
		}
		pod = nil
	}
	switch {
	case desired == v1.SandboxStopped && pod != nil && pod.DeletionTimestamp == nil:
		if err := r.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
			return pod, fmt.Errorf("failed to delete pod %s: %w", key, err)
		}
	case desired == v1.SandboxRunning && pod != nil && pod.Status.Phase == corev1.PodFailed:
		// A failed pod (evicted, say) is replaced on the next pass.
		if err := r.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
			return pod, fmt.Errorf("failed to delete failed pod %s: %w", key, err)
		}
	case desired == v1.SandboxRunning && pod == nil:
		pod = bp.pod()
		if err := r.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("failed to create pod %s: %w", key, err)
		}
	}
	return pod, nil
}

// setStatus records the observation and the Ready condition.
func (r *Reconciler) setStatus(sbx *v1.Sandbox, o observed) {
	phase, ready, reason, message := phaseOf(o)
	sbx.Status.Phase = phase
	sbx.Status.Namespace = NamespaceName(sbx.Name)
	sbx.Status.PodName, sbx.Status.PodIP = "", ""
	if o.pod != nil && o.pod.DeletionTimestamp == nil {
		sbx.Status.PodName, sbx.Status.PodIP = o.pod.Name, o.pod.Status.PodIP
	}
	if ready {
		if !conditions.IsTrue(sbx, v1.ReadyCondition) {
			now := time.Now()
			if sbx.Status.ReadyAt == nil {
				observeReady(sbx, now)
			}
			sbx.Status.ReadyAt = &metav1.Time{Time: now}
		}
		conditions.MarkTrue(sbx, v1.ReadyCondition, reason, "%s", message)
		conditions.Delete(sbx, v1.ReconcilingCondition)
		return
	}
	conditions.MarkFalse(sbx, v1.ReadyCondition, reason, "%s", message)
	if phase == v1.SandboxPhaseStarting || phase == v1.SandboxPhaseStopping {
		conditions.MarkReconciling(sbx, reason, "%s", message)
	} else {
		conditions.Delete(sbx, v1.ReconcilingCondition)
	}
}

// recordTransition emits one event per phase change, naming the identity
// that last changed the sandbox when admission recorded it.
func (r *Reconciler) recordTransition(before, after *v1.Sandbox) {
	if before.Status.Phase == after.Status.Phase || after.Status.Phase == "" {
		return
	}
	by := after.Annotations[AnnotationChangedBy]
	if by == "" {
		by = after.Spec.Owner
	}
	eventType := corev1.EventTypeNormal
	if after.Status.Phase == v1.SandboxPhaseFailed {
		eventType = corev1.EventTypeWarning
	}
	msg := conditions.GetMessage(after, v1.ReadyCondition)
	r.recorder.Eventf(after, nil, eventType, string(after.Status.Phase), "Converge",
		"%s (sandbox of %s, last changed by %s): %s", after.Status.Phase, after.Spec.Owner, by, msg)
}

// sandboxOfObject maps a pod to its sandbox by label.
func sandboxOfObject(_ context.Context, obj client.Object) []reconcile.Request {
	name, ok := obj.GetLabels()[v1.LabelSandbox]
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: name}}}
}

// sandboxesOfTemplate finds the sandboxes a template change concerns: those
// naming it and those of the warm pools built from it.
func (r *Reconciler) sandboxesOfTemplate(ctx context.Context, tpl client.Object) []reconcile.Request {
	reqs := r.sandboxesBy(templateIndex)(ctx, tpl)
	pools := &v1.WarmPoolList{}
	if err := r.List(ctx, pools, client.MatchingFields{poolTemplateIndex: tpl.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "failed to list warm pools", "template", tpl.GetName())
		return reqs
	}
	for i := range pools.Items {
		reqs = append(reqs, r.sandboxesBy(warmPoolIndex)(ctx, &pools.Items[i])...)
	}
	return reqs
}

func (r *Reconciler) sandboxesBy(index string) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		list := &v1.SandboxList{}
		if err := r.List(ctx, list, client.MatchingFields{index: obj.GetName()}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "failed to list sandboxes", "index", index, "name", obj.GetName())
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for _, s := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: s.Name}})
		}
		return reqs
	}
}

// Package sandbox is the Sandbox controller: it turns a Sandbox into a
// dedicated namespace with default-deny networking, quota, owner-only access,
// a workspace and the sandbox pod, and runs its lifecycle (stop, start,
// expiry).
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/apply"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/index"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/problem"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/statuspatch"
)

// settlingRetry is how soon a pod refused because its namespace is too new
// is tried again: the controller manager completes a namespace moments
// after it is created.
const settlingRetry = 500 * time.Millisecond

// waitRetry is how often a sandbox waiting on something the controller does
// not watch (a warm pool's template) looks again.
const waitRetry = 10 * time.Second

// Reconciler reconciles Sandboxes.
type Reconciler struct {
	client.Client
	// apiReader reads past the cache where a stale answer could cost a
	// double claim.
	apiReader client.Reader
	recorder  recorder.EventRecorder

	// BlockedEgress are ranges broader egress rules never open.
	BlockedEgress []netip.Prefix
	// EgressGateImage holds every start of a sandbox's own processes back
	// until its egress policy is enforced (cmd/sandbox-gate); empty for no
	// gate.
	EgressGateImage string
	// EgressGateway is the Service of the egress gateway that hosts rules
	// and endpoints go through; empty when there is none.
	EgressGateway types.NamespacedName

	memory    *memory
	available *availableMembers
	status    *statuspatch.Writer
}

// NewReconciler returns a Reconciler with the default blocked ranges.
func NewReconciler(mgr ctrl.Manager) *Reconciler {
	return &Reconciler{
		Client:        mgr.GetClient(),
		apiReader:     mgr.GetAPIReader(),
		recorder:      mgr.GetEventRecorder("sandbox-controller"),
		BlockedEgress: environment.DefaultBlockedEgress,
		memory:        newMemory(),
		available:     newAvailableMembers(),
		status:        statuspatch.NewWriter(mgr.GetClient()),
	}
}

// SetupWithManager watches sandboxes, their namespaces and pods, and the
// templates and pools they come from.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := index.Register(mgr); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.Sandbox{}, builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(e event.CreateEvent) bool { r.memory.created.noteCreated(e.Object, time.Now()); return true },
			DeleteFunc: func(e event.DeleteEvent) bool { r.memory.created.forget(e.Object); return true },
		})).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(sandboxOfNamespace), builder.WithPredicates(r.available.follow())).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.sandboxOfPod)).
		Watches(&v1.SandboxTemplate{}, handler.EnqueueRequestsFromMapFunc(r.sandboxesOfTemplate)).
		// A NetworkPolicy follows the Services its egress goes to.
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(r.sandboxesOfService)).
		// A pool's status changes with every claim and refill; only the
		// sandboxes still waiting to be placed care.
		Watches(&v1.WarmPool{}, handler.EnqueueRequestsFromMapFunc(r.sandboxesBy(index.SandboxWarmPool, unplaced))).
		// The sandboxes whose relabels were held, once claims pause.
		WatchesRawSource(source.Func(func(_ context.Context, queue workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			r.memory.wakeWith(func(sandbox string) {
				queue.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: sandbox}})
			})
			return nil
		})).
		WithOptions(controller.Options{MaxConcurrentReconciles: ConcurrentReconciles}).
		Complete(statuspatch.RequeueConflicts(r))
}

// ConcurrentReconciles is how many sandboxes are reconciled at once: claims
// must not queue behind each other. With 20 clients claiming at once (make
// bench), 16 workers left claims waiting for a worker and a p99 above the
// API server's floor for the claim's writes (bench/floor); at 64 none waits
// and the p99 follows the floor (bench/README.md).
const ConcurrentReconciles = 64

// +kubebuilder:rbac:groups=agentsandbox.dev,resources=sandboxes,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=agentsandbox.dev,resources=sandboxes/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agentsandbox.dev,resources=sandboxes/finalizers,verbs=update
// +kubebuilder:rbac:groups=agentsandbox.dev,resources=sandboxtemplates;warmpools;nodepools,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;create;patch;update;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=create
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims;limitranges,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=resourcequotas,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=bind,resourceNames=agentsandbox-sandbox-owner
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=list

// Reconcile converges one sandbox. It is level-based: every pass derives
// everything from the Sandbox, its template and what exists, so a restart
// at any point resumes where it stopped.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	sbx := &v1.Sandbox{}
	if err := r.Get(ctx, req.NamespacedName, sbx); err != nil {
		if apierrors.IsNotFound(err) {
			r.status.Forget(req.NamespacedName)
			r.memory.forgetClaim(req.Name)
			return ctrl.Result{}, r.removeLeftBehind(ctx, req.Name)
		}
		return ctrl.Result{}, err
	}
	if !sbx.DeletionTimestamp.IsZero() {
		r.status.Forget(req.NamespacedName)
		r.memory.forgetClaim(sbx.Name)
		return r.finalize(ctx, sbx)
	}
	// Admission adds the finalizer at create; a Sandbox made where the
	// policy is not installed gets it here.
	if err := statuspatch.SetFinalizer(ctx, r.Client, sbx, v1.FinalizerSandbox, true); err != nil {
		return ctrl.Result{}, err
	}
	before, patcher := sbx.DeepCopy(), r.status.For(sbx)
	o := r.reconcile(ctx, sbx)
	setStatus(sbx, o)
	r.observeReady(before, sbx)
	result, err := o.next(sbx)
	// Status first: it is what a waiting client watches for. A claim's
	// relabel follows it, off the path to Ready, once claims pause, and
	// only when the status write landed: a reconciler that lost it to
	// another's leaves its member to be deleted (placeSandbox).
	patchErr := r.patchStatus(ctx, patcher, before, sbx)
	var relabelIn time.Duration
	if patchErr == nil {
		relabelIn, patchErr = r.relabel(ctx, sbx, o.claimed)
	}
	if patchErr != nil && err == nil {
		err = patchErr
	}
	r.recordTransition(before, sbx)
	switch {
	case relabelIn > 0 && (err == nil || errors.Is(err, reconcile.TerminalError(nil))):
		// A held relabel is looked at again when due, also where the pass
		// found nothing else to look again for; a stalled problem is
		// reported again then, from the status it is in already.
		return ctrl.Result{RequeueAfter: sooner(result.RequeueAfter, relabelIn)}, nil
	case err != nil:
		return ctrl.Result{}, err
	}
	return result, nil
}

// outcome is what one pass found and did: setStatus turns it into the
// status, next into when to look again.
type outcome struct {
	// resolved: the template and what it references were found (resolve),
	// so the lifetime is known.
	resolved   bool
	shutdownAt *metav1.Time
	// deleted: the pass deleted the sandbox, its lifetime or its time
	// stopped being over.
	deleted bool
	// problem is why the sandbox cannot go on: a reference (before it is
	// resolved), or its namespace taken (after).
	problem *problem.Problem
	// waiting is what the sandbox waits for, which will come by itself.
	waiting *waiting
	// err failed the pass, at the step failedReason (a Ready reason)
	// names; it is retried with backoff.
	err          error
	failedReason string
	// claimed is the member this pass claimed, as the cache showed it: its
	// namespace is relabelled for the sandbox once the status write landed.
	claimed *corev1.Namespace
	// namespace and observed are what a pass that converged the pod saw.
	namespace string
	observed  *observed
	rule      idleRule
	// left is when the lifetime or lifecycle.deleteAfterStopped wants the
	// next look.
	left time.Duration
}

// waiting is a wait with its phase and Ready reason, looked at again after
// retry.
type waiting struct {
	phase           v1.SandboxPhase
	reason, message string
	// namespace is the sandbox's, once placed.
	namespace string
	retry     time.Duration
}

// reconcile is one pass: resolve the template, apply the lifetime, place
// the sandbox (its namespace or a warm member), make sure the namespace is
// its own, apply the environment and converge the pod.
func (r *Reconciler) reconcile(ctx context.Context, sbx *v1.Sandbox) outcome {
	res, p, err := r.resolve(ctx, sbx)
	if p != nil || err != nil {
		return outcome{problem: p, err: err}
	}
	lt := lifetimeOf(sbx, res.template)
	o := outcome{resolved: true, shutdownAt: lt.end, rule: idleRuleOf(sbx, res.template)}
	desired, expired, idle := r.applyLifecycle(ctx, sbx, lt, &o)
	if o.deleted {
		return o
	}

	namespace, claimed, err := r.placeSandbox(ctx, sbx, res)
	if err != nil {
		o.err, o.failedReason = err, v1.ReasonPlacementFailed
		return o
	}
	if namespace == "" {
		// The pool has no Ready member and its policy is to wait for one.
		o.waiting = &waiting{phase: v1.SandboxPhasePending, reason: v1.ReasonWaitingForMember, retry: waitRetry,
			message: fmt.Sprintf("waiting for a Ready member of WarmPool %q (whenEmpty: Wait)", sbx.Spec.WarmPoolRef.Name)}
		return o
	}
	bp := environment.ForSandbox(sbx, namespace, res.template, res.nodePool, res.env).WithEgress(res.egress).WithEgressGate(r.EgressGateImage)
	seen, justClaimed := namespaceCached, claimed != nil
	o.claimed = claimed
	if !justClaimed {
		var taken *problem.Problem
		if seen, taken, err = r.ensureNamespace(ctx, sbx, bp); err != nil {
			o.err, o.failedReason = err, v1.ReasonApplyFailed
			return o
		}
		if taken != nil {
			o.problem = taken
			return o
		}
	}
	if err := r.applyEnvironment(ctx, bp, justClaimed, seen); err != nil {
		o.err, o.failedReason = err, v1.ReasonApplyFailed
		return o
	}
	pod, err := r.convergePod(ctx, bp, desired)
	waitingFor, settling := environment.NamespaceSettling(err)
	if errors.Is(err, errQuotaRecount) {
		waitingFor, settling = "the namespace's ResourceQuota to be counted again: it counted pods that were never created", true
	}
	if environment.MissingDefaultServiceAccount(err) {
		// A namespace whose ServiceAccount was not made with it (a pass
		// cut short between the two) gets it now.
		if err := environment.CreateDefaultServiceAccount(ctx, r.Client, namespace); err != nil {
			o.err, o.failedReason = err, v1.ReasonPodFailed
			return o
		}
	}
	if settling {
		o.waiting = &waiting{phase: v1.SandboxPhaseStarting, reason: v1.ReasonPodStarting, message: "waiting for " + waitingFor,
			namespace: namespace, retry: settlingRetry}
		return o
	}
	if err != nil {
		o.err, o.failedReason = err, v1.ReasonPodFailed
		return o
	}
	o.namespace = namespace
	r.warnIfMoved(sbx, pod, res.egress)
	o.observed = &observed{desired: desired, pod: pod, expired: expired, idle: idle, wakes: o.rule.wake, now: time.Now()}
	o.observed.nodeWord = r.lookAtNode(ctx, pod, o.observed.now)
	return o
}

// warnIfMoved emits a Warning event for each address the sandbox's pod
// was given that the cluster no longer answers at (the egress gateway's or
// a Service's, recreated): a running pod's environment and /etc/hosts
// cannot change without restarting its processes, which is its owner's
// call, not the reconciler's.
func (r *Reconciler) warnIfMoved(sbx *v1.Sandbox, pod *corev1.Pod, egress environment.Egress) {
	if pod == nil || pod.DeletionTimestamp != nil {
		return
	}
	const restart = "stop and start the sandbox to give them the new address (its workspace is kept)"
	for _, m := range egress.Moved(pod) {
		switch {
		case m.Service == nil:
			r.recorder.Eventf(sbx, nil, corev1.EventTypeWarning, v1.ReasonEgressGatewayMoved, "Converge",
				"the egress gateway answers at %s now, but this sandbox's processes were given %s when they started, so their egress by name (hosts rules, endpoints) fails; "+restart,
				m.Current, m.Given)
		case m.Current == "":
			r.recorder.Eventf(sbx, nil, corev1.EventTypeWarning, v1.ReasonEgressServiceMoved, "Converge",
				"Service %s/%s has no cluster IP now (it was recreated headless), but this sandbox's /etc/hosts gives its names %s, which no longer answers; allow cluster DNS in the template, or its pods with a cidr rule",
				m.Service.Namespace, m.Service.Name, m.Given)
		default:
			r.recorder.Eventf(sbx, nil, corev1.EventTypeWarning, v1.ReasonEgressServiceMoved, "Converge",
				"Service %s/%s answers at %s now, but this sandbox's /etc/hosts gives its names %s, written when its processes started, so reaching it by name fails; "+restart,
				m.Service.Namespace, m.Service.Name, m.Current, m.Given)
		}
	}
}

// next is the one decision of when to look at the sandbox again, from the
// outcome and the status set from it. A stalled problem needs a change
// elsewhere, and a spec change or a referenced object's change brings the
// sandbox back; one on something the controller does not watch is looked
// at again every waitRetry. Any other problem is waited out, every
// waitRetry.
func (o outcome) next(sbx *v1.Sandbox) (ctrl.Result, error) {
	switch {
	case o.err != nil:
		return ctrl.Result{}, o.err
	case o.deleted:
		return ctrl.Result{}, nil
	case o.problem != nil && o.problem.Stalled && !o.problem.Unwatched:
		return ctrl.Result{}, reconcile.TerminalError(o.problem)
	case o.problem != nil:
		return ctrl.Result{RequeueAfter: waitRetry}, nil
	case o.waiting != nil:
		return ctrl.Result{RequeueAfter: o.waiting.retry}, nil
	}
	return ctrl.Result{RequeueAfter: sooner(sooner(o.left, nextLook(*o.observed)), untilIdleStop(sbx, o.observed.now))}, nil
}

// sooner is the shorter of two waits, where zero is no wait at all.
func sooner(a, b time.Duration) time.Duration {
	if a <= 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

// patchStatus writes the status (statuspatch). Until the status names a
// namespace, the write is locked to the Sandbox's version: of two
// reconcilers that each placed it (two replicas without leader election,
// or a lease handover), one write wins, and the other's namespace is
// deleted on a later pass (placeSandbox); nor may one's launch type land
// beside the other's namespace.
func (r *Reconciler) patchStatus(ctx context.Context, patcher *statuspatch.Patcher, before, sbx *v1.Sandbox) error {
	if before.Status.Namespace == "" {
		return patcher.PatchLocked(ctx, sbx)
	}
	return patcher.Patch(ctx, sbx)
}

// resolved is what a sandbox is built from.
type resolved struct {
	template *v1.SandboxTemplate
	// nodePool is nil when the template runs on the default runtime.
	nodePool *v1.NodePool
	// warmPool is set for a sandbox claimed from a pool.
	warmPool *v1.WarmPool
	// env is the template's environment with the sandbox's overrides.
	env []v1.EnvVar
	// egress is what the template's egress rules resolve to.
	egress environment.Egress
}

// resolve finds the template (directly or through the warm pool), the node
// pool and the merged environment.
func (r *Reconciler) resolve(ctx context.Context, sbx *v1.Sandbox) (resolved, *problem.Problem, error) {
	var res resolved
	referrer, templateName := "spec.templateRef", ""
	switch {
	case sbx.Spec.TemplateRef != nil:
		templateName = sbx.Spec.TemplateRef.Name
	case sbx.Spec.WarmPoolRef != nil:
		res.warmPool = &v1.WarmPool{}
		if err := r.Get(ctx, types.NamespacedName{Name: sbx.Spec.WarmPoolRef.Name}, res.warmPool); err != nil {
			if apierrors.IsNotFound(err) {
				return res, problem.New(v1.ReasonWarmPoolNotFound, "spec.warmPoolRef names WarmPool %q, which does not exist; create it or fix the reference", sbx.Spec.WarmPoolRef.Name), nil
			}
			return res, nil, fmt.Errorf("failed to get WarmPool %s: %w", sbx.Spec.WarmPoolRef.Name, err)
		}
		referrer = fmt.Sprintf("WarmPool %q's spec.templateRef", res.warmPool.Name)
		templateName = res.warmPool.Spec.TemplateRef.Name
	}
	var p *problem.Problem
	var err error
	if res.template, res.nodePool, p, err = environment.ReadyTemplate(ctx, r.Client, referrer, templateName); p != nil || err != nil {
		return res, p, err
	}
	if res.env, err = environment.MergeEnv(res.template.Spec, sbx.Spec.Env); err != nil {
		return res, problem.Stall(v1.ReasonEnvVarsInjectionRejected, "%s", err), nil
	}
	res.egress, p, err = environment.ResolveEgress(ctx, r.Client, res.template, r.EgressGateway)
	return res, p, err
}

// applyEnvironment applies the objects that isolate the sandbox's
// namespace, which ensureNamespace (or a claim) made sure is the sandbox's,
// writing only what differs from the cache. The namespace itself comes
// first when the cache shows it (ensureNamespace); one this pass created
// is followed by its default ServiceAccount instead, which the pod cannot
// be created without. Right after a claim nothing is written: the
// member's objects are already right, the claim created the owner's
// binding, and the namespace is relabelled after the status write.
func (r *Reconciler) applyEnvironment(ctx context.Context, bp environment.Blueprint, justClaimed bool, seen namespaceSeen) error {
	if justClaimed {
		return nil
	}
	objs := append(bp.Isolation(r.BlockedEgress), bp.RoleBinding())
	switch seen {
	case namespaceCreated:
		if err := environment.CreateDefaultServiceAccount(ctx, r.Client, bp.Namespace()); err != nil {
			return err
		}
	case namespaceCached:
		objs = append([]client.Object{bp.NamespaceObject()}, objs...)
	}
	for _, obj := range objs {
		if _, err := apply.IfChanged(ctx, r.Client, obj); err != nil {
			return err
		}
	}
	return nil
}

// convergePod creates the pod when the sandbox should run and deletes it
// when it should not. A running pod is never rewritten: template changes
// reach a sandbox when it is next started.
func (r *Reconciler) convergePod(ctx context.Context, bp environment.Blueprint, desired v1.SandboxState) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	key := types.NamespacedName{Namespace: bp.Namespace(), Name: environment.PodName}
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
		pod = bp.Pod()
		err := r.Create(ctx, pod)
		if overcharged(err) {
			return r.recountQuota(ctx, bp)
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("failed to create pod %s: %w", key, err)
		}
	}
	return pod, nil
}

// errQuotaRecount says the namespace's ResourceQuota was deleted, to be
// created again and counted afresh, because it counted pods that were
// never created.
var errQuotaRecount = errors.New("the namespace's ResourceQuota counted pods that were never created")

// overcharged tells a pod refused by the sandbox's own quota.
func overcharged(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota: "+environment.QuotaName)
}

// recountQuota handles a sandbox pod refused by the namespace's quota
// although no pod counts against it. Quota admission charges a create
// before the object is stored, and a create that then fails (its client
// killed mid-request, say) stays charged until the controller manager's
// next full recount, five minutes later; a reconciler killed twice during
// a sandbox's start can so leave a quota of two pods full with none. A
// pod the cache did not show yet is returned; otherwise the quota is
// deleted, the next pass creates it again, and the controller manager
// counts the new one from what exists.
func (r *Reconciler) recountQuota(ctx context.Context, bp environment.Blueprint) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: bp.Namespace(), Name: environment.PodName}, pod)
	if err == nil {
		return pod, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("failed to get pod %s/%s: %w", bp.Namespace(), environment.PodName, err)
	}
	if err := r.Delete(ctx, bp.ResourceQuota()); client.IgnoreNotFound(err) != nil {
		return nil, fmt.Errorf("failed to delete ResourceQuota %s/%s to have it counted again: %w", bp.Namespace(), environment.QuotaName, err)
	}
	return nil, errQuotaRecount
}

// recordTransition emits one event per phase change, naming the identity
// that last changed the sandbox when admission recorded it. A warm claim
// that is Running on its first pass emits none: its status already says
// when and how it was claimed, and the claim path is budgeted at four API
// writes (create, namespace claim, owner binding, status).
func (r *Reconciler) recordTransition(before, after *v1.Sandbox) {
	if before.Status.Phase == after.Status.Phase || after.Status.Phase == "" {
		return
	}
	if before.Status.Phase == "" && after.Status.Phase == v1.SandboxPhaseRunning && after.Status.LaunchType == v1.LaunchWarm {
		return
	}
	by := after.Annotations[v1.AnnotationChangedBy]
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

// sandboxOfPod maps a pod to its sandbox: by its label, or, for the pod of
// a claimed warm member (labelled before the claim), by its namespace's.
func (r *Reconciler) sandboxOfPod(ctx context.Context, pod client.Object) []reconcile.Request {
	name, ok := pod.GetLabels()[v1.LabelSandbox]
	if !ok {
		if name, ok = r.sandboxInNamespace(ctx, pod.GetNamespace()); !ok {
			return nil
		}
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: name}}}
}

// sandboxInNamespace names, from the cache, the sandbox whose namespace
// this is: by the namespace's label, or, for a claimed member whose
// relabel is held (relabelQuiet), by its claim's binding.
func (r *Reconciler) sandboxInNamespace(ctx context.Context, namespace string) (string, bool) {
	ns := &corev1.Namespace{}
	if err := r.Get(ctx, types.NamespacedName{Name: namespace}, ns); err != nil {
		return "", false
	}
	if name, ok := ns.Labels[v1.LabelSandbox]; ok || ns.Labels[v1.LabelMember] != v1.MemberAvailable {
		return name, ok
	}
	claim := &rbacv1.RoleBinding{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: environment.OwnerBindingName}, claim); err != nil ||
		claim.Labels[v1.LabelMember] != v1.MemberClaimed {
		return "", false
	}
	name, ok := claim.Labels[v1.LabelSandbox]
	return name, ok
}

// sandboxesOfTemplate finds the sandboxes a template change concerns: those
// naming it and those of the warm pools built from it.
func (r *Reconciler) sandboxesOfTemplate(ctx context.Context, tpl client.Object) []reconcile.Request {
	reqs := r.sandboxesBy(index.SandboxTemplate, everySandbox)(ctx, tpl)
	pools := &v1.WarmPoolList{}
	if err := r.List(ctx, pools, client.MatchingFields{index.WarmPoolTemplate: tpl.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "failed to list warm pools", "template", tpl.GetName())
		return reqs
	}
	for i := range pools.Items {
		reqs = append(reqs, r.sandboxesBy(index.SandboxWarmPool, everySandbox)(ctx, &pools.Items[i])...)
	}
	return reqs
}

// sandboxesOfService maps a Service to the sandboxes whose templates' egress
// goes to it: through a service rule, or, for the egress gateway, through a
// hosts rule or an endpoint.
func (r *Reconciler) sandboxesOfService(ctx context.Context, svc client.Object) []reconcile.Request {
	key := client.ObjectKeyFromObject(svc)
	templates, err := environment.TemplatesUsing(ctx, r.Client, key, r.EgressGateway)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "failed to map a Service to its sandboxes", "service", key)
		return nil
	}
	var reqs []reconcile.Request
	for _, tpl := range templates {
		reqs = append(reqs, r.sandboxesOfTemplate(ctx, tpl)...)
	}
	return reqs
}

// sandboxesBy maps an object to the sandboxes that name it in the indexed
// field and that match.
func (r *Reconciler) sandboxesBy(field string, match func(*v1.Sandbox) bool) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		list := &v1.SandboxList{}
		if err := r.List(ctx, list, client.MatchingFields{field: obj.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "failed to list sandboxes", "index", field, "name", obj.GetName())
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			if match(&list.Items[i]) {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
			}
		}
		return reqs
	}
}

// everySandbox matches every sandbox.
func everySandbox(*v1.Sandbox) bool { return true }

// unplaced tells a sandbox that has no namespace yet.
func unplaced(s *v1.Sandbox) bool { return s.Status.Namespace == "" }

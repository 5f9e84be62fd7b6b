// Package warmpool is the WarmPool controller: it keeps spec.replicas
// members — complete sandbox environments with a Ready pod, owned by the
// pool — so a Sandbox with a warmPoolRef is served by taking one (the
// create of its owner's binding) instead of building one. Members are
// rolled when the template changes, per the pool's update strategy.
package warmpool

import (
	"context"
	"net/netip"
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

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/index"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/statuspatch"
)

// maxRetryDelay bounds the backoff after failed passes: a pool whose builds
// fail keeps trying at least this often, so it fills soon after the cause
// (an admission policy, a quota the controller manager is slow to count)
// goes. controller-runtime's default backoff grows to about 16 minutes.
const maxRetryDelay = 30 * time.Second

// concurrentBuilds bounds how many members one pass builds at once. Each
// build is a handful of creates in order; a pool filling from empty needs
// many in flight to use the API server's write capacity rather than its
// latency, and a bound keeps one pass from sending hundreds at once.
const concurrentBuilds = 32

// buildsPerPass bounds the members one pass creates, so a pool filling from
// empty reports its progress in status every few hundred members rather
// than once at the end.
const buildsPerPass = 200

// memberBatch is how long a pool waits after a change to one of its members
// (a claim, a pod turning Ready) before it looks again. Claims come in
// bursts: counting and replacing them in one pass, with one status write,
// rather than a pass and a status write per claim, leaves the API server to
// the claims themselves. The Job controller batches its pods' events for
// the same reason.
const memberBatch = time.Second

// claimQuiet is how long a pool waits after the last claim of a burst
// before it replaces every claimed member. Building a member costs the API
// server about three times what claiming one does (a namespace, its
// policies, a pod, and the writes of the controller manager, scheduler and
// kubelet that follow), so topping up during a burst would slow the very
// claims the pool is there to serve. The pool absorbs the burst and refills
// when it pauses; meanwhile it builds only what keeps a quarter of its
// replicas in place.
const claimQuiet = time.Second

// burstClaims claims within claimQuiet begin a burst (claimRun). Fewer are
// an agent claiming one sandbox after another, the common case: each
// claimed member is replaced at once, which costs the API server a few
// writes a second, so that the next claim finds a member too.
const burstClaims = 3

// memberPrefix starts every member namespace name, so they are told apart
// from the namespaces of cold-started sandboxes.
const memberPrefix = "sandbox-wp-"

// Reconciler reconciles WarmPools.
type Reconciler struct {
	client.Client
	// apiReader confirms, past the cache, that an object exists.
	apiReader client.Reader
	recorder  recorder.EventRecorder

	// BlockedEgress are ranges broader egress rules never open.
	BlockedEgress []netip.Prefix
	// EgressGateImage holds every member's own processes back until its
	// egress policy is enforced (cmd/sandbox-gate); empty for no gate.
	EgressGateImage string
	// EgressGateway is the Service of the egress gateway that hosts rules
	// and endpoints go through; empty when there is none.
	EgressGateway types.NamespacedName

	memory *memory
	status *statuspatch.Writer
}

// NewReconciler returns a Reconciler with the default blocked ranges.
func NewReconciler(mgr ctrl.Manager) *Reconciler {
	return &Reconciler{
		Client: mgr.GetClient(), apiReader: mgr.GetAPIReader(), recorder: mgr.GetEventRecorder("warmpool-controller"),
		BlockedEgress: environment.DefaultBlockedEgress, memory: newMemory(), status: statuspatch.NewWriter(mgr.GetClient()),
	}
}

// SetupWithManager watches pools, their member namespaces and pods, and
// their templates.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := index.Register(mgr); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		// A pool's own status writes need no pass.
		For(&v1.WarmPool{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Namespace{}, r.memberEvents()).
		Watches(&corev1.Pod{}, r.memberEvents()).
		// A claim takes a member by creating its owner's binding.
		Watches(&rbacv1.RoleBinding{}, r.memberEvents()).
		Watches(&v1.SandboxTemplate{}, handler.EnqueueRequestsFromMapFunc(r.poolsOfTemplate)).
		// Members given a Service's address (the gateway's, a service
		// rule's) are replaced when it moves.
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(r.poolsOfService)).
		WithOptions(controller.Options{
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, maxRetryDelay),
		}).
		Complete(statuspatch.RequeueConflicts(r))
}

// +kubebuilder:rbac:groups=agentsandbox.dev,resources=warmpools,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=agentsandbox.dev,resources=warmpools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agentsandbox.dev,resources=warmpools/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=agentsandbox.dev,resources=sandboxes,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=list

// Reconcile reads the pool, runs one pass, writes the status from what the
// pass found and decides when to look again.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pool := &v1.WarmPool{}
	if err := r.Get(ctx, req.NamespacedName, pool); err != nil {
		if apierrors.IsNotFound(err) {
			r.memory.forget(req.Name)
			r.status.Forget(req.NamespacedName)
			return ctrl.Result{}, r.removeStrangers(ctx, &v1.WarmPool{ObjectMeta: metav1.ObjectMeta{Name: req.Name}})
		}
		return ctrl.Result{}, err
	}
	if !pool.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, pool)
	}
	if err := statuspatch.SetFinalizer(ctx, r.Client, pool, v1.FinalizerWarmPool, true); err != nil {
		return ctrl.Result{}, err
	}
	readyBefore := conditions.Get(pool, v1.ReadyCondition).DeepCopy()
	patcher := r.status.For(pool)
	o := r.reconcile(ctx, pool)
	setStatus(pool, o)
	r.recordDeletions(pool, o.deleted, o.want)
	r.recordReadyTransition(pool, readyBefore)
	result, err := o.next()
	// Locked: the cache can be behind the controller's own last write, and
	// a patch of the difference from such a stale copy leaves alone the
	// fields that changed since (a pool once showed replicas 0 beside "6
	// of 6 members Ready"). A conflict says the copy was stale, and the
	// pass runs again once the cache has caught up (RequeueConflicts).
	patchErr := patcher.PatchLocked(ctx, pool)
	if err == nil {
		err = patchErr
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	return result, nil
}

// reconcile is one pass: find the template, trim the pool (members beyond
// replicas, and stale ones under Recreate), then build what is missing.
func (r *Reconciler) reconcile(ctx context.Context, pool *v1.WarmPool) outcome {
	tpl, nodePool, p, err := environment.ReadyTemplate(ctx, r.Client, "spec.templateRef", pool.Spec.TemplateRef.Name)
	if p != nil || err != nil {
		return outcome{problem: p, err: err}
	}
	egress, p, err := environment.ResolveEgress(ctx, r.Client, tpl, r.EgressGateway)
	if p != nil || err != nil {
		return outcome{problem: p, err: err}
	}
	o := outcome{templateHash: tpl.Status.ContentHash, want: int(pool.DesiredReplicas())}
	if o.err = r.removeStrangers(ctx, pool); o.err != nil {
		return o
	}
	members, taken, err := environment.Members(ctx, r.Client, pool)
	if err != nil {
		o.err = err
		return o
	}
	if o.takenIn, o.err = r.settleTaken(ctx, taken, time.Now()); o.err != nil {
		return o
	}
	var drop []environment.Member
	fresh := freshness{strategy: pool.Spec.UpdateStrategy.Type, hash: tpl.Status.ContentHash, egress: egress}
	o.keep, drop = plan(members, o.want, fresh)
	if o.deleted, o.err = r.trim(ctx, drop, fresh); o.err != nil {
		return o
	}
	o.counted = true
	r.notStarted(ctx, &o, time.Now())
	unseen, inFlight := r.memory.observe(pool.Name, members)
	// toBuild is what this pass builds of the missing members: all of
	// them, or fewer while claims keep coming (deferred until they pause).
	toBuild := o.want - len(o.keep) - unseen
	if toBuild > 0 {
		toBuild, o.deferred = topUp(r.memory.recentClaims(pool.Name), len(o.keep)+unseen, toBuild, o.want, time.Now())
	}
	var builds []memberBuild
	for range min(toBuild, buildsPerPass) {
		name := memberName(pool.Name)
		builds = append(builds, memberBuild{name, environment.MemberObjects(pool, name, tpl, nodePool, egress, r.BlockedEgress, r.EgressGateImage)})
	}
	// A member whose build was cut short (a crash, a failed write) gets its
	// missing objects; those it has are left as they are.
	for _, m := range o.keep {
		if !m.Complete && !inFlight[m.Namespace.Name] {
			objs := environment.MemberObjects(pool, m.Namespace.Name, tpl, nodePool, egress, r.BlockedEgress, r.EgressGateImage)[1:]
			builds = append(builds, memberBuild{m.Namespace.Name, objs})
		}
	}
	o.settling, o.buildErr = r.build(ctx, pool.Name, builds)
	o.pending = unseen > 0 || toBuild > 0 || len(inFlight) > 0
	return o
}

// memberEvents enqueues the pool of a member namespace, pod or binding
// memberBatch after the change, and notes when a member is claimed (its
// claim binding created); a claim that is no part of a burst enqueues it
// at once.
func (r *Reconciler) memberEvents() handler.EventHandler {
	enqueue := func(obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if name, ok := obj.GetLabels()[v1.LabelWarmPool]; ok {
			q.AddAfter(reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}, memberBatch)
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			// A claim is a claim binding created now; the first list shows
			// every claim made before.
			if _, binding := e.Object.(*rbacv1.RoleBinding); binding && !e.IsInInitialList && e.Object.GetLabels()[v1.LabelMember] == v1.MemberClaimed {
				pool, now := e.Object.GetLabels()[v1.LabelWarmPool], time.Now()
				r.memory.claimed(pool, e.Object.GetNamespace(), now)
				if !r.memory.recentClaims(pool).inBurst(now) {
					// A claim on its own: nothing to batch it with, and
					// the next claim may come within the second.
					q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: pool}})
					return
				}
			}
			enqueue(e.Object, q)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(e.ObjectNew, q)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(e.Object, q)
		},
	}
}

// poolsOfGateway maps the egress gateway's Service to every pool: its
// members may have been given its address, or may wait for it to exist.
// It changes rarely, and pools are few.
// poolsOfService maps a Service to the pools whose template goes to it (a
// service rule's, or the egress gateway): their members' policy and
// addresses follow it.
func (r *Reconciler) poolsOfService(ctx context.Context, svc client.Object) []reconcile.Request {
	key := client.ObjectKeyFromObject(svc)
	templates, err := environment.TemplatesUsing(ctx, r.Client, key, r.EgressGateway)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "failed to map a Service to its pools", "service", key)
		return nil
	}
	var reqs []reconcile.Request
	for _, tpl := range templates {
		reqs = append(reqs, r.poolsOfTemplate(ctx, tpl)...)
	}
	return reqs
}

func (r *Reconciler) poolsOfTemplate(ctx context.Context, tpl client.Object) []reconcile.Request {
	list := &v1.WarmPoolList{}
	if err := r.List(ctx, list, client.MatchingFields{index.WarmPoolTemplate: tpl.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "failed to list warm pools", "template", tpl.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, p := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: p.Name}})
	}
	return reqs
}

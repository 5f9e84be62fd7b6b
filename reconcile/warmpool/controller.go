// Package warmpool is the WarmPool controller: it keeps spec.replicas
// members — complete sandbox environments with a Ready pod, owned by the
// pool — so a Sandbox with a warmPoolRef is served by relabelling one
// instead of building one. Members are rolled when the template changes,
// per the pool's update strategy.
package warmpool

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/index"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/sandbox"
)

// ReasonMembersDeleted is the event of a pass that deleted members.
const ReasonMembersDeleted = "MembersDeleted"

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

// claimQuiet is how long a pool waits after its last claim before it
// replaces every claimed member. Building a member costs the API server
// about three times what claiming one does (a namespace, its policies, a
// pod, and the writes of the controller manager, scheduler and kubelet that
// follow), so topping up during a burst would slow the very claims the pool
// is there to serve. The pool absorbs the burst and refills when it pauses;
// meanwhile it builds only what keeps a quarter of its replicas in place.
const claimQuiet = time.Second

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

	expected *expectations
	// lastClaim is when each pool (by name) last lost a member to a claim,
	// as this process saw it; a restart forgets it and tops up at once.
	lastClaim sync.Map
}

// NewReconciler returns a Reconciler with the default blocked ranges.
func NewReconciler(mgr ctrl.Manager) *Reconciler {
	return &Reconciler{
		Client: mgr.GetClient(), apiReader: mgr.GetAPIReader(), recorder: mgr.GetEventRecorder("warmpool-controller"),
		BlockedEgress: sandbox.DefaultBlockedEgress, expected: newExpectations(),
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
		Watches(&v1.SandboxTemplate{}, handler.EnqueueRequestsFromMapFunc(r.poolsOfTemplate)).
		WithOptions(controller.Options{
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, maxRetryDelay),
		}).
		Complete(r)
}

// +kubebuilder:rbac:groups=agentsandbox.dev,resources=warmpools,verbs=get;list;watch
// +kubebuilder:rbac:groups=agentsandbox.dev,resources=warmpools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agentsandbox.dev,resources=warmpools/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile tops the pool up, trims it and rolls stale members.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	pool := &v1.WarmPool{}
	if err := r.Get(ctx, req.NamespacedName, pool); err != nil {
		if apierrors.IsNotFound(err) {
			r.lastClaim.Delete(req.Name)
			return ctrl.Result{}, r.removeOrphanedMembers(ctx, req.Name)
		}
		return ctrl.Result{}, err
	}
	if !pool.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // members go by garbage collection
	}
	before := pool.DeepCopy()
	readyBefore := conditions.Get(pool, v1.ReadyCondition).DeepCopy()
	defer func() {
		r.recordReadyTransition(pool, readyBefore)
		err := r.patchStatus(ctx, before, pool)
		switch {
		case apierrors.IsConflict(err):
			// The cache was behind: again once it has caught up.
			result = ctrl.Result{Requeue: true}
		case err != nil && retErr == nil:
			retErr = err
		}
	}()
	pool.Status.Selector = labels.SelectorFromSet(labels.Set{v1.LabelWarmPool: pool.Name, v1.LabelMember: v1.MemberAvailable}).String()

	tpl, nodePool, reason, problem, err := r.template(ctx, pool)
	if err != nil || problem != "" {
		if problem != "" {
			conditions.MarkFalse(pool, v1.ReadyCondition, reason, "%s", problem)
		}
		return ctrl.Result{}, err
	}
	pool.Status.TemplateHash = tpl.Status.ContentHash

	members, err := sandbox.Members(ctx, r.Client, pool)
	if err != nil {
		return ctrl.Result{}, err
	}
	want := int(pool.DesiredReplicas())
	keep, drop := plan(members, want, pool.Spec.UpdateStrategy.Type, tpl.Status.ContentHash)
	var deleted deletions
	for _, m := range drop {
		// Conditional on the resourceVersion the cache saw: a member a
		// Sandbox claimed meanwhile has changed and is not deleted.
		ns := m.Namespace.DeepCopy()
		err := r.Delete(ctx, ns, client.Preconditions{UID: &ns.UID, ResourceVersion: &ns.ResourceVersion})
		if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			r.recordDeletions(pool, deleted, want)
			return ctrl.Result{}, fmt.Errorf("failed to delete member %s: %w", ns.Name, err)
		}
		if err == nil {
			deleted.count(pool.Spec.UpdateStrategy.Type == v1.RecreateUpdateStrategy && ns.Labels[v1.LabelTemplateHash] != tpl.Status.ContentHash)
		}
	}
	r.recordDeletions(pool, deleted, want)
	unseen, inFlight := r.expected.observe(pool.Name, members)
	// toBuild is what this pass builds of the missing members: all of
	// them, or fewer while claims keep coming (deferred until they pause).
	toBuild, deferred := want-len(keep)-unseen, time.Duration(0)
	if toBuild > 0 {
		toBuild, deferred = r.topUp(pool.Name, len(keep)+unseen, toBuild, want, time.Now())
	}
	// Builds are independent: one that fails leaves its member incomplete
	// for a later pass and does not cut the others short. A pod refused
	// because its brand-new namespace is not complete yet (no default
	// ServiceAccount, a quota not counted yet) is no failure; the pass just
	// comes back a second later (settling).
	var builds errgroup.Group
	builds.SetLimit(concurrentBuilds)
	var settling atomic.Bool
	build := func(name string, objs []client.Object) {
		r.expected.building(pool.Name, name)
		builds.Go(func() error {
			err := r.createAll(ctx, objs)
			if err != nil {
				r.expected.failed(pool.Name, name)
			}
			if _, ok := sandbox.NamespaceSettling(err); ok {
				settling.Store(true)
				return nil
			}
			if err != nil {
				return fmt.Errorf("failed to build member %s: %w", name, err)
			}
			return nil
		})
	}
	for i := 0; i < min(toBuild, buildsPerPass); i++ {
		name := memberName(pool.Name)
		build(name, sandbox.MemberObjects(pool, name, tpl, nodePool, r.BlockedEgress))
	}
	// A member whose build was cut short (a crash, a failed write) gets its
	// missing objects; those it has are left as they are.
	for _, m := range keep {
		if !m.Complete && !inFlight[m.Namespace.Name] {
			build(m.Namespace.Name, sandbox.MemberObjects(pool, m.Namespace.Name, tpl, nodePool, r.BlockedEgress)[1:])
		}
	}
	setStatus(pool, keep, want, deferred > 0)
	if err := builds.Wait(); err != nil {
		// The first failed build; the retry completes every member.
		msg := fmt.Sprintf("%s; %v", conditions.GetMessage(pool, v1.ReadyCondition), err)
		conditions.MarkFalse(pool, v1.ReadyCondition, v1.ReasonBuildFailed, "%s", msg)
		conditions.MarkReconciling(pool, v1.ReasonBuildFailed, "%s", msg)
		return ctrl.Result{}, err
	}
	if settling.Load() {
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	if deferred > 0 {
		return ctrl.Result{RequeueAfter: deferred}, nil
	}
	// A pass that left members to build is followed by the next as the
	// watch shows the ones it created; builds the cache never shows whole
	// (a member whose pod never appears included) are given up after
	// expectationTTL, and a pass then must look again.
	if unseen > 0 || toBuild > 0 || len(inFlight) > 0 {
		return ctrl.Result{RequeueAfter: expectationTTL}, nil
	}
	return ctrl.Result{}, nil
}

// patchStatus writes the status when it changed, as a merge patch
// conditional on the resourceVersion the pass started from. The cache can
// be behind the controller's own last write, and a patch of the difference
// from such a stale copy leaves alone the fields that changed since: a
// pool once showed replicas 0 beside "6 of 6 members Ready". A conflict
// says the copy was stale; the controller owns every condition of a pool,
// so the list is written whole.
func (r *Reconciler) patchStatus(ctx context.Context, before, pool *v1.WarmPool) error {
	pool.Status.ObservedGeneration = pool.Generation
	if equality.Semantic.DeepEqual(before.Status, pool.Status) {
		return nil
	}
	err := r.Status().Patch(ctx, pool, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to patch status: %w", err)
	}
	return nil
}

// removeOrphanedMembers deletes the unclaimed members of a pool that is
// gone. Garbage collection deletes them when the pool is deleted normally;
// a delete with propagationPolicy Orphan strips their owner references
// instead, and they would run on, unclaimable, for good. Members the pool
// still controls are left to garbage collection.
func (r *Reconciler) removeOrphanedMembers(ctx context.Context, pool string) error {
	members := &corev1.NamespaceList{}
	if err := r.List(ctx, members, client.MatchingLabels{v1.LabelWarmPool: pool, v1.LabelMember: v1.MemberAvailable}); err != nil {
		return fmt.Errorf("failed to list members of WarmPool %s: %w", pool, err)
	}
	for i := range members.Items {
		ns := &members.Items[i]
		if ns.DeletionTimestamp != nil || metav1.GetControllerOf(ns) != nil {
			continue
		}
		err := r.Delete(ctx, ns, client.Preconditions{UID: &ns.UID, ResourceVersion: &ns.ResourceVersion})
		if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("failed to delete orphaned member %s: %w", ns.Name, err)
		}
	}
	return nil
}

// template returns the pool's template and node pool, or why the pool cannot
// be filled yet (a reason of the Ready condition and a message).
func (r *Reconciler) template(ctx context.Context, pool *v1.WarmPool) (tpl *v1.SandboxTemplate, np *v1.NodePool, reason, problem string, err error) {
	tpl = &v1.SandboxTemplate{}
	if err := r.Get(ctx, types.NamespacedName{Name: pool.Spec.TemplateRef.Name}, tpl); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, v1.ReasonTemplateNotFound, fmt.Sprintf("spec.templateRef names SandboxTemplate %q, which does not exist; create it or fix the reference", pool.Spec.TemplateRef.Name), nil
		}
		return nil, nil, "", "", err
	}
	if c := conditions.Get(tpl, v1.ReadyCondition); c == nil || c.Status != metav1.ConditionTrue || tpl.Status.ObservedGeneration != tpl.Generation {
		msg := fmt.Sprintf("SandboxTemplate %q is not Ready yet", tpl.Name)
		if c != nil && c.Status == metav1.ConditionFalse {
			msg = fmt.Sprintf("SandboxTemplate %q is not Ready: %s", tpl.Name, c.Message)
		}
		return nil, nil, v1.ReasonTemplateNotReady, msg, nil
	}
	if ref := tpl.Spec.NodePoolRef; ref != nil {
		np = &v1.NodePool{}
		if err := r.Get(ctx, types.NamespacedName{Name: ref.Name}, np); err != nil {
			return nil, nil, "", "", fmt.Errorf("failed to get NodePool %s: %w", ref.Name, err)
		}
	}
	return tpl, np, "", "", nil
}

// plan chooses the members to keep and to delete: stale members go at once
// under Recreate; beyond the wanted count, unready members go first, then
// the newest.
func plan(members []sandbox.Member, want int, strategy v1.WarmPoolUpdateStrategyType, hash string) (keep, drop []sandbox.Member) {
	for _, m := range members {
		if strategy == v1.RecreateUpdateStrategy && m.Namespace.Labels[v1.LabelTemplateHash] != hash {
			drop = append(drop, m)
		} else {
			keep = append(keep, m)
		}
	}
	sort.SliceStable(keep, func(i, j int) bool {
		if keep[i].Ready != keep[j].Ready {
			return keep[i].Ready
		}
		return keep[i].Namespace.CreationTimestamp.Before(&keep[j].Namespace.CreationTimestamp)
	})
	if len(keep) > want {
		drop = append(drop, keep[want:]...)
		keep = keep[:want]
	}
	return keep, drop
}

// createAll creates the objects in order; one that exists already (created
// by an earlier, interrupted pass) is left as it is. Members are not
// repaired beyond that: they live until claimed or rolled.
func (r *Reconciler) createAll(ctx context.Context, objs []client.Object) error {
	for _, obj := range objs {
		err := r.Create(ctx, obj)
		if _, isNamespace := obj.(*corev1.Namespace); isNamespace && apierrors.IsAlreadyExists(err) {
			// Only a new member's build starts with its namespace, and its
			// name is new: one that exists is someone else's (a sandbox
			// named like a member, say), never to be built into.
			return fmt.Errorf("namespace %s exists and is not a member of this pool; the next member gets another name", obj.GetName())
		}
		if err == nil || apierrors.IsAlreadyExists(err) {
			continue
		}
		// Admission (the namespace's pod quota, say) can refuse a create
		// before the API server sees the object exists; the cache that made
		// this pass think it missing may just be behind.
		if r.apiReader.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object)) == nil {
			continue
		}
		return fmt.Errorf("failed to create %T %s: %w", obj, obj.GetName(), err)
	}
	return nil
}

// memberName is sandbox-wp-<pool>-<8 hex>, cut to the 63 characters a
// namespace name may have.
func memberName(pool string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	prefix := memberPrefix + pool
	if len(prefix) > 54 {
		prefix = strings.TrimRight(prefix[:54], "-")
	}
	return prefix + "-" + hex.EncodeToString(b)
}

// topUp decides how many of a pool's missing members to build now, given
// the members it has (built or being built), and how long until it looks
// again: all of them when it saw no claim in the last claimQuiet; while
// claims keep coming, only enough to keep a quarter of want, and the rest
// once they pause.
func (r *Reconciler) topUp(pool string, have, missing, want int, now time.Time) (build int, wait time.Duration) {
	last, ok := r.lastClaim.Load(pool)
	if !ok {
		return missing, 0
	}
	if wait = claimQuiet - now.Sub(last.(time.Time)); wait <= 0 {
		return missing, 0
	}
	quarter := (want + 3) / 4
	return min(missing, max(0, quarter-have)), wait
}

// memberEvents enqueues the pool of a member namespace or pod memberBatch
// after the change, and notes when a member is claimed.
func (r *Reconciler) memberEvents() handler.EventHandler {
	enqueue := func(obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if name, ok := obj.GetLabels()[v1.LabelWarmPool]; ok {
			q.AddAfter(reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}, memberBatch)
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(e.Object, q)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if e.ObjectOld.GetLabels()[v1.LabelMember] == v1.MemberAvailable && e.ObjectNew.GetLabels()[v1.LabelMember] == v1.MemberClaimed {
				r.lastClaim.Store(e.ObjectNew.GetLabels()[v1.LabelWarmPool], time.Now())
			}
			enqueue(e.ObjectNew, q)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(e.Object, q)
		},
	}
}

// setStatus counts the members; waiting says the pool is short because it
// waits for claims to pause. A pool short because the scheduler cannot
// place some members says so, with the scheduler's reason for the oldest.
func setStatus(pool *v1.WarmPool, keep []sandbox.Member, want int, waiting bool) {
	ready, unschedulable, why := 0, 0, ""
	for _, m := range keep {
		switch {
		case m.Ready:
			ready++
		case m.Unschedulable != "":
			if unschedulable++; why == "" {
				why = m.Unschedulable
			}
		}
	}
	pool.Status.Replicas, pool.Status.ReadyReplicas = int32(len(keep)), int32(ready)
	if ready >= want {
		conditions.MarkTrue(pool, v1.ReadyCondition, v1.ReasonPoolFull, "%d of %d members Ready", ready, want)
		conditions.Delete(pool, v1.ReconcilingCondition)
		return
	}
	reason, msg := v1.ReasonFilling, fmt.Sprintf("%d of %d members Ready", ready, want)
	if unschedulable > 0 {
		reason = v1.ReasonMembersUnschedulable
		msg += fmt.Sprintf("; %d cannot be scheduled: %s", unschedulable, why)
	}
	if waiting {
		msg += "; topping up when claims pause"
	}
	conditions.MarkFalse(pool, v1.ReadyCondition, reason, "%s", msg)
	conditions.MarkReconciling(pool, reason, "%s", msg)
}

// deletions counts the members a pass deleted, by why: rolled out
// (stale, under Recreate) or beyond replicas.
type deletions struct{ stale, excess int }

func (d *deletions) count(stale bool) {
	if stale {
		d.stale++
	} else {
		d.excess++
	}
}

// recordDeletions emits one event for the members a pass deleted.
func (r *Reconciler) recordDeletions(pool *v1.WarmPool, d deletions, want int) {
	var why []string
	if d.stale > 0 {
		why = append(why, fmt.Sprintf("%d built from an earlier template", d.stale))
	}
	if d.excess > 0 {
		why = append(why, fmt.Sprintf("%d beyond replicas %d", d.excess, want))
	}
	if len(why) > 0 {
		r.recorder.Eventf(pool, nil, corev1.EventTypeNormal, ReasonMembersDeleted, "Delete",
			"deleted %d members: %s", d.stale+d.excess, strings.Join(why, ", "))
	}
}

// recordReadyTransition emits an event when the pool runs into a problem
// (its template, members that cannot be scheduled, refused builds) or out
// of one. A pool
// going from full to filling and back as it is claimed from and topped up
// is its everyday work, and emits none.
func (r *Reconciler) recordReadyTransition(pool *v1.WarmPool, before *metav1.Condition) {
	after := conditions.Get(pool, v1.ReadyCondition)
	if after == nil || (before != nil && before.Reason == after.Reason) {
		return
	}
	switch {
	case problem(after.Reason):
		r.recorder.Eventf(pool, nil, corev1.EventTypeWarning, after.Reason, "Reconcile", "%s", after.Message)
	case before != nil && problem(before.Reason):
		r.recorder.Eventf(pool, nil, corev1.EventTypeNormal, after.Reason, "Reconcile", "%s; recovered from %s", after.Message, before.Reason)
	}
}

func problem(reason string) bool {
	return reason == v1.ReasonTemplateNotReady || reason == v1.ReasonTemplateNotFound || reason == v1.ReasonMembersUnschedulable || reason == v1.ReasonBuildFailed
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

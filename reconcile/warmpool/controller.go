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

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/patch"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/index"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/sandbox"
)

// Condition reasons of a WarmPool.
const (
	ReasonFull             = "PoolFull"
	ReasonFilling          = "Filling"
	ReasonTemplateNotReady = "TemplateNotReady"
)

// memberPrefix starts every member namespace name, so they are told apart
// from the namespaces of cold-started sandboxes.
const memberPrefix = "sandbox-wp-"

// Reconciler reconciles WarmPools.
type Reconciler struct {
	client.Client
	// apiReader confirms, past the cache, that an object exists.
	apiReader client.Reader

	// BlockedEgress are ranges broader egress rules never open.
	BlockedEgress []netip.Prefix

	expected *expectations
}

// NewReconciler returns a Reconciler with the default blocked ranges.
func NewReconciler(mgr ctrl.Manager) *Reconciler {
	return &Reconciler{
		Client: mgr.GetClient(), apiReader: mgr.GetAPIReader(),
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
		For(&v1.WarmPool{}).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(poolOfMember)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(poolOfMember)).
		Watches(&v1.SandboxTemplate{}, handler.EnqueueRequestsFromMapFunc(r.poolsOfTemplate)).
		Complete(r)
}

// +kubebuilder:rbac:groups=agentsandbox.dev,resources=warmpools,verbs=get;list;watch
// +kubebuilder:rbac:groups=agentsandbox.dev,resources=warmpools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agentsandbox.dev,resources=warmpools/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;create;patch;delete

// Reconcile tops the pool up, trims it and rolls stale members.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	pool := &v1.WarmPool{}
	if err := r.Get(ctx, req.NamespacedName, pool); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !pool.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // members go by garbage collection
	}
	patcher := patch.NewSerialPatcher(pool, r.Client)
	defer func() {
		// An object deleted meanwhile has no status left to write; the
		// helper reports that as an aggregate, which FilterOut unpacks.
		err := kerrors.FilterOut(patcher.Patch(ctx, pool, patch.WithOwnedConditions{Conditions: []string{
			v1.ReadyCondition, v1.ReconcilingCondition, v1.StalledCondition,
		}}, patch.WithStatusObservedGeneration{}), apierrors.IsNotFound)
		if err != nil && retErr == nil {
			retErr = fmt.Errorf("failed to patch status: %w", err)
		}
	}()
	pool.Status.Selector = labels.SelectorFromSet(labels.Set{v1.LabelWarmPool: pool.Name, v1.LabelMember: v1.MemberAvailable}).String()

	tpl, nodePool, problem, err := r.template(ctx, pool)
	if err != nil || problem != "" {
		if problem != "" {
			conditions.MarkFalse(pool, v1.ReadyCondition, ReasonTemplateNotReady, "%s", problem)
		}
		return ctrl.Result{}, err
	}
	pool.Status.TemplateHash = tpl.Status.ContentHash

	members, err := r.members(ctx, pool)
	if err != nil {
		return ctrl.Result{}, err
	}
	want := int(ptrOr(pool.Spec.Replicas, 1))
	keep, drop := plan(members, want, pool.Spec.UpdateStrategy.Type, tpl.Status.ContentHash)
	for _, m := range drop {
		// Conditional on the resourceVersion the cache saw: a member a
		// Sandbox claimed meanwhile has changed and is not deleted.
		rv := m.ns.ResourceVersion
		err := r.Delete(ctx, &m.ns, client.Preconditions{UID: &m.ns.UID, ResourceVersion: &rv})
		if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			return ctrl.Result{}, fmt.Errorf("failed to delete member %s: %w", m.ns.Name, err)
		}
	}
	seen := map[string]bool{}
	for _, m := range members {
		seen[m.ns.Name] = true
	}
	for i := len(keep) + r.expected.unseen(pool.Name, seen); i < want; i++ {
		if err := r.createMember(ctx, pool, tpl, nodePool); err != nil {
			return ctrl.Result{}, err
		}
	}
	// A member whose creation was cut short (a crash, a failed write) gets
	// its missing objects.
	for _, m := range keep {
		if !m.complete {
			if err := r.createAll(ctx, sandbox.MemberObjects(pool, m.ns.Name, tpl, nodePool, r.BlockedEgress)[1:]); err != nil {
				return ctrl.Result{}, fmt.Errorf("failed to complete member %s: %w", m.ns.Name, err)
			}
		}
	}
	setStatus(pool, keep, want)
	return ctrl.Result{}, nil
}

// template returns the pool's template and node pool, or why the pool cannot
// be filled yet.
func (r *Reconciler) template(ctx context.Context, pool *v1.WarmPool) (*v1.SandboxTemplate, *v1.NodePool, string, error) {
	tpl := &v1.SandboxTemplate{}
	if err := r.Get(ctx, types.NamespacedName{Name: pool.Spec.TemplateRef.Name}, tpl); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, fmt.Sprintf("SandboxTemplate %q does not exist", pool.Spec.TemplateRef.Name), nil
		}
		return nil, nil, "", err
	}
	if c := conditions.Get(tpl, v1.ReadyCondition); c == nil || c.Status != metav1.ConditionTrue || tpl.Status.ObservedGeneration != tpl.Generation {
		msg := fmt.Sprintf("SandboxTemplate %q is not Ready yet", tpl.Name)
		if c != nil && c.Status == metav1.ConditionFalse {
			msg = fmt.Sprintf("SandboxTemplate %q is not Ready: %s", tpl.Name, c.Message)
		}
		return nil, nil, msg, nil
	}
	if ref := tpl.Spec.NodePoolRef; ref != nil {
		np := &v1.NodePool{}
		if err := r.Get(ctx, types.NamespacedName{Name: ref.Name}, np); err != nil {
			return nil, nil, "", fmt.Errorf("failed to get NodePool %s: %w", ref.Name, err)
		}
		return tpl, np, "", nil
	}
	return tpl, nil, "", nil
}

// member is one unclaimed member as the cache shows it.
type member struct {
	ns       corev1.Namespace
	ready    bool
	complete bool
}

func (r *Reconciler) members(ctx context.Context, pool *v1.WarmPool) ([]member, error) {
	list := &corev1.NamespaceList{}
	if err := r.List(ctx, list, client.MatchingLabels{v1.LabelWarmPool: pool.Name, v1.LabelMember: v1.MemberAvailable}); err != nil {
		return nil, fmt.Errorf("failed to list members: %w", err)
	}
	var out []member
	for _, ns := range list.Items {
		if ns.DeletionTimestamp != nil || !metav1.IsControlledBy(&ns, pool) {
			continue
		}
		pod := &corev1.Pod{}
		err := r.Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: sandbox.PodName}, pod)
		if client.IgnoreNotFound(err) != nil {
			return nil, err
		}
		out = append(out, member{ns: ns, complete: err == nil, ready: err == nil && sandbox.PodReady(pod)})
	}
	return out, nil
}

// plan chooses the members to keep and to delete: stale members go at once
// under Recreate; beyond the wanted count, unready members go first, then
// the newest.
func plan(members []member, want int, strategy v1.WarmPoolUpdateStrategyType, hash string) (keep, drop []member) {
	for _, m := range members {
		if strategy == v1.RecreateUpdateStrategy && m.ns.Labels[v1.LabelTemplateHash] != hash {
			drop = append(drop, m)
		} else {
			keep = append(keep, m)
		}
	}
	sort.SliceStable(keep, func(i, j int) bool {
		if keep[i].ready != keep[j].ready {
			return keep[i].ready
		}
		return keep[i].ns.CreationTimestamp.Before(&keep[j].ns.CreationTimestamp)
	})
	if len(keep) > want {
		drop = append(drop, keep[want:]...)
		keep = keep[:want]
	}
	return keep, drop
}

// createMember creates a member's namespace and objects. Each is a create:
// the name is new, so there is nothing to compare with.
func (r *Reconciler) createMember(ctx context.Context, pool *v1.WarmPool, tpl *v1.SandboxTemplate, nodePool *v1.NodePool) error {
	name := memberName(pool.Name)
	r.expected.created(pool.Name, name)
	if err := r.createAll(ctx, sandbox.MemberObjects(pool, name, tpl, nodePool, r.BlockedEgress)); err != nil {
		return fmt.Errorf("failed to create member %s: %w", name, err)
	}
	return nil
}

// createAll creates the objects in order; one that exists already (created
// by an earlier, interrupted pass) is left as it is. Members are not
// repaired beyond that: they live until claimed or rolled.
func (r *Reconciler) createAll(ctx context.Context, objs []client.Object) error {
	for _, obj := range objs {
		err := r.Create(ctx, obj)
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

func setStatus(pool *v1.WarmPool, keep []member, want int) {
	ready := 0
	for _, m := range keep {
		if m.ready {
			ready++
		}
	}
	pool.Status.Replicas, pool.Status.ReadyReplicas = int32(len(keep)), int32(ready)
	if ready >= want {
		conditions.MarkTrue(pool, v1.ReadyCondition, ReasonFull, "%d of %d members Ready", ready, want)
		conditions.Delete(pool, v1.ReconcilingCondition)
		return
	}
	msg := fmt.Sprintf("%d of %d members Ready", ready, want)
	conditions.MarkFalse(pool, v1.ReadyCondition, ReasonFilling, "%s", msg)
	conditions.MarkReconciling(pool, ReasonFilling, "%s", msg)
}

func ptrOr(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

// poolOfMember maps a member namespace or pod to its pool by label.
func poolOfMember(_ context.Context, obj client.Object) []reconcile.Request {
	name, ok := obj.GetLabels()[v1.LabelWarmPool]
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: name}}}
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

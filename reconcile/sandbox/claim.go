package sandbox

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/index"
)

// placeSandbox decides the namespace a sandbox lives in: the one it already
// has, a warm member it claims now (claimed: the member as the cache
// showed it), or its own for a cold start. An empty namespace means: wait
// for a member.
func (r *Reconciler) placeSandbox(ctx context.Context, sbx *v1.Sandbox, res resolved) (namespace string, claimed *corev1.Namespace, err error) {
	held, err := r.heldNamespaces(ctx, sbx)
	if err != nil {
		return "", nil, err
	}
	if sbx.Status.Namespace != "" {
		// Two reconcilers at once (or one whose status write was lost
		// before another's landed) may each have taken a namespace for the
		// sandbox; the status names the one it has, the first write of a
		// namespace being conditional (patchStatus). Any other is deleted,
		// not handed back: its owner was given access to it.
		for _, ns := range held {
			if ns.Name != sbx.Status.Namespace && ns.DeletionTimestamp == nil {
				if err := environment.DeleteNamespace(ctx, r.Client, ns); err != nil {
					return "", nil, err
				}
			}
		}
		return sbx.Status.Namespace, nil, nil
	}
	// A claim whose status write was lost (a crash, a conflict) is found by
	// the binding the claim created (or the label its relabel put on the
	// namespace); one the cache has not caught up with yet, by what this
	// process remembers claiming. A new process starts from a fresh list,
	// which shows every claim made before it, so together they keep a
	// sandbox from claiming a second member without a read past the cache
	// on the claim path.
	if ns := r.memory.claimOf(sbx); ns != nil {
		recoverLaunch(sbx, ns)
		return ns.Name, nil, nil
	}
	if len(held) > 0 {
		// With several, the first claimed: every reconciler that sees them
		// all picks the same one, and the status write decides.
		ns := held[0]
		recoverLaunch(sbx, ns)
		return ns.Name, nil, nil
	}
	switch {
	case res.warmPool == nil:
		sbx.Status.LaunchType, sbx.Status.LaunchMessage = v1.LaunchCold, ""
		return environment.NamespaceName(sbx.Name), nil, nil
	case len(sbx.Spec.Env) > 0:
		sbx.Status.LaunchType = v1.LaunchCold
		sbx.Status.LaunchMessage = "spec.env overrides the template's environment, which forces a cold start"
		return environment.NamespaceName(sbx.Name), nil, nil
	}
	if member, err := r.claim(ctx, sbx, res); err != nil || member != nil {
		if err != nil {
			return "", nil, err
		}
		return member.Name, member, nil
	}
	if res.warmPool.Spec.WhenEmpty == v1.WhenEmptyWait {
		return "", nil, nil
	}
	sbx.Status.LaunchType = v1.LaunchCold
	sbx.Status.LaunchMessage = fmt.Sprintf("WarmPool %s had no Ready member; started from its template", res.warmPool.Name)
	return environment.NamespaceName(sbx.Name), nil, nil
}

// heldNamespaces returns the namespaces the sandbox holds, first claimed
// first, from the cache: those it created or whose claim is complete
// (relabelled for it and controlled by it), and the members it claimed
// that are still to be relabelled (their owner's binding names the
// sandbox), shown as the relabel will leave them
// (environment.ClaimedNamespace). A namespace labelled for the sandbox's
// name but not its own (an earlier Sandbox's of that name, left by a
// delete that orphaned it), or a member an earlier Sandbox of the name
// claimed, is deleted.
func (r *Reconciler) heldNamespaces(ctx context.Context, sbx *v1.Sandbox) ([]*corev1.Namespace, error) {
	labelled := &corev1.NamespaceList{}
	if err := r.List(ctx, labelled, client.MatchingFields{index.NamespaceSandbox: sbx.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("failed to list namespaces of sandbox %s: %w", sbx.Name, err)
	}
	var held []*corev1.Namespace
	for i := range labelled.Items {
		ns := &labelled.Items[i]
		switch {
		case ownsNamespace(ns, sbx):
			held = append(held, ns)
		case ns.DeletionTimestamp == nil:
			if err := environment.DeleteNamespace(ctx, r.Client, ns); err != nil {
				return nil, err
			}
		}
	}
	claims, err := r.unadoptedClaims(ctx, sbx.Name)
	if err != nil {
		return nil, err
	}
	for _, c := range claims {
		switch {
		case c.binding.Labels[v1.LabelSandboxUID] != string(sbx.UID):
			if err := environment.DeleteNamespace(ctx, r.Client, c.member); err != nil {
				return nil, err
			}
		case !slices.ContainsFunc(held, func(ns *corev1.Namespace) bool { return ns.Name == c.member.Name }):
			held = append(held, environment.ClaimedNamespace(c.member, sbx, environment.ClaimedAt(c.binding)))
		}
	}
	slices.SortFunc(held, func(a, b *corev1.Namespace) int {
		return cmp.Or(environment.ClaimedAt(a).Compare(environment.ClaimedAt(b)), strings.Compare(a.Name, b.Name))
	})
	return held, nil
}

// unadoptedClaim is a member a claim took for a sandbox of some name
// whose namespace, as the cache shows it, is not relabelled yet.
type unadoptedClaim struct {
	binding *rbacv1.RoleBinding
	member  *corev1.Namespace
}

// unadoptedClaims finds, in the cache, the members claimed for sandboxes
// named name that are still to be relabelled and are not being deleted.
func (r *Reconciler) unadoptedClaims(ctx context.Context, name string) ([]unadoptedClaim, error) {
	bindings := &rbacv1.RoleBindingList{}
	if err := r.List(ctx, bindings, client.MatchingFields{index.BindingSandbox: name}); err != nil {
		return nil, fmt.Errorf("failed to list the bindings of sandbox %s: %w", name, err)
	}
	var claims []unadoptedClaim
	for i := range bindings.Items {
		b := &bindings.Items[i]
		if b.Name != environment.OwnerBindingName || b.Labels[v1.LabelMember] != v1.MemberClaimed {
			continue
		}
		ns := &corev1.Namespace{}
		if err := r.Get(ctx, types.NamespacedName{Name: b.Namespace}, ns); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("failed to get member %s: %w", b.Namespace, err)
		}
		if ns.DeletionTimestamp == nil && ns.Labels[v1.LabelMember] == v1.MemberAvailable {
			claims = append(claims, unadoptedClaim{binding: b, member: ns})
		}
	}
	return claims, nil
}

// claim takes a Ready member of the pool for the sandbox with one write:
// the create of the owner's RoleBinding in it (environment.ClaimBinding),
// which grants the owner access and fails when the member has a binding
// already. Two claims racing for one member, or a claim and the pool's
// trim, cannot both create it; the loser tries the next member. The
// member's namespace is relabelled after the sandbox's status write landed
// (relabel), off the path to Ready. It returns the member as the cache
// showed it.
//
// The members are ranked by name alone (availableMembers keeps the names)
// and looked up (their namespace, binding and pod, in the cache) in that
// order only until one can be claimed: a claim's cost does not grow with
// its pool's size beyond ranking the names.
func (r *Reconciler) claim(ctx context.Context, sbx *v1.Sandbox, res resolved) (*corev1.Namespace, error) {
	names := r.available.of(res.warmPool.UID)
	rankForSandbox(names, sbx.Name)
	// A sandbox starts cold only when no member could be claimed: a claim
	// that loses a member to another moves on to the next, which costs one
	// refused create each, and only claims of other processes the cache
	// has not shown yet (or a trim) can win a member first.
	for _, name := range names {
		ns, err := r.availableMember(ctx, res, name)
		if err != nil {
			return nil, err
		}
		// Members this process claimed stay labelled available while
		// their relabels are held: they are passed over here, before
		// their bindings are looked up.
		if ns == nil || !r.memory.take(ns.Name, sbx.Name) {
			continue
		}
		m, binding, err := environment.Inspect(ctx, r.Client, res.warmPool, ns)
		if err != nil {
			r.memory.release(ns.Name)
			return nil, err
		}
		if binding != nil || !m.Ready || len(res.egress.Moved(m.Pod)) > 0 {
			// A member given an old address of the gateway or of a
			// Service is the pool's to replace; handed out, its egress by
			// name would fail.
			r.memory.release(ns.Name)
			continue
		}
		now := metav1.NewTime(time.Now())
		err = r.Create(ctx, environment.ClaimBinding(ns, sbx, now.Time))
		if err != nil {
			at, ours := r.claimedAnyway(ctx, sbx, ns.Name, err)
			if !ours {
				r.memory.release(ns.Name)
				if environment.TakenBefore(err) {
					continue // another claim or the pool's trim took this member, or it is going
				}
				return nil, fmt.Errorf("failed to claim member %s: %w", ns.Name, err)
			}
			now = metav1.NewTime(at)
		}
		r.memory.claimed(sbx, environment.ClaimedNamespace(ns, sbx, now.Time), now.Time, time.Now())
		sbx.Status.LaunchType, sbx.Status.LaunchMessage, sbx.Status.ClaimedAt = v1.LaunchWarm, "", &now
		return ns, nil
	}
	return nil, nil
}

// availableMember is the namespace called name, a copy from the cache,
// when it is an available member of the sandbox's pool that is not being
// deleted and, under the Recreate strategy, built from the template as it
// is; nil otherwise. availableMembers may name a member the cache has
// since seen claimed or going.
func (r *Reconciler) availableMember(ctx context.Context, res resolved, name string) (*corev1.Namespace, error) {
	ns := &corev1.Namespace{}
	if err := r.Get(ctx, types.NamespacedName{Name: name}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("failed to get member %s of WarmPool %s: %w", name, res.warmPool.Name, err)
	}
	pool := res.warmPool
	switch {
	case ns.DeletionTimestamp != nil, ns.Labels[v1.LabelMember] != v1.MemberAvailable,
		ns.Labels[v1.LabelWarmPool] != pool.Name, !environment.MemberOf(ns, pool):
		return nil, nil
	case pool.Spec.UpdateStrategy.Type == v1.RecreateUpdateStrategy && ns.Labels[v1.LabelTemplateHash] != res.template.Status.ContentHash:
		return nil, nil
	}
	return ns, nil
}

// rankForSandbox orders the names of the members a sandbox's claim tries
// by rendezvous hashing of the sandbox's and each member's names.
// Concurrent claims of different sandboxes then start at different
// members instead of all racing for the oldest; and two reconcilers
// claiming for one sandbox at once (two replicas without leader election,
// a lease handover) start at the same member even when their caches
// differ by a few, so the loser finds the winner's claim is its own
// (claimedAnyway) instead of taking a second member, which would be
// deleted.
func rankForSandbox(members []string, sandbox string) {
	type ranked struct {
		rank uint64
		name string
	}
	ranks := make([]ranked, len(members))
	h := fnv.New64a()
	key := append([]byte(sandbox), 0)
	for i, m := range members {
		key = append(key[:len(sandbox)+1], m...)
		h.Reset()
		_, _ = h.Write(key)
		ranks[i] = ranked{h.Sum64(), m}
	}
	slices.SortFunc(ranks, func(a, b ranked) int { return cmp.Compare(b.rank, a.rank) })
	for i := range ranks {
		members[i] = ranks[i].name
	}
}

// claimedAnyway tells whether the member is the sandbox's although the
// create of its claim failed with err, and since when. Refused because the
// binding exists: another reconciler acting at once (both start at the
// same member for a sandbox) may have claimed it for this very sandbox,
// which then needs no second member. Failed otherwise: the create may have
// landed although its answer was lost, and a later pass must find it, not
// claim another.
func (r *Reconciler) claimedAnyway(ctx context.Context, sbx *v1.Sandbox, member string, err error) (time.Time, bool) {
	if environment.TakenBefore(err) && !apierrors.IsAlreadyExists(err) {
		return time.Time{}, false // the member is gone or going
	}
	return r.claimLanded(ctx, sbx, member)
}

// claimLanded reads the member's binding past the cache and tells, with
// the claim's time, whether it is the sandbox's claim.
func (r *Reconciler) claimLanded(ctx context.Context, sbx *v1.Sandbox, member string) (time.Time, bool) {
	b := &rbacv1.RoleBinding{}
	err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: member, Name: environment.OwnerBindingName}, b)
	if err != nil || b.Labels[v1.LabelSandboxUID] != string(sbx.UID) || b.Labels[v1.LabelMember] != v1.MemberClaimed {
		return time.Time{}, false
	}
	return environment.ClaimedAt(b), true
}

// relabel completes the claim this process made for the sandbox (adopt)
// once it is due (relabelQuiet), and says how long until then while it is
// held: until relabelHoldMax, since a pause in claims before then brings
// a pass of its own (releaseHeld). claimed is the member this pass
// claimed, if it did: one built before members lost their pool's owner
// reference is relabelled at once, since its pool's garbage collection
// would take it with the pool.
func (r *Reconciler) relabel(ctx context.Context, sbx *v1.Sandbox, claimed *corev1.Namespace) (time.Duration, error) {
	now := time.Now()
	if claimed != nil && metav1.GetControllerOf(claimed) != nil {
		return 0, r.adoptNow(ctx, sbx, claimed, sbx.Status.ClaimedAt.Time, now)
	}
	c, wait, held := r.memory.heldRelabel(sbx, now)
	if !held || wait > 0 {
		return wait, nil
	}
	member := &corev1.Namespace{}
	if err := r.Get(ctx, types.NamespacedName{Name: c.namespace.Name}, member); err != nil {
		return 0, client.IgnoreNotFound(err)
	}
	if ownsNamespace(member, sbx) {
		r.memory.noteRelabelled(sbx, now)
		return 0, nil
	}
	return 0, r.adoptNow(ctx, sbx, member, c.at, now)
}

// adoptNow adopts member for the sandbox and notes, when it landed, that
// this process relabelled it at now.
func (r *Reconciler) adoptNow(ctx context.Context, sbx *v1.Sandbox, member *corev1.Namespace, claimedAt, now time.Time) error {
	if err := r.adopt(ctx, sbx, member, claimedAt); err != nil {
		return err
	}
	r.memory.noteRelabelled(sbx, now)
	return nil
}

// adopt completes a claim: the member's namespace relabelled for the
// sandbox and controlled by it (environment.ClaimedNamespace), so that it
// goes with the Sandbox. The claim's binding already made it the
// sandbox's, so the write is a plain merge patch.
func (r *Reconciler) adopt(ctx context.Context, sbx *v1.Sandbox, member *corev1.Namespace, claimedAt time.Time) error {
	err := r.Patch(ctx, environment.ClaimedNamespace(member, sbx, claimedAt), client.MergeFrom(member))
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("failed to relabel claimed member %s for sandbox %s: %w", member.Name, sbx.Name, err)
	}
	return nil
}

// adoptClaimed adopts ns when a claim of this sandbox took it and the
// relabel that follows did not land (the reconciler stopped in between),
// and tells whether it did. The binding is read past the cache: this is
// rare and off the claim path.
func (r *Reconciler) adoptClaimed(ctx context.Context, sbx *v1.Sandbox, ns *corev1.Namespace) (bool, error) {
	if ns.DeletionTimestamp != nil || ns.Labels[v1.LabelMember] != v1.MemberAvailable {
		return false, nil
	}
	at, claimed := r.claimLanded(ctx, sbx, ns.Name)
	if !claimed {
		return false, nil
	}
	return true, r.adopt(ctx, sbx, ns, at)
}

// recoverLaunch fills in how a sandbox was launched into ns when the status
// that said so was lost (the reconciler stopped between placing the
// sandbox and writing its status) or says otherwise (another reconciler's
// pass that started it cold wrote it before the claim's own landed): a
// claimed member carries the member label and the claim time, a cold
// namespace neither.
func recoverLaunch(sbx *v1.Sandbox, ns *corev1.Namespace) {
	warm := ns.Labels[v1.LabelMember] == v1.MemberClaimed
	if sbx.Status.LaunchType == v1.LaunchWarm && warm || sbx.Status.LaunchType == v1.LaunchCold && !warm {
		return
	}
	sbx.Status.LaunchMessage = ""
	if warm {
		sbx.Status.LaunchType = v1.LaunchWarm
		if at, err := time.Parse(time.RFC3339Nano, ns.Annotations[v1.AnnotationClaimedAt]); err == nil {
			sbx.Status.ClaimedAt = &metav1.Time{Time: at}
		}
		return
	}
	sbx.Status.LaunchType, sbx.Status.ClaimedAt = v1.LaunchCold, nil
	if sbx.Spec.WarmPoolRef != nil {
		sbx.Status.LaunchMessage = fmt.Sprintf("started from WarmPool %s's template", sbx.Spec.WarmPoolRef.Name)
	}
}

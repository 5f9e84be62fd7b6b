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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/index"
)

// claimAttempts bounds how many members one pass tries when claims race for
// the same member; the losers move on to the next one.
const claimAttempts = 3

// placeSandbox decides the namespace a sandbox lives in: the one it already
// has, a warm member it claims now (justClaimed), or its own for a cold
// start. An empty namespace means: wait for a member.
func (r *Reconciler) placeSandbox(ctx context.Context, sbx *v1.Sandbox, res resolved) (namespace string, justClaimed bool, err error) {
	held, err := r.heldNamespaces(ctx, sbx)
	if err != nil {
		return "", false, err
	}
	if sbx.Status.Namespace != "" {
		r.memory.forgetClaim(sbx.Name)
		// Two reconcilers at once (or one whose status write was lost
		// before another's landed) may each have taken a namespace for the
		// sandbox; the status names the one it has, the first write of a
		// namespace being conditional (patchStatus). Any other is deleted,
		// not handed back: its owner was given access to it.
		for _, ns := range held {
			if ns.Name != sbx.Status.Namespace && ns.DeletionTimestamp == nil {
				if err := r.deleteEnvironment(ctx, ns); err != nil {
					return "", false, err
				}
			}
		}
		return sbx.Status.Namespace, false, nil
	}
	// A claim whose status write was lost (a crash, a conflict) is found by
	// the label the claim put on the namespace; one the cache has not caught
	// up with yet, by what this process remembers claiming. A new process
	// starts from a fresh list, which shows every claim made before it, so
	// together they keep a sandbox from claiming a second member without a
	// read past the cache on the claim path.
	if ns := r.memory.claimOf(sbx); ns != nil {
		recoverLaunch(sbx, ns)
		return ns.Name, false, nil
	}
	if len(held) > 0 {
		// With several, the first claimed: every reconciler that sees them
		// all picks the same one, and the status write decides.
		ns := held[0]
		recoverLaunch(sbx, ns)
		return ns.Name, false, nil
	}
	switch {
	case res.warmPool == nil:
		sbx.Status.LaunchType, sbx.Status.LaunchMessage = v1.LaunchCold, ""
		return environment.NamespaceName(sbx.Name), false, nil
	case len(sbx.Spec.Env) > 0:
		sbx.Status.LaunchType = v1.LaunchCold
		sbx.Status.LaunchMessage = "spec.env overrides the template's environment, which forces a cold start"
		return environment.NamespaceName(sbx.Name), false, nil
	}
	member, err := r.claim(ctx, sbx, res)
	if err != nil || member != "" {
		return member, member != "", err
	}
	if res.warmPool.Spec.WhenEmpty == v1.WhenEmptyWait {
		return "", false, nil
	}
	sbx.Status.LaunchType = v1.LaunchCold
	sbx.Status.LaunchMessage = fmt.Sprintf("WarmPool %s had no Ready member; started from its template", res.warmPool.Name)
	return environment.NamespaceName(sbx.Name), false, nil
}

// heldNamespaces returns the namespaces the sandbox holds, first claimed
// first, from the cache. A namespace labelled for the sandbox's name but
// not its own (an earlier Sandbox's of that name, left by a delete that
// orphaned it) is deleted.
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
			if err := r.deleteEnvironment(ctx, ns); err != nil {
				return nil, err
			}
		}
	}
	claimedAt := func(ns *corev1.Namespace) time.Time {
		at, _ := time.Parse(time.RFC3339Nano, ns.Annotations[v1.AnnotationClaimedAt])
		return at
	}
	slices.SortFunc(held, func(a, b *corev1.Namespace) int {
		return cmp.Or(claimedAt(a).Compare(claimedAt(b)), strings.Compare(a.Name, b.Name))
	})
	return held, nil
}

// claim binds a Ready member of the pool to the sandbox with one write: an
// update of the member's namespace, conditional on the resourceVersion the
// cache saw, that re-labels it and moves its controller reference from the
// pool to the sandbox. Two claims racing for one member cannot both win the
// update; the loser tries the next member.
func (r *Reconciler) claim(ctx context.Context, sbx *v1.Sandbox, res resolved) (string, error) {
	members, err := environment.Members(ctx, r.Client, res.warmPool)
	if err != nil {
		return "", err
	}
	var candidates []*corev1.Namespace
	for _, m := range members {
		stale := res.warmPool.Spec.UpdateStrategy.Type == v1.RecreateUpdateStrategy && m.Namespace.Labels[v1.LabelTemplateHash] != res.template.Status.ContentHash
		if m.Ready && !stale {
			candidates = append(candidates, m.Namespace)
		}
	}
	// Concurrent claims start at different members (by a hash of the
	// sandbox name) instead of all racing for the oldest.
	start := 0
	if len(candidates) > 0 {
		h := fnv.New32a()
		_, _ = h.Write([]byte(sbx.Name))
		start = int(h.Sum32() % uint32(len(candidates)))
	}
	for i, attempts := 0, 0; i < len(candidates) && attempts < claimAttempts; i++ {
		ns := candidates[(start+i)%len(candidates)]
		if !r.memory.take(ns.Name, sbx.Name) {
			continue
		}
		attempts++
		now := metav1.NewTime(time.Now())
		claimed := environment.ClaimedNamespace(ns, sbx, now.Time)
		err := r.Update(ctx, claimed)
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			r.memory.release(ns.Name)
			continue // another claim won this member, or the pool removed it
		}
		if err != nil {
			// The update may have landed although its answer was lost;
			// a later pass must then find it, not claim another.
			if landed := r.claimLanded(ctx, sbx, ns.Name); landed != nil {
				claimed = landed
			} else {
				r.memory.release(ns.Name)
				return "", fmt.Errorf("failed to claim member %s: %w", ns.Name, err)
			}
		}
		r.memory.claimed(sbx, claimed)
		sbx.Status.LaunchType, sbx.Status.LaunchMessage, sbx.Status.ClaimedAt = v1.LaunchWarm, "", &now
		return claimed.Name, nil
	}
	return "", nil
}

// claimLanded reads the member past the cache and returns it when it is
// the sandbox's.
func (r *Reconciler) claimLanded(ctx context.Context, sbx *v1.Sandbox, name string) *corev1.Namespace {
	ns := &corev1.Namespace{}
	if err := r.apiReader.Get(ctx, types.NamespacedName{Name: name}, ns); err != nil || !metav1.IsControlledBy(ns, sbx) {
		return nil
	}
	return ns
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

package warmpool

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
)

// plan chooses the members to keep and to delete: outdated members go at
// once; beyond the wanted count, unready members go first, then the
// newest.
func plan(members []environment.Member, want int, fresh freshness) (keep, drop []environment.Member) {
	for _, m := range members {
		if fresh.outdated(m) != upToDate {
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

// freshness is what a member is held to whatever the pool's size.
type freshness struct {
	strategy v1.WarmPoolUpdateStrategyType
	// hash is the content hash of the template as it is.
	hash   string
	egress environment.Egress
}

// dropReason is why a pass deletes a member.
type dropReason int

const (
	upToDate dropReason = iota
	// rolled: built from an earlier template, under Recreate.
	rolled
	// egressMoved: its pod was given an address of the egress gateway or
	// of a service rule's Service that the Service no longer has (it was
	// recreated), so its egress by name would fail; under either strategy.
	egressMoved
	// beyondReplicas: more members than the pool wants.
	beyondReplicas
)

// outdated tells why m must go whatever the pool's size; upToDate when it
// need not.
func (f freshness) outdated(m environment.Member) dropReason {
	if f.strategy == v1.RecreateUpdateStrategy && m.Namespace.Labels[v1.LabelTemplateHash] != f.hash {
		return rolled
	}
	if len(f.egress.Moved(m.Pod)) > 0 {
		return egressMoved
	}
	return upToDate
}

// createAll creates the objects in order; one that exists already (created
// by an earlier, interrupted pass) is left as it is. Members are not
// repaired beyond that: they live until claimed or rolled.
func (r *Reconciler) createAll(ctx context.Context, objs []client.Object) error {
	for _, obj := range objs {
		err := r.Create(ctx, obj)
		if ns, isNamespace := obj.(*corev1.Namespace); isNamespace && apierrors.IsAlreadyExists(err) {
			// Only a new member's build starts with its namespace, and its
			// name is new: one that exists is someone else's (a sandbox
			// named like a member, say), never to be built into, unless it
			// is this very create's. client-go sends a create again when the
			// API server answers it 5xx with Retry-After, as it does (500,
			// ServerTimeout) when etcd did not confirm the write in time,
			// which etcd may still make. Under load a pool's refill once met
			// a namespace of its new member's name, likely so.
			ours, err := r.madeByThisCreate(ctx, ns)
			if err != nil {
				return fmt.Errorf("namespace %s exists, and reading whose it is failed: %w", obj.GetName(), err)
			}
			if !ours {
				return fmt.Errorf("namespace %s exists and is not a member of this pool; the next member gets another name", obj.GetName())
			}
			continue
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

// madeByThisCreate tells whether the namespace called like want is the one
// want describes: an available member of the same pool and template, not
// being deleted. Nothing but this build gives a new name those labels.
func (r *Reconciler) madeByThisCreate(ctx context.Context, want *corev1.Namespace) (bool, error) {
	if want.Labels[v1.LabelWarmPoolUID] == "" {
		return false, nil
	}
	got := &corev1.Namespace{}
	if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
		// Gone again since the create: not this build's to go on with.
		return false, client.IgnoreNotFound(err)
	}
	if got.DeletionTimestamp != nil {
		return false, nil
	}
	for _, label := range []string{v1.LabelWarmPoolUID, v1.LabelMember, v1.LabelTemplateHash} {
		if got.Labels[label] != want.Labels[label] {
			return false, nil
		}
	}
	return true, nil
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
// the members it has (built or being built) and its last claims, and how
// long until it looks again: all of them unless the claims are a burst
// still going on; during one, only enough to keep a quarter of want, and
// the rest once claims pause for claimQuiet.
func topUp(claims claimRun, have, missing, want int, now time.Time) (build int, wait time.Duration) {
	if !claims.inBurst(now) {
		return missing, 0
	}
	if wait = claimQuiet - now.Sub(claims.last()); wait <= 0 {
		return missing, 0
	}
	quarter := (want + 3) / 4
	return min(missing, max(0, quarter-have)), wait
}

// claimRun is what a pool remembers of its last claims: their times
// (oldest first, at most burstClaims) and whether they are a burst. A
// burst begins with burstClaims claims within claimQuiet and goes on while
// each claim comes within claimQuiet of the one before, so claims that
// reach the controller unevenly (a busy API server delivers them in
// clumps) do not end it halfway; it ends once claims pause for claimQuiet.
type claimRun struct {
	times []time.Time
	burst bool
}

// add returns the run with one more claim, made at at.
func (c claimRun) add(at time.Time) claimRun {
	goesOn := c.inBurst(at)
	times := append(slices.Clone(c.times), at)
	if len(times) > burstClaims {
		times = times[len(times)-burstClaims:]
	}
	begins := len(times) == burstClaims && at.Sub(times[0]) <= claimQuiet
	return claimRun{times: times, burst: goesOn || begins}
}

// inBurst tells whether the claims are a burst that has not paused for
// claimQuiet by now.
func (c claimRun) inBurst(now time.Time) bool {
	return c.burst && now.Sub(c.last()) <= claimQuiet
}

// last is the time of the last claim; the zero time when there was none.
func (c claimRun) last() time.Time {
	if len(c.times) == 0 {
		return time.Time{}
	}
	return c.times[len(c.times)-1]
}

// trim deletes the members plan dropped (takeAndDelete) and counts them
// by why; a member a Sandbox claimed meanwhile is not deleted.
func (r *Reconciler) trim(ctx context.Context, drop []environment.Member, fresh freshness) (deletions, error) {
	deleted := deletions{}
	for _, m := range drop {
		took, err := r.takeAndDelete(ctx, m.Namespace)
		if err != nil {
			return deleted, err
		}
		if took {
			why := fresh.outdated(m)
			if why == upToDate {
				why = beyondReplicas
			}
			deleted[why]++
		}
	}
	return deleted, nil
}

// takeAndDelete takes a member for the pool, with the create of its trim
// binding (environment.TrimBinding), and deletes it; it tells whether it
// did. A claim that created the member's binding first has it instead,
// and a member going already needs nobody.
func (r *Reconciler) takeAndDelete(ctx context.Context, ns *corev1.Namespace) (bool, error) {
	err := r.Create(ctx, environment.TrimBinding(ns))
	switch {
	case environment.TakenBefore(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("failed to take member %s to delete it: %w", ns.Name, err)
	}
	return true, environment.DeleteNamespace(ctx, r.Client, ns)
}

// abandonedClaim is how long a claimed member may wait for its relabel
// before the pool asks whether its claim was abandoned. The relabel
// follows the claim within milliseconds; a reconciler that stopped in
// between does it on its next pass of the sandbox.
const abandonedClaim = 30 * time.Second

// settleTaken finishes what took members and stopped before the end: a
// trim that took a member deletes it; a claim whose Sandbox is gone, or
// whose Sandbox's status names another namespace (it lost to another
// reconciler's claim), leaves a member nobody will relabel, which is
// deleted too, not handed back: its owner had access. A claim younger than
// abandonedClaim is left alone; settleTaken says how soon the youngest
// such claim reaches that age.
func (r *Reconciler) settleTaken(ctx context.Context, taken []environment.Taken, now time.Time) (time.Duration, error) {
	var next time.Duration
	for _, t := range taken {
		if t.Binding.Labels[v1.LabelMember] == v1.MemberClaimed {
			if wait := abandonedClaim - now.Sub(environment.ClaimedAt(t.Binding)); wait > 0 {
				if next == 0 || wait < next {
					next = wait
				}
				continue
			}
			abandoned, err := r.claimAbandoned(ctx, t)
			if err != nil {
				return next, err
			}
			if !abandoned {
				continue
			}
		}
		if err := environment.DeleteNamespace(ctx, r.Client, t.Namespace); err != nil {
			return next, err
		}
	}
	return next, nil
}

// claimAbandoned tells whether a claimed member will never be relabelled:
// its Sandbox is gone, or names another namespace. The Sandbox is read
// past the cache, which may lag behind a Sandbox's create; this is rare.
func (r *Reconciler) claimAbandoned(ctx context.Context, t environment.Taken) (bool, error) {
	sbx := &v1.Sandbox{}
	err := r.apiReader.Get(ctx, types.NamespacedName{Name: t.Binding.Labels[v1.LabelSandbox]}, sbx)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("failed to get the sandbox that claimed member %s: %w", t.Namespace.Name, err)
	}
	return string(sbx.UID) != t.Binding.Labels[v1.LabelSandboxUID] ||
		sbx.Status.Namespace != "" && sbx.Status.Namespace != t.Namespace.Name, nil
}

// memberBuild is one member's objects still to create.
type memberBuild struct {
	member string
	objs   []client.Object
}

// build creates the members' objects, up to concurrentBuilds at once, and
// returns whether a build was refused because its brand-new namespace is
// not complete yet (its quota not counted yet, say), which is no failure,
// and the first build that failed. Builds are independent: one that fails
// leaves its member incomplete for a later pass and does not cut the
// others short.
func (r *Reconciler) build(ctx context.Context, pool string, builds []memberBuild) (settling bool, err error) {
	var group errgroup.Group
	group.SetLimit(concurrentBuilds)
	var refused atomic.Bool
	for _, b := range builds {
		r.memory.building(pool, b.member)
		group.Go(func() error {
			err := r.createAll(ctx, b.objs)
			if err != nil {
				r.memory.failed(pool, b.member)
			}
			if _, ok := environment.NamespaceSettling(err); ok {
				refused.Store(true)
				return nil
			}
			if err != nil {
				return fmt.Errorf("failed to build member %s: %w", b.member, err)
			}
			return nil
		})
	}
	err = group.Wait()
	return refused.Load(), err
}

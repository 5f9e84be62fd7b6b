package nodepool_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/fluxcd/pkg/runtime/conditions"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

var (
	dedicated = corev1.Taint{Key: "sandbox.test/dedicated", Value: "gvisor", Effect: corev1.TaintEffectNoSchedule}
	runtime   = corev1.Taint{Key: "sandbox.test/runtime", Value: "runsc", Effect: corev1.TaintEffectPreferNoSchedule}
)

// spec is a pool of group's nodes with the given taints.
func spec(group string, taints ...corev1.Taint) v1.NodePoolSpec {
	s := v1.NodePoolSpec{RuntimeHandler: "runsc", NodeSelector: map[string]string{groupLabel: group}}
	for _, t := range taints {
		s.Taints = append(s.Taints, v1.NodePoolTaint{Key: t.Key, Value: t.Value, Effect: v1.TaintEffect(t.Effect)})
	}
	return s
}

// TestPoolBecomesRuntimeClassAndLabelsItsNodes is the main path: the
// RuntimeClass mirrors the spec and is owned by the pool, the selected
// nodes (and only they) join, the status counts them, and each transition
// is an event.
func TestPoolBecomesRuntimeClassAndLabelsItsNodes(t *testing.T) {
	e := setup(t)
	group := testcluster.Name("grp")
	n1, n2 := e.node(group), e.node(group)
	outsider := e.node(testcluster.Name("grp"))
	s := spec(group, dedicated)
	s.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	pool := e.pool("", s)

	e.eventually("RuntimeClass "+pool.Name+" mirrors the pool", func(ctx context.Context) error {
		live, err := e.getPool(ctx, pool)
		if err != nil {
			return err
		}
		rc := &nodev1.RuntimeClass{}
		if err := e.c.Get(ctx, client.ObjectKey{Name: pool.Name}, rc); err != nil {
			return err
		}
		if rc.Handler != "runsc" {
			return fmt.Errorf("handler %q", rc.Handler)
		}
		if rc.Scheduling == nil || len(rc.Scheduling.NodeSelector) != 1 || rc.Scheduling.NodeSelector[groupLabel] != group {
			return fmt.Errorf("scheduling %+v", rc.Scheduling)
		}
		wantTol := corev1.Toleration{Key: dedicated.Key, Operator: corev1.TolerationOpEqual, Value: dedicated.Value, Effect: dedicated.Effect}
		if len(rc.Scheduling.Tolerations) != 1 || rc.Scheduling.Tolerations[0] != wantTol {
			return fmt.Errorf("tolerations %+v, want [%+v]", rc.Scheduling.Tolerations, wantTol)
		}
		if rc.Overhead == nil || rc.Overhead.PodFixed.Cpu().String() != "250m" || rc.Overhead.PodFixed.Memory().String() != "64Mi" {
			return fmt.Errorf("overhead %+v", rc.Overhead)
		}
		owner := metav1.GetControllerOf(rc)
		if owner == nil || owner.Kind != "NodePool" || owner.Name != pool.Name || owner.UID != live.UID {
			return fmt.Errorf("controller %+v, want NodePool %s %s", owner, pool.Name, live.UID)
		}
		return nil
	})
	e.member(n1, pool, dedicated)
	e.member(n2, pool, dedicated)
	e.notMember(outsider)

	got := e.poolStatus(pool, "Ready with 2 nodes", all(ready(metav1.ConditionTrue, v1.ReasonSucceeded, false), counts(2, 2)))
	if got.Status.RuntimeClassName != pool.Name {
		t.Errorf("status.runtimeClassName = %q, want %q", got.Status.RuntimeClassName, pool.Name)
	}
	if !controllerutil.ContainsFinalizer(got, v1.FinalizerNodePool) {
		t.Errorf("finalizers %v, want %s", got.Finalizers, v1.FinalizerNodePool)
	}

	// At least, not exactly: another test package may run this controller
	// against the same cluster at the same time.
	e.eventually("an event per transition", func(ctx context.Context) error {
		return e.events(ctx, got, map[string]int{"RuntimeClassCreated": 1, "NodeLabelled": 2, v1.ReasonSucceeded: 1})
	})
}

// events checks that there are at least the wanted number of events of each
// reason about the pool.
func (e *env) events(ctx context.Context, pool *v1.NodePool, want map[string]int) error {
	list := &eventsv1.EventList{}
	if err := e.c.List(ctx, list, client.InNamespace(metav1.NamespaceDefault)); err != nil {
		return err
	}
	got := map[string]int{}
	for _, ev := range list.Items {
		if ev.Regarding.UID == pool.UID {
			got[ev.Reason]++
		}
	}
	for reason, n := range want {
		if got[reason] < n {
			return fmt.Errorf("events by reason %v, want at least %v", got, want)
		}
	}
	return nil
}

// TestNodeThatStopsMatchingLeavesThePool relabels a member so the selector
// no longer matches: it loses the pool label and taint, keeps its other
// taint, and the count drops.
func TestNodeThatStopsMatchingLeavesThePool(t *testing.T) {
	e := setup(t)
	group := testcluster.Name("grp")
	stays, leaves := e.node(group), e.node(group)
	pool := e.pool("", spec(group, dedicated))
	e.member(stays, pool, dedicated)
	e.member(leaves, pool, dedicated)
	e.poolStatus(pool, "Ready with 2 nodes", all(ready(metav1.ConditionTrue, v1.ReasonSucceeded, false), counts(2, 2)))

	e.patchNode(leaves, func(n *corev1.Node) { n.Labels[groupLabel] = testcluster.Name("elsewhere") })

	e.notMember(leaves)
	e.member(stays, pool, dedicated)
	e.poolStatus(pool, "Ready with 1 node", all(ready(metav1.ConditionTrue, v1.ReasonSucceeded, false), counts(1, 1)))
}

// patchNode changes a node the way an administrator would.
func (e *env) patchNode(n *corev1.Node, mutate func(*corev1.Node)) {
	e.t.Helper()
	ctx := context.Background()
	live := &corev1.Node{}
	if err := e.c.Get(ctx, client.ObjectKeyFromObject(n), live); err != nil {
		e.t.Fatal(err)
	}
	orig := live.DeepCopy()
	mutate(live)
	if err := e.c.Patch(ctx, live, client.MergeFrom(orig)); err != nil {
		e.t.Fatalf("patch node %s: %v", n.Name, err)
	}
}

// TestChangedTaintsReplaceTheOldOnes swaps the pool's taint: the nodes and
// the RuntimeClass follow, and the old taint does not linger.
func TestChangedTaintsReplaceTheOldOnes(t *testing.T) {
	e := setup(t)
	group := testcluster.Name("grp")
	n1, n2 := e.node(group), e.node(group)
	pool := e.pool("", spec(group, dedicated))
	e.member(n1, pool, dedicated)
	e.member(n2, pool, dedicated)

	live, err := e.getPool(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	orig := live.DeepCopy()
	live.Spec.Taints = spec(group, runtime).Taints
	if err := e.c.Patch(context.Background(), live, client.MergeFrom(orig)); err != nil {
		t.Fatalf("patch NodePool: %v", err)
	}

	e.member(n1, pool, runtime)
	e.member(n2, pool, runtime)
	e.eventually("RuntimeClass tolerates the new taint only", func(ctx context.Context) error {
		rc := &nodev1.RuntimeClass{}
		if err := e.c.Get(ctx, client.ObjectKey{Name: pool.Name}, rc); err != nil {
			return err
		}
		if rc.Scheduling == nil || len(rc.Scheduling.Tolerations) != 1 || rc.Scheduling.Tolerations[0].Key != runtime.Key {
			return fmt.Errorf("scheduling %+v", rc.Scheduling)
		}
		return nil
	})
	e.poolStatus(pool, "Ready at the new generation", ready(metav1.ConditionTrue, v1.ReasonSucceeded, false))
}

// TestDeletedPoolReleasesItsNodes deletes a pool: the finalizer holds it
// until every node is released, then the garbage collector removes the
// RuntimeClass.
func TestDeletedPoolReleasesItsNodes(t *testing.T) {
	e := setup(t)
	group := testcluster.Name("grp")
	n1, n2 := e.node(group), e.node(group)
	pool := e.pool("", spec(group, dedicated, runtime))
	e.member(n1, pool, dedicated, runtime)
	e.member(n2, pool, dedicated, runtime)
	e.poolStatus(pool, "Ready", ready(metav1.ConditionTrue, v1.ReasonSucceeded, false))

	e.deletePool(pool)

	e.notMember(n1)
	e.notMember(n2)
	e.eventually("RuntimeClass "+pool.Name+" garbage collected", func(ctx context.Context) error {
		err := e.c.Get(ctx, client.ObjectKey{Name: pool.Name}, &nodev1.RuntimeClass{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (err %v)", err)
	})
}

// TestNoReadyNodesUntilOneMatches selects nothing at first: the pool says
// so and that nothing can schedule, and turns Ready when a node arrives.
func TestNoReadyNodesUntilOneMatches(t *testing.T) {
	e := setup(t)
	group := testcluster.Name("grp")
	pool := e.pool("", spec(group, dedicated))

	got := e.poolStatus(pool, "not Ready, no nodes", all(ready(metav1.ConditionFalse, v1.ReasonNoReadyNodes, false), counts(0, 0)))
	msg := conditions.GetMessage(got, v1.ReadyCondition)
	for _, part := range []string{"matched 0 nodes, none Ready", "cannot schedule"} {
		if !strings.Contains(msg, part) {
			t.Errorf("Ready message %q does not contain %q", msg, part)
		}
	}

	n := e.node(group)
	e.member(n, pool, dedicated)
	e.poolStatus(pool, "Ready with the new node", all(ready(metav1.ConditionTrue, v1.ReasonSucceeded, false), counts(1, 1)))
}

// TestSecondPoolDoesNotStealANode points two pools at one node: the second
// reports the conflict and leaves the node alone, and takes it once the
// first pool is gone.
func TestSecondPoolDoesNotStealANode(t *testing.T) {
	e := setup(t)
	group := testcluster.Name("grp")
	n := e.node(group)
	first := e.pool("", spec(group, dedicated))
	e.member(n, first, dedicated)
	e.poolStatus(first, "Ready", ready(metav1.ConditionTrue, v1.ReasonSucceeded, false))

	second := e.pool("", spec(group, runtime))
	got := e.poolStatus(second, "in conflict", ready(metav1.ConditionFalse, v1.ReasonNodeConflict, true))
	msg := conditions.GetMessage(got, v1.ReadyCondition)
	if !strings.Contains(msg, n.Name) || !strings.Contains(msg, first.Name) {
		t.Errorf("Ready message %q does not name node %s and pool %s", msg, n.Name, first.Name)
	}
	e.member(n, first, dedicated)

	e.deletePool(first)
	e.member(n, second, runtime)
	e.poolStatus(second, "Ready once the node is free", ready(metav1.ConditionTrue, v1.ReasonSucceeded, false))
}

// TestPoolsCreatedAtOnceShareNoNode creates two pools that select the same
// nodes at once, which the controller reconciles concurrently: each node
// ends up in one pool, with that pool's taints only, and a pool that did
// not get every node it selects reports the others as held by the other
// pool, whichever pass labelled them first.
func TestPoolsCreatedAtOnceShareNoNode(t *testing.T) {
	e := setup(t)
	group := testcluster.Name("grp")
	var nodes []*corev1.Node
	for range 6 {
		nodes = append(nodes, e.node(group))
	}
	pools := []*v1.NodePool{e.pool("", spec(group, dedicated)), e.pool("", spec(group, runtime))}
	taints := map[string]corev1.Taint{pools[0].Name: dedicated, pools[1].Name: runtime}

	held := map[string]int{}
	for _, n := range nodes {
		var holder string
		e.eventually("node "+n.Name+" in one of the pools", func(ctx context.Context) error {
			got := &corev1.Node{}
			if err := e.c.Get(ctx, client.ObjectKeyFromObject(n), got); err != nil {
				return err
			}
			holder = got.Labels[v1.LabelNodePool]
			if _, ok := taints[holder]; !ok {
				return fmt.Errorf("label %s = %q", v1.LabelNodePool, holder)
			}
			return nil
		})
		p := pools[slices.IndexFunc(pools, func(p *v1.NodePool) bool { return p.Name == holder })]
		e.member(n, p, taints[holder])
		held[holder]++
	}
	t.Logf("nodes held: %v", held)
	for i, p := range pools {
		other := pools[1-i]
		if held[p.Name] == len(nodes) {
			e.poolStatus(p, "Ready with every node", ready(metav1.ConditionTrue, v1.ReasonSucceeded, false))
			continue
		}
		got := e.poolStatus(p, "in conflict", ready(metav1.ConditionFalse, v1.ReasonNodeConflict, true))
		if msg := conditions.GetMessage(got, v1.ReadyCondition); !strings.Contains(msg, other.Name) {
			t.Errorf("NodePool %s holds %d of %d nodes; its Ready message %q does not name %s", p.Name, held[p.Name], len(nodes), msg, other.Name)
		}
	}
}

// TestForeignRuntimeClassIsLeftAlone creates a RuntimeClass of the pool's
// name first: the pool stalls without touching it or any node, and
// recovers when it is deleted.
func TestForeignRuntimeClassIsLeftAlone(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	name := testcluster.Name("np")
	foreign := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: "foreign"}
	if err := e.c.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.c.Delete(context.Background(), foreign) })
	group := testcluster.Name("grp")
	n := e.node(group)
	pool := e.pool(name, spec(group, dedicated))

	got := e.poolStatus(pool, "in conflict", ready(metav1.ConditionFalse, v1.ReasonRuntimeClassConflict, true))
	if msg := conditions.GetMessage(got, v1.ReadyCondition); !strings.Contains(msg, "RuntimeClass "+name) {
		t.Errorf("Ready message %q does not name RuntimeClass %s", msg, name)
	}
	rc := &nodev1.RuntimeClass{}
	if err := e.c.Get(ctx, client.ObjectKey{Name: name}, rc); err != nil {
		t.Fatal(err)
	}
	if rc.Handler != "foreign" || len(rc.OwnerReferences) != 0 || rc.Scheduling != nil {
		t.Errorf("foreign RuntimeClass changed: %+v", rc)
	}
	e.notMember(n)

	if err := e.c.Delete(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	e.member(n, pool, dedicated)
	e.poolStatus(pool, "Ready once the name is free", ready(metav1.ConditionTrue, v1.ReasonSucceeded, false))
}

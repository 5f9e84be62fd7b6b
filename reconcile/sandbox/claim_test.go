package sandbox_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
)

// A claim is the create of the owner's binding in a member; the member's
// namespace is relabelled for the sandbox after it is Ready. These tests
// leave a member as a reconciler that stopped between the two writes
// would: claimed by its binding, still labelled available and controlled
// by its pool.

// TestUnrelabelledClaimIsCompleted: the pool neither counts nor trims a
// member a claim took, even scaled to zero, and the sandbox's next pass
// finds its claim by the binding and completes it.
func TestUnrelabelledClaimIsCompleted(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	ctx := context.Background()
	tpl := newTemplate(t, c, nil)
	pool := newPool(t, c, tpl, 2, nil)
	waitPoolReady(t, c, pool, 2)
	sbx := waitingSandbox(t, c, tpl)
	members := availableMembers(t, c, pool)
	taken, other := members[0], members[1]
	create(t, c, environment.ClaimBinding(&taken, sbx, time.Now()))

	setReplicas(t, c, pool, 0)
	testcluster.Eventually(t, "the untaken member trimmed", func() (bool, string) {
		ns := &corev1.Namespace{}
		err := c.Get(ctx, client.ObjectKeyFromObject(&other), ns)
		return apierrors.IsNotFound(err) || err == nil && ns.DeletionTimestamp != nil, "still live"
	})
	got := &v1.WarmPool{}
	testcluster.Eventually(t, "the pool at 0 members", func() (bool, string) {
		err := c.Get(ctx, client.ObjectKeyFromObject(pool), got)
		return err == nil && got.Status.Replicas == 0 && got.Status.ObservedGeneration == got.Generation,
			fmt.Sprintf("%d members, %v", got.Status.Replicas, err)
	})
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(&taken), ns); err != nil || ns.DeletionTimestamp != nil {
		t.Fatalf("the pool deleted the member a claim took: %v, deleting since %v", err, ns.DeletionTimestamp)
	}

	requestReconcile(t, c, sbx)
	ready := waitCondition(t, c, sbx, metav1.ConditionTrue, v1.ReasonPodReady)
	if ready.Status.Namespace != taken.Name || ready.Status.LaunchType != v1.LaunchWarm || ready.Status.ClaimedAt == nil {
		t.Errorf("the sandbox runs in %s (%s, claimed at %v), want the member its claim took, %s", ready.Status.Namespace, ready.Status.LaunchType, ready.Status.ClaimedAt, taken.Name)
	}
	waitRelabelled(t, c, ready)
	assertIsolated(t, c, ready)
}

// TestDeletedSandboxLeavesNoTakenMember: a sandbox deleted before its
// claim's relabel takes the member with it, and a claim whose sandbox
// never existed (or is long gone) is deleted by the pool; neither member
// goes back into the pool, which refills.
func TestDeletedSandboxLeavesNoTakenMember(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	tpl := newTemplate(t, c, nil)
	pool := newPool(t, c, tpl, 2, nil)
	waitPoolReady(t, c, pool, 2)
	sbx := waitingSandbox(t, c, tpl)
	members := availableMembers(t, c, pool)
	create(t, c, environment.ClaimBinding(&members[0], sbx, time.Now()))
	ghost := &v1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("ghost"), UID: "00000000-0000-4000-8000-000000000000"},
		Spec:       v1.SandboxSpec{Owner: "alice@example.com"},
	}
	create(t, c, environment.ClaimBinding(&members[1], ghost, time.Now().Add(-time.Hour)))

	if err := c.Delete(context.Background(), sbx); err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		testcluster.Eventually(t, "taken member "+m.Name+" deleted", func() (bool, string) {
			ns := &corev1.Namespace{}
			err := c.Get(context.Background(), client.ObjectKeyFromObject(&m), ns)
			return apierrors.IsNotFound(err) || err == nil && ns.DeletionTimestamp != nil, "still live"
		})
	}
	testcluster.Eventually(t, "two new members", func() (bool, string) {
		var live []string
		for _, m := range availableMembers(t, c, pool) {
			if m.DeletionTimestamp == nil {
				live = append(live, m.Name)
			}
		}
		return len(live) == 2, fmt.Sprintf("live members %v", live)
	})
	for _, m := range availableMembers(t, c, pool) {
		if m.DeletionTimestamp == nil && slices.ContainsFunc(members, func(taken corev1.Namespace) bool { return taken.Name == m.Name }) {
			t.Errorf("taken member %s is back in the pool", m.Name)
		}
	}
	waitPoolReady(t, c, pool, 2)
}

// TestSandboxDeletedWhileItsRelabelIsHeld: a sandbox deleted right after
// its claim, while its member still carries the member labels (the
// relabel waits for claims to pause), goes as any other: its member is
// relabelled, its pod's deletion is followed through the namespace's
// label and the Sandbox is let go, and the namespace goes with it, never
// back into the pool.
func TestSandboxDeletedWhileItsRelabelIsHeld(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	ctx := context.Background()
	tpl := newTemplate(t, c, nil)
	pool := newPool(t, c, tpl, 1, nil)
	waitPoolReady(t, c, pool, 1)
	sbx := newSandbox(t, c, tpl, claimFrom(pool))
	ready := waitCondition(t, c, sbx, metav1.ConditionTrue, v1.ReasonPodReady)
	member := &corev1.Namespace{}
	if err := c.Get(ctx, types.NamespacedName{Name: ready.Status.Namespace}, member); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, ready); err != nil {
		t.Fatal(err)
	}
	if member.Labels[v1.LabelMember] != v1.MemberAvailable {
		t.Fatalf("member %s was relabelled (%v) before the sandbox's delete: the relabel is held a second after the claim", member.Name, member.Labels)
	}
	testcluster.Eventually(t, "sandbox "+sbx.Name+" gone", func() (bool, string) {
		err := c.Get(ctx, client.ObjectKeyFromObject(sbx), sbx)
		return apierrors.IsNotFound(err), fmt.Sprintf("phase %s, finalizers %v, %v", sbx.Status.Phase, sbx.Finalizers, err)
	})
	testcluster.Eventually(t, "its namespace "+member.Name+" deleted", func() (bool, string) {
		ns := &corev1.Namespace{}
		err := c.Get(ctx, client.ObjectKeyFromObject(member), ns)
		return apierrors.IsNotFound(err) || err == nil && ns.DeletionTimestamp != nil, fmt.Sprintf("labels %v, %v", ns.Labels, err)
	})
	waitPoolReady(t, c, pool, 1)
	for _, m := range availableMembers(t, c, pool) {
		if m.Name == member.Name && m.DeletionTimestamp == nil {
			t.Errorf("the deleted sandbox's member %s is back in the pool", m.Name)
		}
	}
}

// waitingSandbox is a sandbox of tpl waiting for a member of an empty pool
// (whenEmpty: Wait), placed nowhere.
func waitingSandbox(t *testing.T, c client.Client, tpl *v1.SandboxTemplate) *v1.Sandbox {
	t.Helper()
	empty := newPool(t, c, tpl, 0, func(p *v1.WarmPool) { p.Spec.WhenEmpty = v1.WhenEmptyWait })
	sbx := newSandbox(t, c, tpl, claimFrom(empty))
	return waitCondition(t, c, sbx, metav1.ConditionFalse, v1.ReasonWaitingForMember)
}

// availableMembers are the pool's namespaces labelled available.
func availableMembers(t *testing.T, c client.Client, pool *v1.WarmPool) []corev1.Namespace {
	t.Helper()
	list := &corev1.NamespaceList{}
	if err := c.List(context.Background(), list, client.MatchingLabels{v1.LabelWarmPool: pool.Name, v1.LabelMember: v1.MemberAvailable}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func setReplicas(t *testing.T, c client.Client, pool *v1.WarmPool, replicas int32) {
	t.Helper()
	patch := client.MergeFrom(pool.DeepCopy())
	pool.Spec.Replicas = ptr.To(replicas)
	if err := c.Patch(context.Background(), pool, patch); err != nil {
		t.Fatal(err)
	}
}

// requestReconcile asks the controller to look at sbx now.
func requestReconcile(t *testing.T, c client.Client, sbx *v1.Sandbox) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1.AnnotationReconcileRequestedAt, time.Now().Format(time.RFC3339Nano))
	if err := c.Patch(context.Background(), &v1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: sbx.Name}}, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

package sandbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
)

func newPool(t *testing.T, c client.Client, tpl *v1.SandboxTemplate, replicas int32, mutate func(*v1.WarmPool)) *v1.WarmPool {
	t.Helper()
	pool := &v1.WarmPool{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("pool")},
		Spec:       v1.WarmPoolSpec{TemplateRef: v1.LocalObjectReference{Name: tpl.Name}, Replicas: ptr.To(replicas)},
	}
	if mutate != nil {
		mutate(pool)
	}
	if err := c.Create(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), pool) })
	return pool
}

func waitPoolReady(t *testing.T, c client.Client, pool *v1.WarmPool, ready int32) {
	t.Helper()
	testcluster.Eventually(t, fmt.Sprintf("pool %s with %d ready members", pool.Name, ready), func() (bool, string) {
		got := &v1.WarmPool{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(pool), got); err != nil {
			return false, err.Error()
		}
		return got.Status.ReadyReplicas == ready && got.Status.Replicas == ready && conditions.IsTrue(got, v1.ReadyCondition),
			fmt.Sprintf("replicas %d ready %d: %s", got.Status.Replicas, got.Status.ReadyReplicas, conditions.GetMessage(got, v1.ReadyCondition))
	})
}

func claimFrom(pool *v1.WarmPool) func(*v1.Sandbox) {
	return func(s *v1.Sandbox) {
		s.Spec.TemplateRef = nil
		s.Spec.WarmPoolRef = &v1.LocalObjectReference{Name: pool.Name}
	}
}

// TestWarmClaimHandsOutAReadyMember claims from a full pool: the sandbox gets
// a member's namespace (already isolated, pod already Ready), its owner gets
// in, and the pool builds a replacement.
func TestWarmClaimHandsOutAReadyMember(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	ctx := context.Background()
	tpl := newTemplate(t, c, func(tpl *v1.SandboxTemplate) { tpl.Spec.Workspace.Persistent = true })
	pool := newPool(t, c, tpl, 2, nil)
	waitPoolReady(t, c, pool, 2)

	sbx := newSandbox(t, c, tpl, claimFrom(pool))
	got := waitCondition(t, c, sbx, metav1.ConditionTrue, v1.ReasonPodReady)
	if got.Status.LaunchType != v1.LaunchWarm || got.Status.ClaimedAt == nil {
		t.Fatalf("launch %s (%s), claimed at %v: want a warm claim", got.Status.LaunchType, got.Status.LaunchMessage, got.Status.ClaimedAt)
	}
	assertIsolated(t, c, got)
	binding := &rbacv1.RoleBinding{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: got.Status.Namespace, Name: environment.OwnerBindingName}, binding); err != nil {
		t.Fatal(err)
	}
	if binding.Labels[v1.LabelMember] != v1.MemberClaimed || binding.Labels[v1.LabelSandboxUID] != string(got.UID) {
		t.Errorf("the claim's binding in %s is labelled %v, want the claim of sandbox %s", got.Status.Namespace, binding.Labels, got.UID)
	}
	// The member is relabelled for the sandbox after it is Ready.
	ns := waitRelabelled(t, c, got)
	waitPoolReady(t, c, pool, 2)

	if err := c.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	testcluster.Eventually(t, "claimed member deleted with its sandbox", func() (bool, string) {
		err := c.Get(ctx, types.NamespacedName{Name: ns.Name}, &corev1.Namespace{})
		return apierrors.IsNotFound(err), "namespace still exists"
	})
}

// TestEmptyPool: with no Ready member a claim cold-starts from the pool's
// template, or, with whenEmpty: Wait, waits until a member is Ready.
func TestEmptyPool(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	tpl := newTemplate(t, c, nil)

	coldPool := newPool(t, c, tpl, 0, nil)
	cold := newSandbox(t, c, tpl, claimFrom(coldPool))
	got := waitCondition(t, c, cold, metav1.ConditionTrue, v1.ReasonPodReady)
	if got.Status.LaunchType != v1.LaunchCold || got.Status.LaunchMessage == "" {
		t.Errorf("launch %s %q, want Cold with the reason", got.Status.LaunchType, got.Status.LaunchMessage)
	}
	assertIsolated(t, c, got)

	waitPool := newPool(t, c, tpl, 0, func(p *v1.WarmPool) { p.Spec.WhenEmpty = v1.WhenEmptyWait })
	waiting := newSandbox(t, c, tpl, claimFrom(waitPool))
	waitCondition(t, c, waiting, metav1.ConditionFalse, v1.ReasonWaitingForMember, waitPool.Name)
	patch := client.MergeFrom(waitPool.DeepCopy())
	waitPool.Spec.Replicas = ptr.To[int32](1)
	if err := c.Patch(context.Background(), waitPool, patch); err != nil {
		t.Fatal(err)
	}
	got = waitCondition(t, c, waiting, metav1.ConditionTrue, v1.ReasonPodReady)
	if got.Status.LaunchType != v1.LaunchWarm {
		t.Errorf("the waiting claim launched %s, want Warm", got.Status.LaunchType)
	}
}

// TestConcurrentClaimsNeverShareAMember races more claims than the pool has
// members: every sandbox ends Ready in a namespace of its own, and warm plus
// cold launches add up.
func TestConcurrentClaimsNeverShareAMember(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	tpl := newTemplate(t, c, nil)
	pool := newPool(t, c, tpl, 6, nil)
	waitPoolReady(t, c, pool, 6)

	const claims = 12
	sandboxes := make([]*v1.Sandbox, claims)
	var wg sync.WaitGroup
	for i := range sandboxes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := &v1.Sandbox{
				ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("race")},
				Spec:       v1.SandboxSpec{WarmPoolRef: &v1.LocalObjectReference{Name: pool.Name}, Owner: "alice@example.com"},
			}
			if err := c.Create(context.Background(), s); err != nil {
				t.Error(err)
				return
			}
			sandboxes[i] = s
		}()
	}
	wg.Wait()
	for _, s := range sandboxes {
		if s != nil {
			t.Cleanup(func() { _ = c.Delete(context.Background(), s) })
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	namespaces := map[string]string{}
	launches := map[v1.LaunchType]int{}
	for _, s := range sandboxes {
		got := waitCondition(t, c, s, metav1.ConditionTrue, v1.ReasonPodReady)
		if other, dup := namespaces[got.Status.Namespace]; dup {
			t.Errorf("sandboxes %s and %s share namespace %s", other, s.Name, got.Status.Namespace)
		}
		namespaces[got.Status.Namespace] = s.Name
		launches[got.Status.LaunchType]++
	}
	if launches[v1.LaunchWarm]+launches[v1.LaunchCold] != claims || launches[v1.LaunchWarm] == 0 {
		t.Errorf("launches %v do not add up to %d claims with some warm", launches, claims)
	}
	t.Logf("launches: %v", launches)
	waitPoolReady(t, c, pool, 6)
	_ = time.Second
}

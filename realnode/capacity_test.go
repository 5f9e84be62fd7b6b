package realnode_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/realnode"
	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// failFast bounds how long a claim that cannot be placed or started may
// wait before it fails: v1.NotTransient, plus the controller's next look
// and a busy machine's slack. Far below the five minutes a claim waits.
const failFast = v1.NotTransient + 45*time.Second

// TestFullNode: a warm pool larger than the node fits says why it is
// short, in the scheduler's words, and a claim that finds no room fails
// once that has lasted v1.NotTransient, with the same words.
func TestFullNode(t *testing.T) {
	e := requireNode(t)
	ctx := context.Background()
	node := &corev1.Node{}
	if err := e.c.Get(ctx, client.ObjectKey{Name: realnode.NodeName}, node); err != nil {
		t.Fatal(err)
	}
	// Two thirds of the node's CPU: one sandbox fits, never two.
	share := resource.NewMilliQuantity(node.Status.Allocatable.Cpu().MilliValue()*2/3, resource.DecimalSI)
	tpl := e.template(t, e.nodePool(t, realnode.RuncHandler), func(s *v1.SandboxTemplateSpec) {
		s.Resources.Requests[corev1.ResourceCPU] = *share
		s.Resources.Limits[corev1.ResourceCPU] = *share
		s.Workspace = v1.Workspace{}
	})
	pool := &v1.WarmPool{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("real-full")},
		Spec:       v1.WarmPoolSpec{TemplateRef: v1.LocalObjectReference{Name: tpl.Name}, Replicas: ptr.To[int32](2)},
	}
	if err := e.c.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.deletePoolAndWait(t, pool) })
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, waitReady, true, func(ctx context.Context) (bool, error) {
		err := e.c.Get(ctx, client.ObjectKeyFromObject(pool), pool)
		return err == nil && pool.Status.ReadyReplicas == 1 && conditions.GetReason(pool, v1.ReadyCondition) == v1.ReasonMembersUnschedulable, err
	})
	msg := conditions.GetMessage(pool, v1.ReadyCondition)
	if err != nil || !strings.Contains(msg, "Insufficient cpu") {
		t.Fatalf("warm pool %s of two members of %s CPU each on a node of %s: Ready %s %q (%d ready), want %s naming Insufficient cpu (%v)",
			pool.Name, share, node.Status.Allocatable.Cpu(), conditions.GetReason(pool, v1.ReadyCondition), msg, pool.Status.ReadyReplicas, v1.ReasonMembersUnschedulable, err)
	}
	t.Logf("the pool says: %s", msg)

	start := time.Now()
	sbx, err := e.sdk.Claim(ctx, sandboxclient.ClaimOptions{Template: tpl.Name, Wait: waitReady})
	if sbx != nil {
		t.Cleanup(func() { e.deleteAndWait(t, sbx.Name) })
	}
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "Insufficient cpu") || took > failFast {
		t.Fatalf("a claim on the full node ended after %s with %v, want a failure within %s naming Insufficient cpu", took.Round(time.Second), err, failFast)
	}
	t.Logf("the claim failed after %s: %v", took.Round(time.Second), err)
	got := &v1.Sandbox{}
	if err := e.c.Get(ctx, client.ObjectKeyFromObject(sbx), got); err != nil {
		t.Fatal(err)
	}
	if reason := conditions.GetReason(got, v1.ReadyCondition); reason != v1.ReasonUnschedulable {
		t.Errorf("the unplaceable sandbox's Ready reason is %s, want %s", reason, v1.ReasonUnschedulable)
	}
}

// TestRuntimeThatCannotStart: a node pool naming a runtime handler the
// node lacks lets the scheduler place the pod, and the node fails to start
// it; the sandbox says so in the kubelet's words and a claim fails fast,
// and a warm pool of the template says why it does not fill.
func TestRuntimeThatCannotStart(t *testing.T) {
	e := requireNode(t)
	ctx := context.Background()
	tpl := e.template(t, e.nodePool(t, "no-such-runtime"), func(s *v1.SandboxTemplateSpec) { s.Workspace = v1.Workspace{} })
	pool := &v1.WarmPool{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("real-broken")},
		Spec:       v1.WarmPoolSpec{TemplateRef: v1.LocalObjectReference{Name: tpl.Name}, Replicas: ptr.To[int32](1)},
	}
	if err := e.c.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.deletePoolAndWait(t, pool) })
	start := time.Now()
	sbx, err := e.sdk.Claim(ctx, sandboxclient.ClaimOptions{Template: tpl.Name, Wait: waitReady})
	if sbx != nil {
		t.Cleanup(func() { e.deleteAndWait(t, sbx.Name) })
	}
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "FailedCreatePodSandBox") || !strings.Contains(err.Error(), "no-such-runtime") || took > failFast {
		t.Fatalf("a claim on a runtime the node lacks ended after %s with %v, want a failure within %s with the kubelet's FailedCreatePodSandBox naming the handler",
			took.Round(time.Second), err, failFast)
	}
	t.Logf("the claim failed after %s: %v", took.Round(time.Second), err)

	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, failFast, true, func(ctx context.Context) (bool, error) {
		err := e.c.Get(ctx, client.ObjectKeyFromObject(pool), pool)
		return err == nil && conditions.GetReason(pool, v1.ReadyCondition) == v1.ReasonMembersNotStarting, err
	})
	if msg := conditions.GetMessage(pool, v1.ReadyCondition); err != nil || !strings.Contains(msg, "FailedCreatePodSandBox") {
		t.Fatalf("warm pool %s of a runtime the node lacks: Ready %s %q, want %s with the kubelet's FailedCreatePodSandBox (%v)",
			pool.Name, conditions.GetReason(pool, v1.ReadyCondition), msg, v1.ReasonMembersNotStarting, err)
	}
	t.Logf("the pool says: %s", conditions.GetMessage(pool, v1.ReadyCondition))
}

// deletePoolAndWait deletes a warm pool and waits until its members'
// pods are gone from the node, so the next test finds the node empty.
func (e env) deletePoolAndWait(t testing.TB, pool *v1.WarmPool) {
	ctx := context.Background()
	if err := e.c.Delete(ctx, pool); client.IgnoreNotFound(err) != nil {
		t.Errorf("delete warm pool %s: %v", pool.Name, err)
		return
	}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods := &corev1.PodList{}
		err := e.c.List(ctx, pods, client.MatchingLabels{v1.LabelWarmPool: pool.Name})
		return err == nil && len(pods.Items) == 0, err
	})
	if err != nil {
		t.Errorf("the pods of warm pool %s are not gone: %v", pool.Name, err)
	}
}

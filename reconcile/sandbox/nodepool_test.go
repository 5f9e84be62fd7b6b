package sandbox_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// TestSandboxRunsOnItsNodePool follows a template on a gVisor-style node
// pool: the pod gets the pool's RuntimeClass, lands on the pool's (tainted)
// node only, carries the runtime's overhead, and the quota counts it.
func TestSandboxRunsOnItsNodePool(t *testing.T) {
	t.Parallel()
	cluster := testcluster.Get(t)
	c := cluster.Client
	ctx := context.Background()
	group := testcluster.Name("gvisor")
	node := cluster.Node(t, map[string]string{"agentsandbox.dev/node-group": group},
		corev1.Taint{Key: "agentsandbox.dev/runtime", Value: "gvisor", Effect: corev1.TaintEffectNoSchedule})
	pool := &v1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("pool")},
		Spec: v1.NodePoolSpec{
			RuntimeHandler: "runsc",
			NodeSelector:   map[string]string{"agentsandbox.dev/node-group": group},
			Taints:         []v1.NodePoolTaint{{Key: "agentsandbox.dev/runtime", Value: "gvisor", Effect: "NoSchedule"}},
			Overhead:       corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
		},
	}
	if err := c.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(ctx, pool) })
	tpl := newTemplate(t, c, func(tpl *v1.SandboxTemplate) { tpl.Spec.NodePoolRef = &v1.LocalObjectReference{Name: pool.Name} })
	sbx := newSandbox(t, c, tpl, nil)

	got := waitCondition(t, c, sbx, metav1.ConditionTrue, v1.ReasonPodReady)
	assertIsolated(t, c, got)
	pod := &corev1.Pod{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: got.Status.Namespace, Name: got.Status.PodName}, pod); err != nil {
		t.Fatal(err)
	}
	if pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName != pool.Name {
		t.Errorf("runtimeClassName %v, want %s", pod.Spec.RuntimeClassName, pool.Name)
	}
	if pod.Spec.NodeName != node.Name {
		t.Errorf("pod ran on %s, want the pool's node %s", pod.Spec.NodeName, node.Name)
	}
	if q := pod.Spec.Overhead[corev1.ResourceMemory]; q.String() != "64Mi" {
		t.Errorf("pod overhead %v, want the pool's 64Mi", pod.Spec.Overhead)
	}
}

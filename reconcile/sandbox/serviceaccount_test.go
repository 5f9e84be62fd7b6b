package sandbox_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/reconciletest"
)

// TestDefaultServiceAccountLeftMissing: when the controller manager does
// not give a sandbox's namespace its default ServiceAccount (it can miss a
// namespace deleted and created again under one name), the pod, which the
// API server refuses without it, is not left waiting for ever: after a
// grace the reconciler creates the ServiceAccount. An admission policy
// stands in for the controller manager's miss, refusing that
// ServiceAccount to everyone but the reconciler.
func TestDefaultServiceAccountLeftMissing(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	ctx := context.Background()
	name := testcluster.Name("nosa")
	namespace, probe := environment.NamespaceName(name), testcluster.Name("nosa-probe")
	probeNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: probe}}
	if err := c.Create(ctx, probeNS); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(ctx, probeNS) })
	testcluster.Get(t).DenyCreates(t, "", "serviceaccounts",
		`!(request.namespace in ['`+namespace+`', '`+probe+`']) || object.metadata.name != 'default' || request.userInfo.username == '`+reconciletest.ServiceAccount+`'`,
		"the controller manager missed this namespace",
		func() error { return c.Create(ctx, environment.DefaultServiceAccount(probe), client.DryRunAll) })

	tpl := newTemplate(t, c, nil)
	sbx := newSandbox(t, c, tpl, func(s *v1.Sandbox) { s.Name = name })
	got := waitCondition(t, c, sbx, metav1.ConditionTrue, v1.ReasonPodReady)
	if got.Status.Namespace != namespace {
		t.Fatalf("the sandbox runs in %s, want %s", got.Status.Namespace, namespace)
	}
	sa := &corev1.ServiceAccount{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "default"}, sa); err != nil {
		t.Fatal(err)
	}
	if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
		t.Errorf("the default ServiceAccount the reconciler made mounts a token: %v", sa.AutomountServiceAccountToken)
	}
}

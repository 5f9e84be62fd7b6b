package sandbox_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/reconciletest"
)

// TestReconcilerMakesTheDefaultServiceAccount: the namespaces the
// reconciler creates, a sandbox's and a warm member's, get their default
// ServiceAccount from it, without a token mounted, so their pods never
// wait for the controller manager's single worker (or for ever, where it
// misses a namespace recreated under one name). An admission policy
// refuses that ServiceAccount in these namespaces to everyone but the
// reconciler, so the sandbox, the pool and the claim from it get Ready
// only if the reconciler made it.
func TestReconcilerMakesTheDefaultServiceAccount(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	ctx := context.Background()
	name, poolName := testcluster.Name("nosa"), testcluster.Name("nosa-pool")
	namespace, probe := environment.NamespaceName(name), testcluster.Name("nosa-probe")
	memberPrefix := "sandbox-wp-" + poolName + "-"
	probeNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: probe}}
	if err := c.Create(ctx, probeNS); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(ctx, probeNS) })
	testcluster.Get(t).DenyCreates(t, "", "serviceaccounts",
		`!(request.namespace in ['`+namespace+`', '`+probe+`'] || request.namespace.startsWith('`+memberPrefix+`')) ||
		 object.metadata.name != 'default' || request.userInfo.username == '`+reconciletest.ServiceAccount+`'`,
		"the controller manager missed this namespace",
		func() error { return c.Create(ctx, environment.DefaultServiceAccount(probe), client.DryRunAll) })

	tpl := newTemplate(t, c, nil)
	sbx := newSandbox(t, c, tpl, func(s *v1.Sandbox) { s.Name = name })
	pool := newPool(t, c, tpl, 1, func(p *v1.WarmPool) { p.Name = poolName })
	got := waitCondition(t, c, sbx, metav1.ConditionTrue, v1.ReasonPodReady)
	if got.Status.Namespace != namespace {
		t.Fatalf("the sandbox runs in %s, want %s", got.Status.Namespace, namespace)
	}
	waitPoolReady(t, c, pool, 1)
	claimed := waitCondition(t, c, newSandbox(t, c, tpl, claimFrom(pool)), metav1.ConditionTrue, v1.ReasonPodReady)
	if !strings.HasPrefix(claimed.Status.Namespace, memberPrefix) {
		t.Fatalf("the claim runs in %s, want a member of %s", claimed.Status.Namespace, pool.Name)
	}
	for _, ns := range []string{namespace, claimed.Status.Namespace} {
		sa := &corev1.ServiceAccount{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, sa); err != nil {
			t.Fatal(err)
		}
		if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
			t.Errorf("the default ServiceAccount the reconciler made in %s mounts a token: %v", ns, sa.AutomountServiceAccountToken)
		}
	}
}

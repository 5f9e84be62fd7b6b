package sandbox_test

import (
	"context"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/sandbox"
)

// TestOnlyTheOwnerGetsIn acts as two developers, each with the
// agentsandbox-user role: each gets their own sandbox, and neither can
// create one for, change, delete or get into the other's.
func TestOnlyTheOwnerGetsIn(t *testing.T) {
	t.Parallel()
	cluster := testcluster.Get(t)
	admin := cluster.Client
	ctx := context.Background()
	alice, bob := testcluster.Name("alice")+"@example.com", testcluster.Name("bob")+"@example.com"
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("sandbox-users")},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "agentsandbox-user"},
		Subjects: []rbacv1.Subject{
			{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: alice},
			{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: bob},
		},
	}
	if err := admin.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(ctx, binding) })
	asAlice, asBob := impersonate(t, cluster, alice), impersonate(t, cluster, bob)
	tpl := newTemplate(t, admin, nil)

	// Alice leaves the owner out: admission fills in her identity.
	mine := &v1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("alice")},
		Spec:       v1.SandboxSpec{TemplateRef: &v1.LocalObjectReference{Name: tpl.Name}},
	}
	if err := asAlice.Create(ctx, mine); err != nil {
		t.Fatalf("alice creating her sandbox: %v", err)
	}
	t.Cleanup(func() { _ = admin.Delete(ctx, mine) })
	if mine.Spec.Owner != alice {
		t.Fatalf("owner defaulted to %q, want %q", mine.Spec.Owner, alice)
	}
	waitCondition(t, admin, mine, metav1.ConditionTrue, sandbox.ReasonReady)
	ns := sandbox.NamespaceName(mine.Name)

	forged := &v1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("forged")},
		Spec:       v1.SandboxSpec{TemplateRef: &v1.LocalObjectReference{Name: tpl.Name}, Owner: alice},
	}
	err := asBob.Create(ctx, forged)
	if err == nil {
		_ = admin.Delete(ctx, forged)
	}
	forbidden(t, "bob creating a sandbox owned by alice", err, "belongs to "+alice)
	forbidden(t, "bob deleting alice's sandbox", asBob.Delete(ctx, mine), "may delete it")
	stop := &v1.Sandbox{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(mine), stop); err != nil {
		t.Fatal(err)
	}
	stop.Spec.State = v1.SandboxStopped
	forbidden(t, "bob stopping alice's sandbox", asBob.Update(ctx, stop), "may change it")
	forbidden(t, "bob reading alice's pod", asBob.Get(ctx, types.NamespacedName{Namespace: ns, Name: sandbox.PodName}, &corev1.Pod{}), "")

	if err := asAlice.Get(ctx, types.NamespacedName{Namespace: ns, Name: sandbox.PodName}, &corev1.Pod{}); err != nil {
		t.Errorf("alice reading her own pod: %v", err)
	}
	for _, sub := range []string{"exec", "portforward", "log"} {
		verb := "create"
		if sub == "log" {
			verb = "get"
		}
		if !allowed(t, admin, alice, ns, verb, sub) {
			t.Errorf("alice may not %s pods/%s in her sandbox", verb, sub)
		}
		if allowed(t, admin, bob, ns, verb, sub) {
			t.Errorf("bob may %s pods/%s in alice's sandbox", verb, sub)
		}
	}
	if allowed(t, admin, alice, ns, "create", "") {
		t.Errorf("alice may create pods in her sandbox namespace: the sandbox pod is the controller's")
	}
}

func impersonate(t *testing.T, cluster *testcluster.Cluster, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: reconcile.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func forbidden(t *testing.T, what string, err error, text string) {
	t.Helper()
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), text) {
		t.Errorf("%s: got %v, want Forbidden saying %q", what, err, text)
	}
}

// allowed asks the API server's authorizer whether user may verb pods (or a
// pods subresource) in namespace.
func allowed(t *testing.T, c client.Client, user, namespace, verb, subresource string) bool {
	t.Helper()
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: []string{"system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: verb, Resource: "pods", Subresource: subresource, Name: sandbox.PodName,
		},
	}}
	if err := c.Create(context.Background(), review); err != nil {
		t.Fatal(err)
	}
	return review.Status.Allowed
}

package gitsync_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/gittest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/reconciletest"
)

func TestCredentials(t *testing.T) {
	srv := gittest.New(t, "bot", "right-password")
	pool := testcluster.Name("auth")
	srv.Commit("main", map[string]string{"pool.yaml": poolYAML(pool, "")})
	c := testcluster.Get(t).Client
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("creds"), Namespace: v1.SystemNamespace},
		Data: map[string][]byte{"username": []byte("bot"), "password": []byte("wrong-password")}}
	gs := newGitSync(t, srv.URL(), func(gs *v1.GitSync) { gs.Spec.SecretRef = &v1.LocalObjectReference{Name: secret.Name} })

	got := sync(t, gs)
	wantReady(t, got, metav1.ConditionFalse, v1.ReasonAuthenticationFailed, "secret "+v1.SystemNamespace+"/"+secret.Name+" not found")

	if err := c.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), secret) })
	got = sync(t, gs)
	wantReady(t, got, metav1.ConditionFalse, v1.ReasonFetchFailed, "authentication required")
	if strings.Contains(fmt.Sprint(got.Status), "wrong-password") {
		t.Error("status carries the password")
	}
	if _, ok := getPool(t, pool); ok {
		t.Error("pool created without access to the repository")
	}

	secret.Data["password"] = []byte("right-password")
	if err := c.Update(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	got = sync(t, gs)
	wantReady(t, got, metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)
	if _, ok := getPool(t, pool); !ok {
		t.Error("pool not created with the right credentials")
	}
}

// TestServiceAccountLimitsTheSync syncs as a ServiceAccount that may only
// manage sandbox templates: a repository that also declares a node pool is
// refused as a whole, and applies once it declares only what the account
// may.
func TestServiceAccountLimitsTheSync(t *testing.T) {
	ctx := context.Background()
	c := testcluster.Get(t).Client
	srv := gittest.New(t, "", "")
	tpl, pool, sa := testcluster.Name("tenant-t"), testcluster.Name("tenant-p"), testcluster.Name("tenant")
	template := fmt.Sprintf("apiVersion: agentsandbox.dev/v1alpha1\nkind: SandboxTemplate\nmetadata:\n  name: %s\nspec:\n  image: python:3.12\n", tpl)
	srv.Commit("main", map[string]string{"template.yaml": template, "pool.yaml": poolYAML(pool, "")})
	gs := newGitSync(t, srv.URL(), func(gs *v1.GitSync) { gs.Spec.ServiceAccountName = sa })

	got := sync(t, gs)
	wantReady(t, got, metav1.ConditionFalse, v1.ReasonServiceAccountNotFound,
		"spec.serviceAccountName: ServiceAccount "+v1.SystemNamespace+"/"+sa+" not found")

	// The reconciler may act as the ServiceAccounts of its namespace, as
	// config/rbac installs it (the tests' reconciler already acts as its
	// own account, and one cannot act as an account twice).
	_, accounts := serviceAccountUser("")
	if ok, why := allowed(t, reconciletest.ServiceAccount, accounts, authorizationv1.ResourceAttributes{
		Namespace: v1.SystemNamespace, Verb: "impersonate", Resource: "serviceaccounts", Name: sa,
	}); !ok {
		t.Errorf("the reconciler may not impersonate ServiceAccount %s: %s", sa, why)
	}

	newServiceAccount(t, sa, rbacv1.PolicyRule{
		APIGroups: []string{v1.GroupVersion.Group}, Resources: []string{"sandboxtemplates"},
		Verbs: []string{"get", "list", "watch", "create", "patch", "delete"},
	})
	tenant, _ := serviceAccountUser(sa)
	got = sync(t, gs)
	wantReady(t, got, metav1.ConditionFalse, v1.ReasonValidationFailed,
		"pool.yaml, document 1: failed to list NodePool", tenant, "forbidden")
	if err := c.Get(ctx, client.ObjectKey{Name: tpl}, &v1.SandboxTemplate{}); !apierrors.IsNotFound(err) {
		t.Errorf("template %s applied although the revision was refused: %v", tpl, err)
	}
	if _, ok := getPool(t, pool); ok {
		t.Errorf("node pool %s created by a ServiceAccount that may not", pool)
	}

	srv.Commit("main", map[string]string{"template.yaml": template})
	got = sync(t, gs)
	wantReady(t, got, metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)
	getTemplate(t, tpl)
}

// TestServiceAccountSyncActsForItselfOnly: a GitSync acting as a
// ServiceAccount that may manage sandboxes is, for the owner admission
// policy, that account and no admin: a revision declaring a sandbox for
// alice is refused as a whole, and one without an owner makes the account
// the owner.
func TestServiceAccountSyncActsForItselfOnly(t *testing.T) {
	ctx := context.Background()
	c := testcluster.Get(t).Client
	srv := gittest.New(t, "", "")
	sa, name := testcluster.Name("team"), testcluster.Name("team-sbx")
	tpl := &v1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("team-t")}, Spec: v1.SandboxTemplateSpec{Image: "python:3.12"}}
	if err := c.Create(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), tpl) })
	newServiceAccount(t, sa, rbacv1.PolicyRule{
		APIGroups: []string{v1.GroupVersion.Group}, Resources: []string{"sandboxes"},
		Verbs: []string{"get", "list", "watch", "create", "patch", "delete"},
	}, rbacv1.PolicyRule{
		APIGroups: []string{v1.GroupVersion.Group}, Resources: []string{"sandboxtemplates"}, Verbs: []string{"get", "list", "watch"},
	})
	sandboxYAML := func(owner string) string {
		return fmt.Sprintf("apiVersion: agentsandbox.dev/v1alpha1\nkind: Sandbox\nmetadata:\n  name: %s\nspec:\n  templateRef: {name: %s}\n%s", name, tpl.Name, owner)
	}
	srv.Commit("main", map[string]string{"sandbox.yaml": sandboxYAML("  owner: alice@example.com\n")})
	gs := newGitSync(t, srv.URL(), func(gs *v1.GitSync) { gs.Spec.ServiceAccountName = sa })
	t.Cleanup(func() { _ = c.Delete(context.Background(), &v1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: name}}) })
	account, _ := serviceAccountUser(sa)
	wantReady(t, sync(t, gs), metav1.ConditionFalse, v1.ReasonValidationFailed,
		"sandbox.yaml, document 1", "belongs to alice@example.com, not to "+account)
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &v1.Sandbox{}); !apierrors.IsNotFound(err) {
		t.Errorf("sandbox %s for alice applied by a ServiceAccount that is no admin: %v", name, err)
	}

	srv.Commit("main", map[string]string{"sandbox.yaml": sandboxYAML("")})
	sync(t, gs)
	got := &v1.Sandbox{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
		t.Fatalf("the account's own sandbox: %v", err)
	}
	if got.Spec.Owner != account {
		t.Errorf("sandbox applied by %s is owned by %q", account, got.Spec.Owner)
	}
}

// TestNewServiceAccountRevalidatesEverything gives a GitSync that applied
// a node pool as the reconciler a ServiceAccount that may read node pools
// but not change them: the next sync validates the pool again, as the
// account, and is refused, rather than skipping it as unchanged.
func TestNewServiceAccountRevalidatesEverything(t *testing.T) {
	ctx := context.Background()
	c := testcluster.Get(t).Client
	srv := gittest.New(t, "", "")
	pool, sa := testcluster.Name("reval"), testcluster.Name("reader")
	srv.Commit("main", map[string]string{"pool.yaml": poolYAML(pool, "")})
	gs := newGitSync(t, srv.URL(), nil)
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)

	newServiceAccount(t, sa, rbacv1.PolicyRule{
		APIGroups: []string{v1.GroupVersion.Group}, Resources: []string{"nodepools"}, Verbs: []string{"get", "list", "watch"},
	})
	cur := getGitSync(t, gs)
	base := cur.DeepCopy()
	cur.Spec.ServiceAccountName = sa
	if err := c.Patch(ctx, cur, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	wantReady(t, sync(t, gs), metav1.ConditionFalse, v1.ReasonValidationFailed,
		"pool.yaml, document 1", `cannot patch resource "nodepools"`)
}

// newServiceAccount creates a ServiceAccount in the reconciler's namespace
// with a ClusterRole of rules bound to it, and waits until the authorizer
// grants the first rule's first verb.
func newServiceAccount(t *testing.T, name string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	c := testcluster.Get(t).Client
	account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: v1.SystemNamespace}}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: v1.SystemNamespace}},
	}
	for _, obj := range []client.Object{account, role, binding} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), obj) })
	}
	user, groups := serviceAccountUser(name)
	testcluster.Eventually(t, "the ServiceAccount's access", func() (bool, string) {
		return allowed(t, user, groups, authorizationv1.ResourceAttributes{
			Group: rules[0].APIGroups[0], Verb: rules[0].Verbs[0], Resource: rules[0].Resources[0],
		})
	})
}

// serviceAccountUser is the username and groups of a ServiceAccount of the
// reconciler's namespace, as the API server authenticates it.
func serviceAccountUser(name string) (string, []string) {
	ns := v1.SystemNamespace
	return "system:serviceaccount:" + ns + ":" + name, []string{"system:serviceaccounts", "system:serviceaccounts:" + ns}
}

// allowed asks the API server's authorizer whether user, in groups, may do
// what attrs say.
func allowed(t *testing.T, user string, groups []string, attrs authorizationv1.ResourceAttributes) (bool, string) {
	t.Helper()
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: groups, ResourceAttributes: &attrs,
	}}
	if err := testcluster.Get(t).Client.Create(context.Background(), review); err != nil {
		t.Fatal(err)
	}
	return review.Status.Allowed, review.Status.Reason
}

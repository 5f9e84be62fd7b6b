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
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/kubescheme"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
)

// TestOnlyTheOwnerGetsIn acts as two developers, each with the
// agentsandbox-user role: each gets their own sandbox, and neither can
// create one for, change, delete or get into the other's.
func TestOnlyTheOwnerGetsIn(t *testing.T) {
	t.Parallel()
	cluster := testcluster.Get(t)
	admin := cluster.Client
	ctx := context.Background()
	alice, asAlice := newUser(t, cluster, "alice")
	bob, asBob := newUser(t, cluster, "bob")
	tpl := newTemplate(t, admin, nil)

	// Alice leaves the owner out: admission fills in her identity.
	mine := createAs(t, asAlice, admin, testcluster.Name("alice"), fromTemplate(tpl))
	if mine.Spec.Owner != alice {
		t.Fatalf("owner defaulted to %q, want %q", mine.Spec.Owner, alice)
	}
	waitCondition(t, admin, mine, metav1.ConditionTrue, v1.ReasonPodReady)
	ns := environment.NamespaceName(mine.Name)

	mayNotActFor(t, "bob", asBob, admin, mine)
	forbidden(t, "bob reading alice's pod", asBob.Get(ctx, types.NamespacedName{Namespace: ns, Name: environment.PodName}, &corev1.Pod{}), "")

	if err := asAlice.Get(ctx, types.NamespacedName{Namespace: ns, Name: environment.PodName}, &corev1.Pod{}); err != nil {
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
	// The owner role is exactly what the isolation guide promises: get and list
	// pods, exec, attach, port-forward and logs; nothing else.
	for _, verb := range []string{"get", "list"} {
		if !allowed(t, admin, alice, ns, verb, "") {
			t.Errorf("alice may not %s pods in her sandbox", verb)
		}
	}
	for _, verb := range []string{"watch", "update", "patch", "delete"} {
		if allowed(t, admin, alice, ns, verb, "") {
			t.Errorf("alice may %s pods in her sandbox", verb)
		}
	}

	// Visibility, a stated choice (docs/guides/isolation.md, "Who sees which sandboxes"):
	// every user of agentsandbox-user lists every Sandbox, with its owner,
	// namespace and pod IP, and gets no further than the Sandbox object.
	list := &v1.SandboxList{}
	if err := asBob.List(ctx, list); err != nil {
		t.Fatalf("bob listing sandboxes: %v", err)
	}
	seen := false
	for _, s := range list.Items {
		seen = seen || s.Name == mine.Name && s.Spec.Owner == alice && s.Status.Namespace == ns
	}
	if !seen {
		t.Errorf("bob's list does not show alice's sandbox %s with owner and namespace: the isolation guide says every user sees every sandbox", mine.Name)
	}
	forbidden(t, "bob listing alice's pods", asBob.List(ctx, &corev1.PodList{}, client.InNamespace(ns)), "")
	forbidden(t, "bob reading alice's namespace", asBob.Get(ctx, types.NamespacedName{Name: ns}, &corev1.Namespace{}), "")
}

// TestServiceAccountsAreNotAdmins: a ServiceAccount of the reconciler's
// namespace other than the reconciler's own (the account a GitSync acts as
// through serviceAccountName, say) with agentsandbox-user is a user like
// any other: it may not create a sandbox for someone else, nor change or
// delete theirs.
func TestServiceAccountsAreNotAdmins(t *testing.T) {
	t.Parallel()
	cluster := testcluster.Get(t)
	admin := cluster.Client
	account := testcluster.Name("team")
	username := "system:serviceaccount:agentsandbox-system:" + account
	cluster.BindUsers(t, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "agentsandbox-system", Name: account})
	asAccount := impersonate(t, cluster, username, "system:serviceaccounts", "system:serviceaccounts:agentsandbox-system")
	alice := testcluster.Name("alice") + "@example.com"
	tpl := newTemplate(t, admin, nil)
	hers := newSandbox(t, admin, tpl, func(s *v1.Sandbox) { s.Spec.Owner = alice })

	mayNotActFor(t, "a ServiceAccount", asAccount, admin, hers)

	// Its own sandbox it may have: admission makes it the owner.
	own := createAs(t, asAccount, admin, testcluster.Name("own"), fromTemplate(tpl))
	if own.Spec.Owner != username {
		t.Errorf("owner defaulted to %q, want %q", own.Spec.Owner, username)
	}
}

// newUser is a developer bound to agentsandbox-user, and a client acting
// as them.
func newUser(t *testing.T, cluster *testcluster.Cluster, prefix string) (string, client.Client) {
	t.Helper()
	name := testcluster.Name(prefix) + "@example.com"
	cluster.BindUsers(t, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name})
	return name, impersonate(t, cluster, name)
}

// mayNotActFor checks that who, acting through c, may not create a sandbox
// for the owner of theirs, nor stop or delete theirs: admission refuses
// each with its reason.
func mayNotActFor(t *testing.T, who string, c, admin client.Client, theirs *v1.Sandbox) {
	t.Helper()
	ctx := context.Background()
	owner := theirs.Spec.Owner
	forged := &v1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("forged")},
		Spec:       v1.SandboxSpec{TemplateRef: theirs.Spec.TemplateRef, Owner: owner},
	}
	err := c.Create(ctx, forged)
	if err == nil {
		_ = admin.Delete(ctx, forged)
	}
	forbidden(t, who+" creating a sandbox owned by "+owner, err, "belongs to "+owner)
	stop := &v1.Sandbox{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(theirs), stop); err != nil {
		t.Fatal(err)
	}
	before := stop.DeepCopy()
	stop.Spec.State = v1.SandboxStopped
	// A merge patch carries no resourceVersion: a write of the controller
	// meanwhile cannot turn the refusal into a conflict.
	forbidden(t, who+" stopping "+owner+"'s sandbox", c.Patch(ctx, stop, client.MergeFrom(before)), "may change it")
	forbidden(t, who+" deleting "+owner+"'s sandbox", c.Delete(ctx, theirs), "may delete it")
}

// impersonate is a client acting as user, authenticated, in groups.
func impersonate(t *testing.T, cluster *testcluster.Cluster, user string, groups ...string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
	c, err := client.New(cfg, client.Options{Scheme: kubescheme.Scheme})
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
			Namespace: namespace, Verb: verb, Resource: "pods", Subresource: subresource, Name: environment.PodName,
		},
	}}
	if err := c.Create(context.Background(), review); err != nil {
		t.Fatal(err)
	}
	return review.Status.Allowed
}

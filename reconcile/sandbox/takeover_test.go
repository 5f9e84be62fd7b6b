package sandbox_test

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
)

// TestExistingNamespaceIsNotAdopted: an administrator's namespace that
// happens to carry the name a sandbox would get, with a pod in it, is not
// taken over by a user who creates a Sandbox of that name. The sandbox
// reports the conflict and nothing in the namespace changes; once the
// namespace is gone, the sandbox starts in a new one of its own.
func TestExistingNamespaceIsNotAdopted(t *testing.T) {
	t.Parallel()
	cluster := testcluster.Get(t)
	admin := cluster.Client
	ctx := context.Background()
	alice, asAlice := newUser(t, cluster, "alice")
	tpl := newTemplate(t, admin, nil)

	name := testcluster.Name("taken")
	theirs := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: environment.NamespaceName(name), Labels: map[string]string{"team": "platform"}}}
	if err := admin.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(ctx, theirs) })
	theirPod := adminPod(t, admin, theirs.Name)
	before := &corev1.Namespace{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(theirs), before); err != nil {
		t.Fatal(err)
	}

	sbx := createAs(t, asAlice, admin, name, fromTemplate(tpl))
	got := waitCondition(t, admin, sbx, metav1.ConditionFalse, v1.ReasonNamespaceConflict,
		"namespace "+theirs.Name+" exists and does not belong to this sandbox")
	if !conditions.IsTrue(got, v1.StalledCondition) || got.Status.Namespace != "" {
		t.Errorf("conflicting sandbox: Stalled %v, namespace %q; want Stalled and no namespace", conditions.Get(got, v1.StalledCondition), got.Status.Namespace)
	}
	assertUntouched(t, admin, before, theirPod)
	if allowed(t, admin, alice, theirs.Name, "create", "exec") {
		t.Errorf("alice may exec into the administrator's namespace %s", theirs.Name)
	}

	// Freed, the name is the sandbox's: a new namespace with none of the
	// administrator's pod in it.
	if err := admin.Delete(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	got = waitCondition(t, admin, sbx, metav1.ConditionTrue, v1.ReasonPodReady)
	assertIsolated(t, admin, got)
	assertFresh(t, admin, got, before.UID, theirPod.UID)
}

// TestOrphanedSandboxIsNotInherited: bob deletes his sandbox with
// propagationPolicy Orphan, which strips the owner references instead of
// deleting the namespace. The reconciler deletes the namespace anyway, so
// bob keeps no access, and alice's new Sandbox of the same name, from
// another template, gets a new namespace and pod with nothing of bob's.
func TestOrphanedSandboxIsNotInherited(t *testing.T) {
	t.Parallel()
	cluster := testcluster.Get(t)
	admin := cluster.Client
	ctx := context.Background()
	alice, asAlice := newUser(t, cluster, "alice")
	bob, asBob := newUser(t, cluster, "bob")
	bobsTemplate := newTemplate(t, admin, func(tpl *v1.SandboxTemplate) { tpl.Spec.Image = "ghcr.io/acme/bob:1" })
	alicesTemplate := newTemplate(t, admin, func(tpl *v1.SandboxTemplate) { tpl.Spec.Image = "ghcr.io/acme/alice:1" })

	name := testcluster.Name("reused")
	bobs := createAs(t, asBob, admin, name, fromTemplate(bobsTemplate))
	bobs = waitCondition(t, admin, bobs, metav1.ConditionTrue, v1.ReasonPodReady)
	oldNamespace, oldPod := uidOf(t, admin, bobs.Status.Namespace)
	if !allowed(t, admin, bob, bobs.Status.Namespace, "create", "exec") {
		t.Fatalf("bob may not exec into his own sandbox")
	}

	if err := asBob.Delete(ctx, bobs, client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
		t.Fatalf("bob deleting his sandbox with propagationPolicy Orphan: %v", err)
	}
	testcluster.Eventually(t, "bob's sandbox gone", func() (bool, string) {
		err := admin.Get(ctx, client.ObjectKeyFromObject(bobs), &v1.Sandbox{})
		return apierrors.IsNotFound(err), "still there"
	})
	alices := createAs(t, asAlice, admin, name, fromTemplate(alicesTemplate))
	got := waitCondition(t, admin, alices, metav1.ConditionTrue, v1.ReasonPodReady)
	assertIsolated(t, admin, got)
	pod := assertFresh(t, admin, got, oldNamespace, oldPod)
	if img := pod.Spec.Containers[0].Image; img != alicesTemplate.Spec.Image {
		t.Errorf("alice's sandbox runs %s, want her template's %s", img, alicesTemplate.Spec.Image)
	}
	if allowed(t, admin, bob, got.Status.Namespace, "create", "exec") {
		t.Errorf("bob may still exec into %s, now alice's", got.Status.Namespace)
	}
	if !allowed(t, admin, alice, got.Status.Namespace, "create", "exec") {
		t.Errorf("alice may not exec into her sandbox %s", got.Status.Namespace)
	}
}

// TestRecreatedSandboxGetsANewNamespace: a Sandbox deleted and created
// again at once under the same name (OpenTofu's ephemeral resource opens,
// closes and reopens within a second) is not Ready inside the old,
// terminating namespace: it waits for it to go and starts in a new one.
func TestRecreatedSandboxGetsANewNamespace(t *testing.T) {
	t.Parallel()
	admin := testcluster.Get(t).Client
	ctx := context.Background()
	tpl := newTemplate(t, admin, nil)
	first := waitCondition(t, admin, newSandbox(t, admin, tpl, nil), metav1.ConditionTrue, v1.ReasonPodReady)
	oldNamespace, oldPod := uidOf(t, admin, first.Status.Namespace)
	if err := admin.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	testcluster.Eventually(t, "first sandbox gone", func() (bool, string) {
		err := admin.Get(ctx, client.ObjectKeyFromObject(first), &v1.Sandbox{})
		return apierrors.IsNotFound(err), "still there"
	})
	again := newSandbox(t, admin, tpl, func(s *v1.Sandbox) { s.Name = first.Name })
	got := waitCondition(t, admin, again, metav1.ConditionTrue, v1.ReasonPodReady)
	assertFresh(t, admin, got, oldNamespace, oldPod)
}

// TestSandboxNamedLikeAMemberTakesNothing covers the claim path: a Sandbox
// named so that its namespace is a warm member's does not get that member,
// and deleting it leaves the member alone; a sandbox that claimed a member
// and is deleted with propagationPolicy Orphan loses the member all the
// same.
func TestSandboxNamedLikeAMemberTakesNothing(t *testing.T) {
	t.Parallel()
	cluster := testcluster.Get(t)
	admin := cluster.Client
	ctx := context.Background()
	alice, asAlice := newUser(t, cluster, "alice")
	tpl := newTemplate(t, admin, nil)
	pool := newPool(t, admin, tpl, 1, nil)
	waitPoolReady(t, admin, pool, 1)
	members := &corev1.NamespaceList{}
	if err := admin.List(ctx, members, client.MatchingLabels{v1.LabelWarmPool: pool.Name, v1.LabelMember: v1.MemberAvailable}); err != nil || len(members.Items) != 1 {
		t.Fatalf("members of %s: %d (%v)", pool.Name, len(members.Items), err)
	}
	member := &members.Items[0]
	memberPod := &corev1.Pod{}
	if err := admin.Get(ctx, types.NamespacedName{Namespace: member.Name, Name: environment.PodName}, memberPod); err != nil {
		t.Fatal(err)
	}

	crafted := createAs(t, asAlice, admin, strings.TrimPrefix(member.Name, environment.NamespacePrefix), fromTemplate(tpl))
	waitCondition(t, admin, crafted, metav1.ConditionFalse, v1.ReasonNamespaceConflict, "namespace "+member.Name+" exists")
	assertUntouched(t, admin, member, memberPod)
	if allowed(t, admin, alice, member.Name, "create", "exec") {
		t.Errorf("alice may exec into the unclaimed member %s", member.Name)
	}
	if err := admin.Delete(ctx, crafted); err != nil {
		t.Fatal(err)
	}

	claimed := createAs(t, asAlice, admin, testcluster.Name("claim"), fromPool(pool))
	claimed = waitCondition(t, admin, claimed, metav1.ConditionTrue, v1.ReasonPodReady)
	if claimed.Status.Namespace != member.Name || claimed.Status.LaunchType != v1.LaunchWarm {
		t.Fatalf("claim got %s (%s), want the pool's one member %s, untouched by the crafted sandbox", claimed.Status.Namespace, claimed.Status.LaunchType, member.Name)
	}
	assertIsolated(t, admin, claimed)
	if err := asAlice.Delete(ctx, claimed, client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
		t.Fatal(err)
	}
	testcluster.Eventually(t, "orphaned member deleted", func() (bool, string) {
		ns := &corev1.Namespace{}
		err := admin.Get(ctx, client.ObjectKeyFromObject(member), ns)
		return apierrors.IsNotFound(err) || err == nil && ns.DeletionTimestamp != nil, "namespace still live"
	})
}

// adminPod starts a pod that is not the reconciler's in namespace. A
// namespace this new may not have its default ServiceAccount yet.
func adminPod(t *testing.T, admin client.Client, namespace string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: environment.PodName, Namespace: namespace, Labels: map[string]string{"app": "admin-tool"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "tool", Image: "registry.example/admin-tool:1"}}},
	}
	testcluster.Eventually(t, "administrator's pod created", func() (bool, string) {
		err := admin.Create(context.Background(), pod.DeepCopy())
		return err == nil, errString(err)
	})
	if err := admin.Get(context.Background(), client.ObjectKeyFromObject(pod), pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// assertUntouched checks that a namespace the reconciler must not adopt
// kept its labels, annotations and owners, got no owner binding, and kept
// its pod.
func assertUntouched(t *testing.T, c client.Client, before *corev1.Namespace, podBefore *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(before), ns); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(ns.Labels, before.Labels) || !maps.Equal(ns.Annotations, before.Annotations) || len(ns.OwnerReferences) != len(before.OwnerReferences) ||
		len(ns.OwnerReferences) > 0 && ns.OwnerReferences[0].UID != before.OwnerReferences[0].UID {
		t.Errorf("namespace %s changed: labels %v, annotations %v, owners %v; was %v, %v, %v",
			ns.Name, ns.Labels, ns.Annotations, ns.OwnerReferences, before.Labels, before.Annotations, before.OwnerReferences)
	}
	err := c.Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: "sandbox-owner"}, &rbacv1.RoleBinding{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s has an owner binding: %v", ns.Name, err)
	}
	pod := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(podBefore), pod); err != nil || pod.UID != podBefore.UID || !maps.Equal(pod.Labels, podBefore.Labels) {
		t.Errorf("pod %s/%s changed or went: %v", podBefore.Namespace, podBefore.Name, err)
	}
}

// assertFresh checks that a Ready sandbox lives in a namespace and pod of
// its own, not in the earlier ones, and returns its pod.
func assertFresh(t *testing.T, c client.Client, sbx *v1.Sandbox, oldNamespace, oldPod types.UID) *corev1.Pod {
	t.Helper()
	ns := &corev1.Namespace{}
	if err := c.Get(context.Background(), types.NamespacedName{Name: sbx.Status.Namespace}, ns); err != nil {
		t.Fatal(err)
	}
	if ns.UID == oldNamespace || ns.DeletionTimestamp != nil || !metav1.IsControlledBy(ns, sbx) || ns.Labels[v1.LabelSandboxUID] != string(sbx.UID) {
		t.Errorf("sandbox %s is Ready in namespace %s (uid %s, deleting %v, owners %v, labels %v): want a new one of its own",
			sbx.Name, ns.Name, ns.UID, ns.DeletionTimestamp, ns.OwnerReferences, ns.Labels)
	}
	pod := &corev1.Pod{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns.Name, Name: environment.PodName}, pod); err != nil {
		t.Fatal(err)
	}
	if pod.UID == oldPod || pod.CreationTimestamp.Before(&sbx.CreationTimestamp) {
		t.Errorf("sandbox %s runs pod %s (created %s, the sandbox %s): the earlier sandbox's pod", sbx.Name, pod.UID, pod.CreationTimestamp, sbx.CreationTimestamp)
	}
	return pod
}

// uidOf returns the UIDs of a namespace and of its sandbox pod.
func uidOf(t *testing.T, c client.Client, namespace string) (types.UID, types.UID) {
	t.Helper()
	ns, pod := &corev1.Namespace{}, &corev1.Pod{}
	if err := c.Get(context.Background(), types.NamespacedName{Name: namespace}, ns); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: namespace, Name: environment.PodName}, pod); err != nil {
		t.Fatal(err)
	}
	return ns.UID, pod.UID
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// createAs creates a Sandbox as the user c acts as, and deletes it (as
// admin) when the test ends.
func createAs(t *testing.T, c, admin client.Client, name string, spec v1.SandboxSpec) *v1.Sandbox {
	t.Helper()
	sbx := &v1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	if err := c.Create(context.Background(), sbx); err != nil {
		t.Fatalf("creating sandbox %s: %v", name, err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), sbx) })
	return sbx
}

func fromTemplate(tpl *v1.SandboxTemplate) v1.SandboxSpec {
	return v1.SandboxSpec{TemplateRef: &v1.LocalObjectReference{Name: tpl.Name}}
}

func fromPool(pool *v1.WarmPool) v1.SandboxSpec {
	return v1.SandboxSpec{WarmPoolRef: &v1.LocalObjectReference{Name: pool.Name}}
}

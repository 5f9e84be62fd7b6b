package environment

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

func TestEgressExceptBlocksWhatABroadRuleWouldOpen(t *testing.T) {
	cases := []struct {
		cidr   string
		except []string
		want   []string
	}{
		{"0.0.0.0/0", nil, []string{"169.254.0.0/16", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10"}},
		{"0.0.0.0/0", []string{"10.0.0.0/8"}, []string{"10.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10"}},
		{"10.0.0.0/8", nil, nil},  // names a blocked range: explicitly allowed
		{"10.1.0.0/16", nil, nil}, // inside one: explicitly allowed
		{"140.82.112.0/20", []string{"140.82.112.5/32"}, []string{"140.82.112.5/32"}}, // public, nothing to add
		{"::/0", nil, []string{"fe80::/10", "fc00::/7", "fec0::/10", "64:ff9b::/96", "64:ff9b:1::/48", "2002::/16", "2001::/32"}},
		{"64:ff9b::/96", nil, nil},                            // names NAT64: explicitly allowed
		{"2000::/3", nil, []string{"2002::/16", "2001::/32"}}, // global unicast still excepts the IPv4-carrying ranges
	}
	for _, tc := range cases {
		got := egressExcept(netip.MustParsePrefix(tc.cidr), tc.except, DefaultBlockedEgress)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("egressExcept(%s, %v) (-want +got):\n%s", tc.cidr, tc.except, diff)
		}
	}
}

func TestLabelSafeOwner(t *testing.T) {
	for owner, want := range map[string]string{
		"alice":                          "alice",
		"alice@example.com":              "alice_example.com-",
		"system:serviceaccount:ci:agent": "system_serviceaccount_ci_agent-",
	} {
		got := OwnerLabel(owner)
		if !strings.HasPrefix(got, want) || len(got) > 63 {
			t.Errorf("OwnerLabel(%q) = %q, want prefix %q and at most 63 characters", owner, got, want)
		}
	}
	long := OwnerLabel(strings.Repeat("x", 100) + "@example.com")
	if len(long) > 63 || OwnerLabel("a@b") == OwnerLabel("a_b") {
		t.Errorf("long or colliding owners: %q", long)
	}
}

func TestOwnerSubject(t *testing.T) {
	if s := ownerSubject("system:serviceaccount:ci:agent"); s.Kind != rbacv1.ServiceAccountKind || s.Namespace != "ci" || s.Name != "agent" {
		t.Errorf("service account subject %+v", s)
	}
	if s := ownerSubject("alice@example.com"); s.Kind != rbacv1.UserKind || s.Name != "alice@example.com" {
		t.Errorf("user subject %+v", s)
	}
}

func TestMergeEnvFollowsThePolicy(t *testing.T) {
	tpl := v1.SandboxTemplateSpec{Env: []v1.EnvVar{{Name: "A", Value: "1"}}}
	add, override := []v1.EnvVar{{Name: "B", Value: "2"}}, []v1.EnvVar{{Name: "A", Value: "9"}}
	if _, err := MergeEnv(tpl, add); err == nil {
		t.Error("Disallowed accepted an env")
	}
	tpl.EnvVarsInjectionPolicy = v1.EnvVarsInjectionAllowed
	if got, err := MergeEnv(tpl, add); err != nil || len(got) != 2 {
		t.Errorf("Allowed adding: %v %v", got, err)
	}
	if _, err := MergeEnv(tpl, override); err == nil || !strings.Contains(err.Error(), "Overrides would") {
		t.Errorf("Allowed overriding: %v", err)
	}
	tpl.EnvVarsInjectionPolicy = v1.EnvVarsInjectionOverrides
	if got, err := MergeEnv(tpl, override); err != nil || got[0].Value != "9" {
		t.Errorf("Overrides: %v %v", got, err)
	}
}

// TestClaimedNamespaceIsLabelledAsTheSandboxsOwn: a claimed member's
// namespace carries the labels a cold start's would (ForSandbox), so
// nothing that selects sandboxes' namespaces can tell them apart, and the
// Sandbox controls it.
func TestClaimedNamespaceIsLabelledAsTheSandboxsOwn(t *testing.T) {
	pool, tpl, member, sbx := claimOfPython("alice@example.com")
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	claimed := ClaimedNamespace(member, sbx, now)
	cold := ForSandbox(sbx, member.Name, tpl, nil, nil).NamespaceObject()
	for _, key := range []string{v1.LabelSandbox, v1.LabelSandboxUID, v1.LabelOwner, v1.LabelTemplate, v1.LabelWarmPool, v1.LabelManagedBy} {
		if claimed.Labels[key] != cold.Labels[key] {
			t.Errorf("label %s: claimed %q, a cold start's %q", key, claimed.Labels[key], cold.Labels[key])
		}
	}
	if claimed.Labels[v1.LabelMember] != v1.MemberClaimed || claimed.Annotations[v1.AnnotationOwner] != sbx.Spec.Owner ||
		claimed.Annotations[v1.AnnotationClaimedAt] != "2026-12-04T12:00:00Z" {
		t.Errorf("claimed namespace: labels %v annotations %v", claimed.Labels, claimed.Annotations)
	}
	if ref := metav1.GetControllerOf(claimed); ref == nil || ref.UID != sbx.UID || len(claimed.OwnerReferences) != 1 {
		t.Errorf("claimed namespace's owners: %v", claimed.OwnerReferences)
	}
	if member.Labels[v1.LabelMember] != v1.MemberAvailable || len(member.OwnerReferences) != 0 || !MemberOf(member, pool) {
		t.Error("the member's namespace itself was changed")
	}
}

// TestMemberIsItsPoolsByUID: a member's namespace has no owner reference,
// which would let its pool's garbage collection take it after a claim and
// before its relabel; it is its pool's by the pool's UID, so a member an
// earlier pool of the same name built, or a namespace labelled by hand
// without it, is not. One built while members had their pool's owner
// reference is still its pool's.
func TestMemberIsItsPoolsByUID(t *testing.T) {
	pool, _, member, _ := claimOfPython("alice@example.com")
	if len(member.OwnerReferences) != 0 || member.Labels[v1.LabelWarmPoolUID] != string(pool.UID) {
		t.Fatalf("member namespace: owners %v, labels %v", member.OwnerReferences, member.Labels)
	}
	recreated := pool.DeepCopy()
	recreated.UID = "another-pool-of-that-name"
	unlabelled := member.DeepCopy()
	delete(unlabelled.Labels, v1.LabelWarmPoolUID)
	earlier := unlabelled.DeepCopy()
	earlier.OwnerReferences = []metav1.OwnerReference{ControllerRef(v1.KindWarmPool, pool)}
	for _, c := range []struct {
		name string
		ns   *corev1.Namespace
		pool *v1.WarmPool
		want bool
	}{
		{"built by the pool", member, pool, true},
		{"built by an earlier pool of the name", member, recreated, false},
		{"labelled without the UID", unlabelled, pool, false},
		{"built with the pool's owner reference", earlier, pool, true},
		{"with an earlier pool's owner reference", earlier, recreated, false},
		{"for a pool known by name only", member, &v1.WarmPool{ObjectMeta: metav1.ObjectMeta{Name: pool.Name}}, false},
		{"labelled without the UID, for a pool known by name only", unlabelled, &v1.WarmPool{ObjectMeta: metav1.ObjectMeta{Name: pool.Name}}, false},
	} {
		if got := MemberOf(c.ns, c.pool); got != c.want {
			t.Errorf("%s: MemberOf %v, want %v", c.name, got, c.want)
		}
	}
}

// TestClaimBindingGrantsWhatTheSandboxsBindingDoes: the binding whose
// create is the claim grants the owner what a cold start's binding does
// (so the apply of the sandbox's own binding later finds it right), and
// says which sandbox claimed the member and when; the pool's trim binding
// grants nobody anything.
func TestClaimBindingGrantsWhatTheSandboxsBindingDoes(t *testing.T) {
	_, tpl, member, sbx := claimOfPython("system:serviceaccount:agents:alice")
	now := time.Date(2026, 12, 4, 12, 0, 0, 500, time.UTC)
	claim := ClaimBinding(member, sbx, now)
	own := ForSandbox(sbx, member.Name, tpl, nil, nil).RoleBinding()
	if claim.Name != own.Name || claim.Namespace != own.Namespace || claim.RoleRef != own.RoleRef || !cmp.Equal(claim.Subjects, own.Subjects) {
		t.Errorf("claim binding %s/%s %v %v, the sandbox's %s/%s %v %v", claim.Namespace, claim.Name, claim.RoleRef, claim.Subjects, own.Namespace, own.Name, own.RoleRef, own.Subjects)
	}
	for key, want := range map[string]string{
		v1.LabelManagedBy: v1.ManagedByValue, v1.LabelWarmPool: "python", v1.LabelMember: v1.MemberClaimed,
		v1.LabelSandbox: "alice-1", v1.LabelSandboxUID: "sbx-uid",
	} {
		if claim.Labels[key] != want {
			t.Errorf("claim binding label %s = %q, want %q", key, claim.Labels[key], want)
		}
	}
	if got := ClaimedAt(claim); !got.Equal(now) {
		t.Errorf("claimed at %v, want %v", got, now)
	}
	trim := TrimBinding(member)
	if trim.Name != OwnerBindingName || len(trim.Subjects) != 0 || trim.Labels[v1.LabelMember] != v1.MemberTrimmed || trim.Labels[v1.LabelWarmPool] != "python" {
		t.Errorf("trim binding: %s, subjects %v, labels %v", trim.Name, trim.Subjects, trim.Labels)
	}
	if !ClaimedAt(trim).IsZero() {
		t.Error("a trim binding carries a claim time")
	}
}

// claimOfPython is a member of the pool python and a sandbox of owner
// claiming from it.
func claimOfPython(owner string) (*v1.WarmPool, *v1.SandboxTemplate, *corev1.Namespace, *v1.Sandbox) {
	pool := &v1.WarmPool{ObjectMeta: metav1.ObjectMeta{Name: "python", UID: "pool-uid"}}
	tpl := &v1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: "python"}}
	sbx := &v1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: "alice-1", UID: "sbx-uid"},
		Spec:       v1.SandboxSpec{WarmPoolRef: &v1.LocalObjectReference{Name: "python"}, Owner: owner},
	}
	return pool, tpl, ForMember(pool, "sandbox-wp-python-x1", tpl, nil).NamespaceObject(), sbx
}

// TestEphemeralStorageIsLimitedWhereTheTemplateSaysNothing: a sandbox's
// container may not write more than DefaultEphemeralStorage (plus its
// workspace when that is an emptyDir, which counts toward the same limit,
// and no less than its request) unless the template sets its own limit,
// which is kept as it is.
func TestEphemeralStorageIsLimitedWhereTheTemplateSaysNothing(t *testing.T) {
	limit := func(spec v1.SandboxTemplateSpec) string {
		pod := Blueprint{template: &v1.SandboxTemplate{Spec: spec}}.Pod()
		q := pod.Spec.Containers[0].Resources.Limits[corev1.ResourceEphemeralStorage]
		return q.String()
	}
	memory := corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
	if got := limit(v1.SandboxTemplateSpec{Resources: v1.Resources{Limits: memory}}); got != "11Gi" {
		t.Errorf("an ephemeral workspace of the default 1Gi: limit %s, want 10Gi + 1Gi", got)
	}
	persistent := v1.SandboxTemplateSpec{Workspace: v1.Workspace{Persistent: true, Size: ptr.To(resource.MustParse("50Gi"))}}
	if got := limit(persistent); got != v1.DefaultEphemeralStorage {
		t.Errorf("a persistent workspace: limit %s, want %s", got, v1.DefaultEphemeralStorage)
	}
	requested := persistent
	requested.Resources.Requests = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("20Gi")}
	if got := limit(requested); got != "20Gi" {
		t.Errorf("a request of 20Gi and no limit: limit %s, want the request", got)
	}
	own := v1.SandboxTemplateSpec{Resources: v1.Resources{Limits: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("2Gi")}}}
	if got := limit(own); got != "2Gi" {
		t.Errorf("the template's own 2Gi: limit %s", got)
	}
	// The default limit reserves nothing: its request is stated as the
	// template's, or zero, where the API server would copy the limit.
	request := func(spec v1.SandboxTemplateSpec) *resource.Quantity {
		pod := Blueprint{template: &v1.SandboxTemplate{Spec: spec}}.Pod()
		if q, set := pod.Spec.Containers[0].Resources.Requests[corev1.ResourceEphemeralStorage]; set {
			return &q
		}
		return nil
	}
	if got := request(persistent); got == nil || !got.IsZero() {
		t.Errorf("a default limit's request is %v, want 0 stated", got)
	}
	if got := request(requested); got == nil || got.String() != "20Gi" {
		t.Errorf("the template's request of 20Gi became %v", got)
	}
	if got := request(own); got != nil {
		t.Errorf("beside the template's own limit a request of %v was added, which the API server would have made the limit", got)
	}
	if _, set := memory[corev1.ResourceEphemeralStorage]; set {
		t.Error("the template's limits were changed in place")
	}
}

// TestMemoryIsLimitedWhereTheTemplateSaysNothing: a template with
// resources but no memory limit gives its sandbox DefaultMemoryLimit, or
// its request when that is more; its own limit is kept.
func TestMemoryIsLimitedWhereTheTemplateSaysNothing(t *testing.T) {
	limit := func(res v1.Resources) string {
		pod := Blueprint{template: &v1.SandboxTemplate{Spec: v1.SandboxTemplateSpec{Resources: res}}}.Pod()
		q := pod.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]
		return q.String()
	}
	cpu := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	for _, tc := range []struct {
		name string
		res  v1.Resources
		want string
	}{
		{"no resources at all", v1.Resources{}, v1.DefaultMemoryLimit},
		{"a cpu limit only", v1.Resources{Limits: cpu}, v1.DefaultMemoryLimit},
		{"a request above the default", v1.Resources{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")}}, "4Gi"},
		{"its own limit", v1.Resources{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}}, "256Mi"},
	} {
		if got := limit(tc.res); got != tc.want {
			t.Errorf("%s: memory limit %s, want %s", tc.name, got, tc.want)
		}
	}
	pod := Blueprint{template: &v1.SandboxTemplate{Spec: v1.SandboxTemplateSpec{Resources: v1.Resources{Limits: cpu}}}}.Pod()
	if got, set := pod.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory]; !set || !got.IsZero() {
		t.Errorf("beside the default memory limit the request is %s (set %v), want 0 stated, not the limit copied", got.String(), set)
	}
	if len(cpu) != 1 {
		t.Error("the template's limits were changed in place")
	}
}

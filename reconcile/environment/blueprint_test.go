package sandbox

import (
	"maps"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
		got := labelSafe(owner)
		if !strings.HasPrefix(got, want) || len(got) > 63 {
			t.Errorf("labelSafe(%q) = %q, want prefix %q and at most 63 characters", owner, got, want)
		}
	}
	long := labelSafe(strings.Repeat("x", 100) + "@example.com")
	if len(long) > 63 || labelSafe("a@b") == labelSafe("a_b") {
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
	if _, err := mergeEnv(tpl, add); err == nil {
		t.Error("Disallowed accepted an env")
	}
	tpl.EnvVarsInjectionPolicy = v1.EnvVarsInjectionAllowed
	if got, err := mergeEnv(tpl, add); err != nil || len(got) != 2 {
		t.Errorf("Allowed adding: %v %v", got, err)
	}
	if _, err := mergeEnv(tpl, override); err == nil || !strings.Contains(err.Error(), "Overrides would") {
		t.Errorf("Allowed overriding: %v", err)
	}
	tpl.EnvVarsInjectionPolicy = v1.EnvVarsInjectionOverrides
	if got, err := mergeEnv(tpl, override); err != nil || got[0].Value != "9" {
		t.Errorf("Overrides: %v %v", got, err)
	}
}

func TestLifetimePrecedence(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	tpl := &v1.SandboxTemplate{Spec: v1.SandboxTemplateSpec{Lifecycle: &v1.Lifecycle{
		TTL: &metav1.Duration{Duration: time.Hour}, ShutdownPolicy: v1.ShutdownPolicyDelete,
	}}}
	sbx := &v1.Sandbox{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: created}}
	if lt := lifetimeOf(sbx, tpl); !lt.end.Equal(&metav1.Time{Time: created.Add(time.Hour)}) || lt.policy != v1.ShutdownPolicyDelete {
		t.Errorf("template default: %v %s", lt.end, lt.policy)
	}
	sbx.Spec.TTL = &metav1.Duration{Duration: time.Minute}
	sbx.Spec.ShutdownPolicy = v1.ShutdownPolicyStop
	lt := lifetimeOf(sbx, tpl)
	if !lt.end.Equal(&metav1.Time{Time: created.Add(time.Minute)}) || lt.policy != v1.ShutdownPolicyStop {
		t.Errorf("sandbox ttl: %v %s", lt.end, lt.policy)
	}
	if expired, left := lt.expired(created.Add(30 * time.Second)); expired || left != 30*time.Second {
		t.Errorf("half-way: expired %v left %v", expired, left)
	}
	if expired, _ := lt.expired(created.Add(time.Minute)); !expired {
		t.Error("not expired at the end")
	}
	if lt := lifetimeOf(&v1.Sandbox{}, nil); lt.end != nil || lt.policy != v1.ShutdownPolicyStop {
		t.Errorf("no lifetime: %v %s", lt.end, lt.policy)
	}
}

func TestRecoverLaunch(t *testing.T) {
	claimedAt := "2026-11-29T18:00:00.5Z"
	warm := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Labels:      map[string]string{v1.LabelMember: v1.MemberClaimed},
		Annotations: map[string]string{v1.AnnotationClaimedAt: claimedAt},
	}}
	sbx := &v1.Sandbox{}
	recoverLaunch(sbx, warm)
	if sbx.Status.LaunchType != v1.LaunchWarm || sbx.Status.ClaimedAt == nil || sbx.Status.ClaimedAt.UTC().Format(time.RFC3339Nano) != claimedAt {
		t.Errorf("warm recovery: %+v", sbx.Status)
	}
	sbx = &v1.Sandbox{Spec: v1.SandboxSpec{WarmPoolRef: &v1.LocalObjectReference{Name: "python"}}}
	recoverLaunch(sbx, &corev1.Namespace{})
	if sbx.Status.LaunchType != v1.LaunchCold || !strings.Contains(sbx.Status.LaunchMessage, "python") {
		t.Errorf("cold recovery: %+v", sbx.Status)
	}
}

// TestNamespaceIdentity: a namespace is a sandbox's by its controller
// reference's UID, never by its name, and an environment left by an
// earlier Sandbox of the same name is told from anyone else's namespace.
func TestNamespaceIdentity(t *testing.T) {
	sbx := &v1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "x", UID: "new"}}
	earlier := &v1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "x", UID: "old"}}
	pool := &v1.WarmPool{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "pool"}}
	ns := func(labels map[string]string, owner *metav1.OwnerReference) *corev1.Namespace {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sandbox-x", Labels: labels}}
		if owner != nil {
			n.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		return n
	}
	ours := map[string]string{v1.LabelManagedBy: v1.ManagedByValue, v1.LabelSandbox: "x"}
	withUID := func(uid string) map[string]string {
		l := maps.Clone(ours)
		l[v1.LabelSandboxUID] = uid
		return l
	}
	ref := func(kind string, obj metav1.Object) *metav1.OwnerReference { r := controllerRef(kind, obj); return &r }
	for _, tc := range []struct {
		name        string
		ns          *corev1.Namespace
		owns, stale bool
	}{
		{"created for this sandbox", ns(withUID("new"), ref("Sandbox", sbx)), true, false},
		{"created by an earlier version, without the UID label", ns(ours, ref("Sandbox", sbx)), true, false},
		{"an administrator's", ns(map[string]string{"team": "platform"}, nil), false, false},
		{"forged labels, no owner", ns(map[string]string{"team": "platform", v1.LabelSandboxUID: "new"}, nil), false, false},
		{"an unclaimed warm member", ns(map[string]string{v1.LabelManagedBy: v1.ManagedByValue, v1.LabelMember: v1.MemberAvailable}, ref("WarmPool", pool)), false, false},
		{"an earlier sandbox's, owner reference stripped by an orphaning delete", ns(withUID("old"), nil), false, true},
		{"an earlier sandbox's, still owned by it", ns(withUID("old"), ref("Sandbox", earlier)), false, true},
		{"a UID label that is not the owner's", ns(withUID("old"), ref("Sandbox", sbx)), false, false},
	} {
		if got := ownsNamespace(tc.ns, sbx); got != tc.owns {
			t.Errorf("%s: ownsNamespace = %v, want %v", tc.name, got, tc.owns)
		}
		if got := leftBehind(tc.ns, sbx); got != tc.stale {
			t.Errorf("%s: leftBehind = %v, want %v", tc.name, got, tc.stale)
		}
	}
}

package index

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// TestIndexNamesAreReferences: every index name the controllers look up is
// a reference Register indexes, on the kind the name says.
func TestIndexNamesAreReferences(t *testing.T) {
	for name, on := range map[string]struct{ field, from, to string }{
		"SandboxTemplate":  {SandboxTemplate, v1.KindSandbox, v1.KindSandboxTemplate},
		"SandboxWarmPool":  {SandboxWarmPool, v1.KindSandbox, v1.KindWarmPool},
		"WarmPoolTemplate": {WarmPoolTemplate, v1.KindWarmPool, v1.KindSandboxTemplate},
		"TemplateNodePool": {TemplateNodePool, v1.KindSandboxTemplate, v1.KindNodePool},
	} {
		found := false
		for _, ref := range v1.References {
			found = found || ref.Field == on.field && ref.From == on.from && ref.To == on.to
		}
		if !found {
			t.Errorf("index %s (%s on %s, naming a %s) is not in v1alpha1.References", name, on.field, on.from, on.to)
		}
	}
}

// TestMemberIndexes: a pool's namespaces are indexed while unclaimed
// only, so a claim's look at its pool does not grow with the sandboxes
// claimed from it; the bindings and pods labelled for a pool are found by
// their namespace.
func TestMemberIndexes(t *testing.T) {
	labelled := func(labels map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: "x", Namespace: "member-1", Labels: labels}
	}
	for _, c := range []struct {
		name  string
		obj   client.Object
		key   func(client.Object) (string, bool)
		want  string
		found bool
	}{
		{"unclaimed member", &corev1.Namespace{ObjectMeta: labelled(map[string]string{v1.LabelWarmPool: "py", v1.LabelMember: v1.MemberAvailable})}, availableMember, "py", true},
		{"claimed member", &corev1.Namespace{ObjectMeta: labelled(map[string]string{v1.LabelWarmPool: "py", v1.LabelMember: v1.MemberClaimed})}, availableMember, "", false},
		{"sandbox started cold from a pool's template", &corev1.Namespace{ObjectMeta: labelled(map[string]string{v1.LabelWarmPool: "py"})}, availableMember, "", false},
		{"member's pod", &corev1.Pod{ObjectMeta: labelled(map[string]string{v1.LabelWarmPool: "py"})}, memberNamespace, "member-1", true},
		{"claim's binding", &rbacv1.RoleBinding{ObjectMeta: labelled(map[string]string{v1.LabelWarmPool: "py", v1.LabelMember: v1.MemberClaimed})}, memberNamespace, "member-1", true},
		{"a pod of no pool", &corev1.Pod{ObjectMeta: labelled(map[string]string{v1.LabelSandbox: "s"})}, memberNamespace, "", false},
	} {
		if got, found := c.key(c.obj); got != c.want || found != c.found {
			t.Errorf("%s: key %q, %v; want %q, %v", c.name, got, found, c.want, c.found)
		}
	}
}

package sandbox_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/reconciletest"
)

// TestHiddenSandboxIsLeftAlone: a Sandbox labelled reconciletest.Hidden is
// not reconciled by the controllers the harness runs, which is what lets
// bench's ClaimAgainstFloor send a claim's writes itself beside them. Its
// twin without the label, created just before it, is started, so the
// controllers had their chance at both.
func TestHiddenSandboxIsLeftAlone(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	tpl := newTemplate(t, c, nil)
	seen := newSandbox(t, c, tpl, nil)
	hidden := newSandbox(t, c, tpl, func(s *v1.Sandbox) { s.Labels = map[string]string{reconciletest.Hidden: "true"} })
	// Admission gave it the controller's finalizer, which no controller
	// here will remove: taken off before newSandbox's cleanup deletes it.
	t.Cleanup(func() {
		_ = c.Patch(context.Background(), hidden, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	})
	started := waitCondition(t, c, seen, metav1.ConditionTrue, v1.ReasonPodReady)
	if n := len(namespacesOf(t, c, started)); n != 1 {
		t.Fatalf("sandbox %s has %d namespaces labelled with its UID, want 1", started.Name, n)
	}

	got := &v1.Sandbox{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(hidden), got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) > 0 || got.Status.Phase != "" || got.Status.Namespace != "" || got.Status.ObservedGeneration != 0 {
		t.Errorf("hidden sandbox %s was reconciled: phase %q, namespace %q, observed generation %d, conditions %v",
			got.Name, got.Status.Phase, got.Status.Namespace, got.Status.ObservedGeneration, got.Status.Conditions)
	}
	if namespaces := namespacesOf(t, c, got); len(namespaces) > 0 {
		t.Errorf("hidden sandbox %s has namespace %s", got.Name, namespaces[0].Name)
	}
}

// namespacesOf lists the namespaces labelled with sbx's UID.
func namespacesOf(t *testing.T, c client.Client, sbx *v1.Sandbox) []corev1.Namespace {
	t.Helper()
	namespaces := &corev1.NamespaceList{}
	if err := c.List(context.Background(), namespaces, client.MatchingLabels{v1.LabelSandboxUID: string(sbx.UID)}); err != nil {
		t.Fatal(err)
	}
	return namespaces.Items
}

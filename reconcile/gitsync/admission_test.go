package gitsync_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/gittest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/reconciletest"
)

// TestNewObjectsAreCreatedWithoutADryRun: objects that do not exist yet, of
// kinds no admission policy matches, are validated in the process and
// created with one request each; an invalid one among them is refused
// with the API server's words, before anything is written.
func TestNewObjectsAreCreatedWithoutADryRun(t *testing.T) {
	srv := gittest.New(t, "", "")
	pool, tpl := testcluster.Name("new"), testcluster.Name("new")
	srv.Commit("main", map[string]string{
		"pool.yaml":     poolYAML(pool, ""),
		"template.yaml": templateYAML(tpl, pool, "python:3.13"),
	})
	gs := newGitSync(t, srv.URL(), nil)
	since := reconciletest.WriteCount()
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)
	for _, path := range []string{"/nodepools/" + pool, "/sandboxtemplates/" + tpl} {
		writes := reconciletest.Writes(since, func(w reconciletest.Write) bool { return strings.HasSuffix(w.Path, path) })
		if len(writes) != 1 {
			t.Errorf("creating %s took %d requests, want one apply: %v", path, len(writes), writes)
		}
	}

	invalid := testcluster.Name("new")
	srv.Commit("main", map[string]string{
		"more.yaml": poolYAML(testcluster.Name("new"), "") + "---\n" + poolYAML(invalid, "") + "  taints:\n  - key: k\n    effect: Sometimes\n",
	})
	wantReady(t, sync(t, gs), metav1.ConditionFalse, v1.ReasonValidationFailed,
		"more.yaml, document 2", `NodePool "`+invalid+`"`, `spec.taints[0].effect: Unsupported value: "Sometimes"`)
	var pools v1.NodePoolList
	if err := testcluster.Get(t).Client.List(context.Background(), &pools, client.MatchingLabels{v1.LabelGitSync: gs.Name}); err != nil {
		t.Fatal(err)
	}
	if len(pools.Items) != 1 {
		t.Errorf("after a refused revision the GitSync's pools are %d, want the one of the revision before", len(pools.Items))
	}
}

// TestAdmissionPoliciesAreDryRun: where an admission policy matches a kind,
// what it refuses is found by a dry run before anything is written, new
// objects included.
func TestAdmissionPoliciesAreDryRun(t *testing.T) {
	ctx := context.Background()
	c := testcluster.Get(t).Client
	label := testcluster.Name("refuse")
	refused := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("refused"), Labels: map[string]string{label: "yes"}},
		Spec: v1.NodePoolSpec{RuntimeHandler: "runsc", NodeSelector: map[string]string{"agentsandbox.dev/node-group": "gvisor"}}}
	testcluster.Get(t).DenyCreates(t, v1.GroupVersion.Group, "nodepools",
		`!has(object.metadata.labels) || !('`+label+`' in object.metadata.labels)`, "the platform refuses this pool",
		func() error { return c.Create(ctx, refused.DeepCopy(), client.DryRunAll) })

	srv := gittest.New(t, "", "")
	accepted := testcluster.Name("accepted")
	srv.Commit("main", map[string]string{
		"pools.yaml": poolYAML(accepted, "") + "---\n" + poolYAML(refused.Name, "  labels:\n    "+label+": \"yes\"\n"),
	})
	gs := newGitSync(t, srv.URL(), nil)
	wantReady(t, sync(t, gs), metav1.ConditionFalse, v1.ReasonValidationFailed,
		"pools.yaml, document 2", "the platform refuses this pool")
	if _, found := getPool(t, accepted); found {
		t.Errorf("pool %s was created by a revision the policy refused", accepted)
	}
}

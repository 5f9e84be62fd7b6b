package gitsync_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/gittest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// TestAPIServerRestartMidSync restarts the API server and etcd while a sync
// adds 300 templates to 50 synced before: the sync fails or finishes, but
// none of the 50 is deleted (nothing is pruned from a partial read), and
// the next sync converges on all 350. It does not run in parallel: the
// package's other tests would see the API server go away too.
func TestAPIServerRestartMidSync(t *testing.T) {
	const synced, added = 50, 300
	cluster := testcluster.Get(t)
	c := cluster.Client
	ctx := context.Background()
	run := testcluster.Name("apirestart")
	label := client.MatchingLabels{testcluster.RunLabel: run}
	files := testcluster.TemplateFiles(map[string]string{}, "synced", synced, run)
	srv := gittest.New(t, "", "")
	srv.Commit("main", files)
	t.Cleanup(func() { _ = c.DeleteAllOf(ctx, &v1.SandboxTemplate{}, label) })
	gs := newGitSync(t, srv.URL(), func(gs *v1.GitSync) { gs.Spec.Timeout = metav1.Duration{Duration: 5 * time.Minute} })
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)
	uids := func() map[string]types.UID {
		list := &v1.SandboxTemplateList{}
		if err := c.List(ctx, list, label); err != nil {
			t.Fatal(err)
		}
		out := map[string]types.UID{}
		for _, tpl := range list.Items {
			out[tpl.Name] = tpl.UID
		}
		return out
	}
	before := uids()

	srv.Commit("main", testcluster.TemplateFiles(files, "added", added, run))
	token := requestSync(t, gs)
	for deadline := time.Now().Add(time.Minute); len(uids()) == synced; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the sync of the new revision created no template in a minute")
		}
	}
	cluster.Restart(t)
	t.Logf("restarted the API server with %d of %d templates created", len(uids())-synced, added)
	waitHandled(t, gs, token, 5*time.Minute)

	final := waitHandled(t, gs, requestSync(t, gs), 5*time.Minute)
	wantReady(t, final, metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)
	if n := len(final.Status.Inventory); n != synced+added {
		t.Errorf("inventory has %d entries after the restart, want %d", n, synced+added)
	}
	after := uids()
	if len(after) != synced+added {
		t.Errorf("%d templates on the cluster after the restart, want %d", len(after), synced+added)
	}
	for name, uid := range before {
		if after[name] != uid {
			t.Errorf("template %s was deleted (UID %s, now %q)", name, uid, after[name])
		}
	}
}

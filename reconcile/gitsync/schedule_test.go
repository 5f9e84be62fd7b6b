package gitsync_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/gittest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/reconciletest"
)

func TestSuspendAndResume(t *testing.T) {
	srv := gittest.New(t, "", "")
	pool := testcluster.Name("susp")
	c1 := srv.Commit("main", map[string]string{"pool.yaml": poolYAML(pool, "")})
	gs := newGitSync(t, srv.URL(), nil)
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)

	c := testcluster.Get(t).Client
	setSuspend := func(v bool) {
		cur := &v1.GitSync{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(gs), cur); err != nil {
			t.Fatal(err)
		}
		base := client.MergeFrom(cur.DeepCopy())
		cur.Spec.Suspend = v
		if err := c.Patch(context.Background(), cur, base); err != nil {
			t.Fatal(err)
		}
	}
	setSuspend(true)
	c2 := srv.Commit("main", map[string]string{"pool.yaml": strings.Replace(poolYAML(pool, ""), "node-group: gvisor", "node-group: changed", 1)})
	got := sync(t, gs)
	if got.Status.LastAppliedRevision != "main@sha1:"+c1 || got.Status.LastFetchedRevision != "main@sha1:"+c1 {
		t.Errorf("suspended GitSync fetched or applied: %+v", got.Status)
	}
	if p, _ := getPool(t, pool); p == nil || p.Spec.NodeSelector["agentsandbox.dev/node-group"] != "gvisor" {
		t.Errorf("suspended GitSync changed the pool: %+v", p)
	}

	setSuspend(false)
	got = sync(t, gs)
	wantReady(t, got, metav1.ConditionTrue, v1.ReasonReconciliationSucceeded, "main@sha1:"+c2)
	if p, _ := getPool(t, pool); p == nil || p.Spec.NodeSelector["agentsandbox.dev/node-group"] != "changed" {
		t.Errorf("resumed GitSync did not apply: %+v", p)
	}
}

func TestIntervalSyncsWithoutARequest(t *testing.T) {
	srv := gittest.New(t, "", "")
	pool := testcluster.Name("tick")
	srv.Commit("main", map[string]string{"pool.yaml": poolYAML(pool, "")})
	gs := newGitSync(t, srv.URL(), func(gs *v1.GitSync) { gs.Spec.Interval = metav1.Duration{Duration: time.Second} })
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)

	c2 := srv.Commit("main", map[string]string{"pool.yaml": strings.Replace(poolYAML(pool, ""), "node-group: gvisor", "node-group: changed", 1)})
	c := testcluster.Get(t).Client
	testcluster.Eventually(t, "the next interval to apply "+c2, func() (bool, string) {
		got := &v1.GitSync{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(gs), got); err != nil {
			return false, err.Error()
		}
		return got.Status.LastAppliedRevision == "main@sha1:"+c2, got.Status.LastAppliedRevision
	})
	if p, _ := getPool(t, pool); p == nil || p.Spec.NodeSelector["agentsandbox.dev/node-group"] != "changed" {
		t.Errorf("pool after the interval sync: %+v", p)
	}
}

// TestRetryIntervalRetriesAFailure: a failed sync is tried again after
// spec.retryInterval, not the hour-long interval, so a fix pushed after a
// broken revision is applied without a request.
func TestRetryIntervalRetriesAFailure(t *testing.T) {
	srv := gittest.New(t, "", "")
	pool := testcluster.Name("retry")
	srv.Commit("main", map[string]string{"pool.yaml": "kind: [NodePool\n"})
	gs := newGitSync(t, srv.URL(), func(gs *v1.GitSync) { gs.Spec.RetryInterval = metav1.Duration{Duration: time.Second} })
	if r := conditions.Get(sync(t, gs), v1.ReadyCondition); r == nil || r.Status != metav1.ConditionFalse {
		t.Fatalf("Ready after a broken revision: %+v", r)
	}

	fixed := srv.Commit("main", map[string]string{"pool.yaml": poolYAML(pool, "")})
	c := testcluster.Get(t).Client
	testcluster.Eventually(t, "a retry to apply "+fixed, func() (bool, string) {
		got := &v1.GitSync{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(gs), got); err != nil {
			return false, err.Error()
		}
		return got.Status.LastAppliedRevision == "main@sha1:"+fixed, fmt.Sprintf("%v", got.Status.Conditions)
	})
	if _, ok := getPool(t, pool); !ok {
		t.Error("the fixed revision's pool is not on the cluster")
	}
}

// waitIntervalSync waits up to timeout for the next successful sync of gs
// after one that ended with before, and returns how long that sync took.
func waitIntervalSync(t testing.TB, gs *v1.GitSync, before samples, timeout time.Duration) time.Duration {
	t.Helper()
	var now samples
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		now = syncSamples(t, gs.Name)["success"]
		return now.count > before.count, nil
	})
	if err != nil {
		t.Fatalf("no interval sync within %s (%d successful syncs so far)", timeout, now.count)
	}
	return time.Duration((now.sum - before.sum) / float64(now.count-before.count) * float64(time.Second))
}

func TestTimeout(t *testing.T) {
	srv := gittest.New(t, "", "")
	srv.Commit("main", map[string]string{"pool.yaml": poolYAML(testcluster.Name("slow"), "")})
	gs := newGitSync(t, srv.URL(), func(gs *v1.GitSync) { gs.Spec.Timeout = metav1.Duration{Duration: time.Millisecond} })
	got := sync(t, gs)
	wantReady(t, got, metav1.ConditionFalse, v1.ReasonFetchFailed, "spec.timeout 1ms exceeded")
	if len(got.Status.Inventory) != 0 {
		t.Errorf("inventory after a timed-out sync: %v", got.Status.Inventory)
	}
}

// TestSyncQueuedDuringASyncReadsItsStatus requests a sync while another
// runs, twice. The queued sync starts the moment the running one returns,
// before the cache has the status that one wrote, and must still act on
// it: not validate every object again as for a new spec (the first
// GitSync's first sync has not recorded observedGeneration yet), and prune
// from the inventory the running sync wrote, not the one before it (or
// what it added and the next revision drops is left behind for good).
func TestSyncQueuedDuringASyncReadsItsStatus(t *testing.T) {
	srv := gittest.New(t, "", "")
	prefix, dropped := testcluster.Name("queued"), testcluster.Name("dropped")
	templates := func(image string) map[string]string {
		files := map[string]string{}
		for i := range 300 {
			files[fmt.Sprintf("t%03d.yaml", i)] = fmt.Sprintf("apiVersion: agentsandbox.dev/v1alpha1\nkind: SandboxTemplate\nmetadata:\n  name: %s-%d\nspec:\n  image: %s\n", prefix, i, image)
		}
		return files
	}
	mine := func(w reconciletest.Write) bool { return strings.Contains(w.Path, "/sandboxtemplates/"+prefix+"-") }
	since := reconciletest.WriteCount()
	// requestWhileSyncing waits for the running sync's first write after
	// mark, then commits files (if any) and requests the next sync.
	requestWhileSyncing := func(gs *v1.GitSync, mark int, files map[string]string) string {
		testcluster.Eventually(t, "the running sync's first write", func() (bool, string) {
			n := len(reconciletest.Writes(mark, mine))
			return n > 0, fmt.Sprintf("%d writes", n)
		})
		if files != nil {
			srv.Commit("main", files)
		}
		return requestSync(t, gs)
	}

	srv.Commit("main", templates("python:3.12"))
	gs := newGitSync(t, srv.URL(), nil) // its creation starts the first sync
	wantReady(t, waitHandled(t, gs, requestWhileSyncing(gs, since, nil), time.Minute), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)
	// One apply each by the first sync (new objects are validated in the
	// process), none by the queued one (a request retried after a 429
	// counts twice, hence no exact figure): dry-running them again would
	// make it 600.
	if n := len(reconciletest.Writes(since, mine)); n < 300 || n >= 600 {
		t.Errorf("%d writes to the 300 templates, want 300: one apply each by the first sync (new objects need no dry run), none by the queued one", n)
	}

	withDropped := templates("python:3.13")
	withDropped["dropped.yaml"] = "apiVersion: agentsandbox.dev/v1alpha1\nkind: SandboxTemplate\nmetadata:\n  name: " + dropped + "\nspec:\n  image: python:3.13\n"
	srv.Commit("main", withDropped)
	mark := reconciletest.WriteCount()
	requestSync(t, gs)
	wantReady(t, waitHandled(t, gs, requestWhileSyncing(gs, mark, templates("python:3.13")), time.Minute), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)
	tpl := &v1.SandboxTemplate{}
	err := testcluster.Get(t).Client.Get(context.Background(), client.ObjectKey{Name: dropped}, tpl)
	if err == nil && tpl.DeletionTimestamp == nil {
		t.Errorf("template %s, applied by one sync and dropped by the revision the queued one applied, was not pruned", dropped)
	} else if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

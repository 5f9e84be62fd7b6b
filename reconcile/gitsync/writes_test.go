package gitsync_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/gittest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/reconciletest"
)

// TestMetricsAndEvents: syncs are measured by result, and events are
// recorded on change and failure only, not on a resync that changes nothing.
func TestMetricsAndEvents(t *testing.T) {
	srv := gittest.New(t, "", "")
	srv.Commit("main", map[string]string{"pool.yaml": poolYAML(testcluster.Name("ev"), "")})
	gs := newGitSync(t, srv.URL(), nil)
	eventWrites := func(w reconciletest.Write) bool { return strings.Contains(w.Path, "/events") }

	since := reconciletest.WriteCount()
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)
	testcluster.Eventually(t, "an event for the initial sync", func() (bool, string) {
		n := len(reconciletest.Writes(since, eventWrites))
		return n > 0, fmt.Sprintf("%d event writes", n)
	})

	time.Sleep(time.Second) // let the recorder flush
	since = reconciletest.WriteCount()
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)
	time.Sleep(time.Second)
	if w := reconciletest.Writes(since, eventWrites); len(w) != 0 {
		t.Errorf("a no-op resync wrote events: %v", w)
	}

	srv.Stop()
	since = reconciletest.WriteCount()
	wantReady(t, sync(t, gs), metav1.ConditionFalse, v1.ReasonFetchFailed)
	testcluster.Eventually(t, "a warning for the failure", func() (bool, string) {
		n := len(reconciletest.Writes(since, eventWrites))
		return n > 0, fmt.Sprintf("%d event writes", n)
	})

	counts := map[string]uint64{}
	for result, got := range syncSamples(t, gs.Name) {
		counts[result] = got.count
	}
	// Creating the GitSync may sync it once more than the two requests.
	if counts["success"] < 2 || counts["success"] > 3 || counts[v1.ReasonFetchFailed] != 1 {
		t.Errorf("sync duration sample counts by result: %v, want 2 or 3 success and 1 %s", counts, v1.ReasonFetchFailed)
	}
}

// syncSamples reads agentsandbox_gitsync_duration_seconds for the GitSync
// name, by result: how many syncs ended so and how long they took in all.
func syncSamples(t testing.TB, name string) map[string]samples {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]samples{}
	for _, mf := range mfs {
		if mf.GetName() != "agentsandbox_gitsync_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["name"] == name {
				out[labels["result"]] = samples{m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()}
			}
		}
	}
	return out
}

// TestIntervalResyncWritesNothing: a resync on the interval, which no
// request asked for, of a revision nobody touched sends no write at all:
// no dry run, no apply and no status patch (nothing in the status would
// change).
func TestIntervalResyncWritesNothing(t *testing.T) {
	srv := gittest.New(t, "", "")
	pool := testcluster.Name("quiet")
	srv.Commit("main", map[string]string{"pool.yaml": poolYAML(pool, "")})
	gs := newGitSync(t, srv.URL(), func(gs *v1.GitSync) { gs.Spec.Interval = metav1.Duration{Duration: time.Second} })
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)

	// Two interval syncs: the first may still record the memo of objects
	// the request's sync applied; the second has nothing left to do.
	waitIntervalSync(t, gs, syncSamples(t, gs.Name)["success"], time.Minute)
	since, before := reconciletest.WriteCount(), syncSamples(t, gs.Name)["success"]
	waitIntervalSync(t, gs, before, time.Minute)
	time.Sleep(200 * time.Millisecond) // the deferred status patch follows the metric
	if w := reconciletest.Writes(since, func(w reconciletest.Write) bool {
		return strings.Contains(w.Path, gs.Name) || strings.Contains(w.Path, pool)
	}); len(w) > 0 {
		t.Errorf("an interval resync of an untouched revision wrote: %v", w)
	}
}

// TestUnchangedRevisionIsNotCloned: when ls-remote shows the revision
// already checked out, the sync re-applies it without cloning; a new
// revision is cloned.
func TestUnchangedRevisionIsNotCloned(t *testing.T) {
	srv := gittest.New(t, "", "")
	pool := testcluster.Name("noclone")
	c1 := srv.Commit("main", map[string]string{"pool.yaml": poolYAML(pool, "")})
	gs := newGitSync(t, srv.URL(), nil)
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)

	srv.RefuseFetches(true)
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded, "main@sha1:"+c1)
	c2 := srv.Commit("main", map[string]string{"pool.yaml": poolYAML(pool, "  labels:\n    team: z\n")})
	wantReady(t, sync(t, gs), metav1.ConditionFalse, v1.ReasonFetchFailed, "failed to clone", "the cluster keeps revision main@sha1:"+c1)
	srv.RefuseFetches(false)
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded, "main@sha1:"+c2)
}

// TestNoOpResyncWritesNothing: resyncing a revision nobody has touched
// sends no request but reads and its own status patch (no dry run, no
// apply), and an object changed on the cluster in between is still
// checked and put back: a spec edit (its generation moves) and a declared
// label removed (it does not).
func TestNoOpResyncWritesNothing(t *testing.T) {
	srv := gittest.New(t, "", "")
	pool, tpl := testcluster.Name("noop"), testcluster.Name("noop")
	srv.Commit("main", map[string]string{
		"pool.yaml":     poolYAML(pool, "  labels:\n    team: z\n"),
		"template.yaml": templateYAML(tpl, pool, "python:3.13"),
	})
	gs := newGitSync(t, srv.URL(), nil)
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)

	since := reconciletest.WriteCount()
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)
	mine := reconciletest.Writes(since, func(w reconciletest.Write) bool {
		return strings.Contains(w.Path, "/nodepools/"+pool) || strings.Contains(w.Path, "/sandboxtemplates/"+tpl) ||
			strings.Contains(w.Path, "/gitsyncs/"+gs.Name) && !strings.HasSuffix(w.Path, "/status")
	})
	if len(mine) > 0 {
		t.Errorf("a no-op resync sent %d writes or dry runs: %v", len(mine), mine)
	}

	edited := getTemplate(t, tpl)
	edited.Spec.Image = "python:hand-edited"
	if err := testcluster.Get(t).Client.Update(context.Background(), edited, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)
	if img := getTemplate(t, tpl).Spec.Image; img != "python:3.13" {
		t.Errorf("a hand edit between two syncs of one revision was not reverted: image %q", img)
	}

	unlabelled, _ := getPool(t, pool)
	delete(unlabelled.Labels, "team")
	if err := testcluster.Get(t).Client.Update(context.Background(), unlabelled, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	wantReady(t, sync(t, gs), metav1.ConditionTrue, v1.ReasonReconciliationSucceeded)
	if p, _ := getPool(t, pool); p.Labels["team"] != "z" {
		t.Errorf("a declared label removed between two syncs of one revision was not put back: labels %v", p.Labels)
	}
}

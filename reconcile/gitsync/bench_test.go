package gitsync_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/gittest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/gitsync"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/reconciletest"
)

// BenchmarkSync measures a GitSync of N templates (files of 10 documents):
// converging from empty, with the controller's writes per object (dry runs
// included: the API server does not persist them, but they cost as much to
// serve); then the next resync, which the interval starts (a request would
// rightly have the status record it), with its writes, all of them, and
// reads; and the peak RSS of the benchmark process (reconciler, Git client
// and test together: an upper bound on the reconciler's). Then, for the
// ratio, `kubectl apply --server-side` of a 1,000-object subset (100 files),
// first and again unchanged.
//
//	make bench-gitops (go test -run '^$' -bench Sync -benchtime 1x ./reconcile/gitsync/)
func BenchmarkSync(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("declarations=%d", n), func(b *testing.B) {
			for range b.N {
				benchSync(b, n)
			}
		})
	}
	b.Run("kubectl=1000", func(b *testing.B) {
		for range b.N {
			benchKubectl(b, 100)
		}
	})
}

// benchInterval is the GitSync's interval in the benchmark: long enough
// not to start during the converge's own syncs, short enough to wait for.
const benchInterval = 20 * time.Second

func benchSync(b *testing.B, n int) {
	srv := gittest.New(b, "", "")
	srv.Commit("main", templateFiles(testcluster.Name("bench"), n/10))
	gs := newGitSync(b, srv.URL(), func(gs *v1.GitSync) {
		gs.Spec.Timeout = metav1.Duration{Duration: 20 * time.Minute}
		gs.Spec.Interval = metav1.Duration{Duration: benchInterval}
	})

	start, writes, reads := time.Now(), reconciletest.WriteCount(), reconciletest.ReadCount()
	got := waitHandled(b, gs, requestSync(b, gs), 20*time.Minute)
	converge := time.Since(start)
	if len(got.Status.Inventory) != n {
		b.Fatalf("inventory has %d entries: %v", len(got.Status.Inventory), got.Status.Conditions)
	}
	b.ReportMetric(converge.Seconds(), "converge-s")
	b.ReportMetric(float64(n)/converge.Seconds(), "objects/s")
	b.ReportMetric(float64(reconciletest.WriteCount()-writes)/float64(n), "converge-writes/object")
	b.ReportMetric(float64(reconciletest.ReadCount()-reads)/float64(n), "converge-reads/object")

	writes, reads = reconciletest.WriteCount(), reconciletest.ReadCount()
	noop := waitIntervalSync(b, gs, syncSamples(b, gs.Name)["success"], 3*benchInterval)
	time.Sleep(time.Second) // a status patch would follow the metric
	if r := gitsyncReady(getGitSync(b, gs)); r != gitsync.ReasonSucceeded {
		b.Fatalf("no-op resync: %s", r)
	}
	b.ReportMetric(noop.Seconds(), "noop-s")
	b.ReportMetric(float64(len(reconciletest.Writes(writes, func(reconciletest.Write) bool { return true }))), "noop-writes")
	b.ReportMetric(float64(reconciletest.ReadCount()-reads), "noop-reads")
	reconciletest.ReportPeakRSS(b)
}

func getGitSync(t testing.TB, gs *v1.GitSync) *v1.GitSync {
	t.Helper()
	got := &v1.GitSync{}
	if err := testcluster.Get(t).Client.Get(context.Background(), client.ObjectKeyFromObject(gs), got); err != nil {
		t.Fatal(err)
	}
	return got
}

// benchKubectl applies files templates with kubectl's server-side apply,
// as a pipeline without the reconciler would, then again unchanged.
func benchKubectl(b *testing.B, files int) {
	dir := b.TempDir()
	for name, content := range templateFiles(testcluster.Name("kubectl"), files) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	cluster := testcluster.Get(b)
	b.Cleanup(func() { cluster.Kubectl(b, "delete", "--wait=false", "-f", dir) })
	apply := func() time.Duration {
		start := time.Now()
		cluster.Kubectl(b, "apply", "--server-side", "--field-manager", "bench-kubectl", "-f", dir)
		return time.Since(start)
	}
	first, again := apply(), apply()
	objects := float64(files * 10)
	b.ReportMetric(first.Seconds(), "converge-s")
	b.ReportMetric(objects/first.Seconds(), "objects/s")
	b.ReportMetric(again.Seconds(), "noop-s")
}

// templateFiles declares files × 10 templates, ten documents a file.
func templateFiles(prefix string, files int) map[string]string {
	out := map[string]string{}
	for f := range files {
		var docs []string
		for d := range 10 {
			docs = append(docs, fmt.Sprintf("apiVersion: agentsandbox.dev/v1alpha1\nkind: SandboxTemplate\nmetadata:\n  name: %s-%d-%d\nspec:\n  image: python:3.12\n", prefix, f, d))
		}
		out[fmt.Sprintf("t%04d.yaml", f)] = strings.Join(docs, "---\n")
	}
	return out
}

func gitsyncReady(gs *v1.GitSync) string {
	for _, c := range gs.Status.Conditions {
		if c.Type == v1.ReadyCondition {
			return c.Reason
		}
	}
	return ""
}

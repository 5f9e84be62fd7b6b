package gitsync_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/gittest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/gitsync"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/reconciletest"
)

// BenchmarkSync measures a GitSync of N templates (files of 10 documents):
// converging from empty, then a resync that changes nothing with the
// controller's non-GET requests of it (dry runs included: the API server
// does not persist them, but they cost as much to serve), and the peak RSS
// of the benchmark process (reconciler, Git server client and test
// together: an upper bound on the reconciler's). Then, for the ratio,
// `kubectl apply --server-side` of a 1,000-object subset (100 files), first
// and again unchanged.
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

func benchSync(b *testing.B, n int) {
	srv := gittest.New(b, "", "")
	srv.Commit("main", templateFiles(testcluster.Name("bench"), n/10))
	gs := newGitSync(b, srv.URL(), func(gs *v1.GitSync) { gs.Spec.Timeout = metav1.Duration{Duration: 20 * time.Minute} })

	start := time.Now()
	got := waitHandled(b, gs, requestSync(b, gs), 20*time.Minute)
	converge := time.Since(start)
	if len(got.Status.Inventory) != n {
		b.Fatalf("inventory has %d entries: %v", len(got.Status.Inventory), got.Status.Conditions)
	}
	since := reconciletest.WriteCount()
	start = time.Now()
	got = waitHandled(b, gs, requestSync(b, gs), 5*time.Minute)
	noop := time.Since(start)
	requests := len(reconciletest.Writes(since, func(w reconciletest.Write) bool { return !strings.Contains(w.Path, "/events") }))
	if r := gitsyncReady(got); r != gitsync.ReasonSucceeded {
		b.Fatalf("no-op resync: %s", r)
	}
	b.ReportMetric(converge.Seconds(), "converge-s")
	b.ReportMetric(float64(n)/converge.Seconds(), "objects/s")
	b.ReportMetric(noop.Seconds(), "noop-s")
	b.ReportMetric(float64(requests), "noop-requests")
	reconciletest.ReportPeakRSS(b)
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

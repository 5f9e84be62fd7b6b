package gitsync_test

import (
	"fmt"
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

// BenchmarkSync1000 measures a GitSync of 1,000 templates (100 files of 10
// documents): converging from empty, then a resync that changes nothing,
// and the controller's non-GET requests of that resync (dry runs included:
// the API server does not persist them, but they cost as much to serve).
// Run: go test -run '^$' -bench Sync1000 -benchtime 1x ./reconcile/gitsync/
func BenchmarkSync1000(b *testing.B) {
	for range b.N {
		srv := gittest.New(b, "", "")
		prefix := testcluster.Name("bench")
		files := map[string]string{}
		for f := range 100 {
			var docs []string
			for d := range 10 {
				docs = append(docs, fmt.Sprintf("apiVersion: agentsandbox.dev/v1alpha1\nkind: SandboxTemplate\nmetadata:\n  name: %s-%d-%d\nspec:\n  image: python:3.12\n", prefix, f, d))
			}
			files[fmt.Sprintf("t%03d.yaml", f)] = strings.Join(docs, "---\n")
		}
		srv.Commit("main", files)
		gs := newGitSync(b, srv.URL(), func(gs *v1.GitSync) { gs.Spec.Timeout = metav1.Duration{Duration: 10 * time.Minute} })

		start := time.Now()
		got := sync(b, gs)
		converge := time.Since(start)
		if len(got.Status.Inventory) != 1000 {
			b.Fatalf("inventory has %d entries: %v", len(got.Status.Inventory), got.Status.Conditions)
		}
		since := reconciletest.WriteCount()
		start = time.Now()
		got = sync(b, gs)
		noop := time.Since(start)
		requests := len(reconciletest.Writes(since, func(w reconciletest.Write) bool { return !strings.Contains(w.Path, "/events") }))
		if r := gitsyncReady(got); r != gitsync.ReasonSucceeded {
			b.Fatalf("no-op resync: %s", r)
		}
		b.ReportMetric(converge.Seconds(), "converge-s")
		b.ReportMetric(noop.Seconds(), "noop-s")
		b.ReportMetric(float64(requests), "noop-requests")
	}
}

func gitsyncReady(gs *v1.GitSync) string {
	for _, c := range gs.Status.Conditions {
		if c.Type == v1.ReadyCondition {
			return c.Reason
		}
	}
	return ""
}

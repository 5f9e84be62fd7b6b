package cluster_test

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"sort"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gateway/cluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
)

// BenchmarkDirectory1000 measures what the gateway keeps to know 1,000
// sandboxes (each a pod, a Sandbox and a template of its own, as on a
// cluster of 1,000 owners): the Go heap the Directory's caches hold once
// synced, and the time of a lookup. make bench runs it (-benchtime 1x).
func BenchmarkDirectory1000(b *testing.B) {
	const sandboxes = 1000
	tc := testcluster.Get(b)
	c, ctx := tc.Client, context.Background()
	prefix := testcluster.Name("gwbench")
	var g errgroup.Group
	g.SetLimit(32)
	for i := range sandboxes {
		g.Go(func() error { return benchSandbox(ctx, c, prefix, i) })
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = c.DeleteAllOf(context.Background(), &v1.Sandbox{}, client.MatchingLabels{"bench": prefix})
		_ = c.DeleteAllOf(context.Background(), &v1.SandboxTemplate{}, client.MatchingLabels{"bench": prefix})
		_ = c.DeleteAllOf(context.Background(), &corev1.Namespace{}, client.MatchingLabels{"bench": prefix})
	})
	var ips []netip.Addr
	testcluster.Eventually(b, "1,000 sandbox pods with addresses", func() (bool, string) {
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.MatchingLabels{"bench": prefix}); err != nil {
			return false, err.Error()
		}
		ips = ips[:0]
		for _, p := range pods.Items {
			if ip, err := netip.ParseAddr(p.Status.PodIP); err == nil {
				ips = append(ips, ip)
			}
		}
		return len(ips) == sandboxes, fmt.Sprintf("%d of %d", len(ips), sandboxes)
	})

	before := heapInUse()
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dir, err := cluster.NewDirectory(dctx, tc.Config)
	if err != nil {
		b.Fatal(err)
	}
	heap := heapInUse() - before
	b.ResetTimer()
	var lookups []time.Duration
	for range b.N {
		for _, ip := range ips {
			start := time.Now()
			if _, ok := dir.Client(ip); !ok {
				b.Fatalf("sandbox at %s not found", ip)
			}
			lookups = append(lookups, time.Since(start))
		}
	}
	b.StopTimer()
	sort.Slice(lookups, func(i, j int) bool { return lookups[i] < lookups[j] })
	p50, p99 := lookups[len(lookups)/2], lookups[len(lookups)*99/100]
	b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(p50.Microseconds()), "lookup-p50-µs")
	b.ReportMetric(float64(p99.Microseconds()), "lookup-p99-µs")
	b.Logf("Directory of %d sandboxes: %.1f MiB of heap once synced (%.1f KiB each); lookup p50 %s, p99 %s",
		sandboxes, float64(heap)/(1<<20), float64(heap)/1024/sandboxes, p50, p99)
	runtime.KeepAlive(dir)
}

// benchSandbox makes what a sandbox is to the Directory: its namespace,
// its pod, its Sandbox (status naming the namespace) and its template.
func benchSandbox(ctx context.Context, c client.Client, prefix string, i int) error {
	name := fmt.Sprintf("%s-%d", prefix, i)
	labels := map[string]string{"bench": prefix}
	tpl := &v1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: v1.SandboxTemplateSpec{Image: "python:3.12", Network: v1.Network{
			Egress:    []v1.EgressRule{{Hosts: []string{"pypi.org", "*.pythonhosted.org", "github.com"}, Ports: []v1.NetworkPort{{Port: 443}}}},
			Endpoints: []v1.Endpoint{{Name: "openai", URL: "https://api.openai.com"}},
		}},
	}
	sbx := &v1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       v1.SandboxSpec{TemplateRef: &v1.LocalObjectReference{Name: name}, Owner: name + "@example.com"},
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: environment.NamespaceName(name), Labels: labels}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: environment.PodName, Labels: map[string]string{
			v1.LabelManagedBy: v1.ManagedByValue, v1.LabelTemplate: name, "bench": prefix,
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "python:3.12"}}},
	}
	for _, obj := range []client.Object{tpl, sbx, ns} {
		if err := c.Create(ctx, obj); err != nil {
			return err
		}
	}
	if err := createPod(ctx, c, pod); err != nil {
		return err
	}
	sbx.Status.Namespace = ns.Name
	return c.Status().Update(ctx, sbx)
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

package bench_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/kubescheme"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/latency"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/reconciletest"
)

// BenchmarkAPICreateWatch is the second floor: a ConfigMap created → its
// add event seen by a watch, the path a claim's Ready takes back to the
// client.
func BenchmarkAPICreateWatch(b *testing.B) {
	c := testcluster.Get(b).Client
	ctx := context.Background()
	ns := floorNamespace(b)
	informers, err := cache.New(testcluster.Get(b).Config, cache.Options{
		Scheme: kubescheme.Scheme, DefaultNamespaces: map[string]cache.Config{ns: {}},
	})
	if err != nil {
		b.Fatal(err)
	}
	inf, err := informers.GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]chan struct{}{}
	expect := func(name string) chan struct{} {
		ch := make(chan struct{})
		mu.Lock()
		seen[name] = ch
		mu.Unlock()
		return ch
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		cm, _ := obj.(*corev1.ConfigMap)
		mu.Lock()
		ch := seen[cm.GetName()]
		delete(seen, cm.GetName())
		mu.Unlock()
		if ch != nil {
			close(ch)
		}
	}}); err != nil {
		b.Fatal(err)
	}
	watchCtx, cancel := context.WithCancel(ctx)
	b.Cleanup(cancel)
	go func() { _ = informers.Start(watchCtx) }()
	informers.WaitForCacheSync(watchCtx)
	for _, clients := range []int{1, 20} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			latency.Run(b, clients, func() time.Duration {
				name := testcluster.Name("watch")
				added := expect(name)
				start := time.Now()
				if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
					b.Error(err)
					return 0
				}
				select {
				case <-added:
				case <-time.After(time.Minute):
					b.Errorf("no watch event for %s within a minute", name)
				}
				return time.Since(start)
			})
		})
	}
}

// BenchmarkAPIThroughput is the API server's write ceiling here: ConfigMap
// creates a second from 20 clients.
func BenchmarkAPIThroughput(b *testing.B) {
	c := testcluster.Get(b).Client
	ns := floorNamespace(b)
	start := time.Now()
	latency.Run(b, 20, func() time.Duration {
		begin := time.Now()
		if err := c.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "tp-"}}); err != nil {
			b.Error(err)
		}
		return time.Since(begin)
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "writes/s")
}

// floorNamespace is a namespace for the floor's ConfigMaps, made once no
// namespace is terminating: the floor is the API server's when quiet.
func floorNamespace(b *testing.B) string {
	testcluster.Get(b).WaitNoTerminatingNamespaces(b)
	c := testcluster.Get(b).Client
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("bench-floor")}}
	if err := c.Create(context.Background(), ns); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Delete(context.Background(), ns) })
	return ns.Name
}

// BenchmarkWarmPoolFill1000 creates a warm pool of 1,000 and times it from
// empty to every member Ready. It reports the controllers' API writes per
// member (from the counting transport of the in-process reconciler) and
// the peak RSS of the benchmark process, reconciler included: an upper
// bound on the reconciler's own. Run it once (-benchtime 1x).
func BenchmarkWarmPoolFill1000(b *testing.B) {
	const size = 1000
	c := testcluster.Get(b).Client
	ctx := context.Background()
	for b.Loop() {
		tpl := &v1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("fill")}, Spec: v1.SandboxTemplateSpec{Image: "python:3.12"}}
		if err := c.Create(ctx, tpl); err != nil {
			b.Fatal(err)
		}
		// Deleting 1,000 namespaces takes the namespace controller a while;
		// the cluster finishes it after the benchmark.
		b.Cleanup(func() { _ = c.Delete(context.Background(), tpl) })
		pool := &v1.WarmPool{
			ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("fill")},
			Spec:       v1.WarmPoolSpec{TemplateRef: v1.LocalObjectReference{Name: tpl.Name}, Replicas: ptr.To(int32(size))},
		}
		testcluster.Get(b).WaitNoTerminatingNamespaces(b)
		writes := reconciletest.WriteCount()
		start := time.Now()
		if err := c.Create(ctx, pool); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Delete(context.Background(), pool) })
		for deadline := start.Add(10 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
			if err := c.Get(ctx, client.ObjectKeyFromObject(pool), pool); err == nil && pool.Status.ReadyReplicas == size {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("pool of %d not full after 10 minutes: %d ready", size, pool.Status.ReadyReplicas)
			}
		}
		b.ReportMetric(time.Since(start).Seconds(), "fill-s")
		b.ReportMetric(float64(reconciletest.WriteCount()-writes)/size, "writes/member")
		reconciletest.ReportPeakRSS(b)
	}
}

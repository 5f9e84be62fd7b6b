// Package bench measures claim latency against the API server's own floor,
// and OpenTofu applying and planning 200 resources, on the test cluster with
// the reconciler running in-process:
//
//	make bench     (bench/floor's ClaimWrites, then here -bench
//	                'APICreate|WarmClaim|ClaimAgainstFloor' -benchtime 100x, then
//	                SequentialClaims 20x, APIThroughput 2000x,
//	                WarmPoolFill1000 and Terraform200 1x)
//
// Each benchmark reports its figures (p50/p95/p99 latency in milliseconds,
// or seconds per tofu command) as custom metrics beside the usual ns/op, so
// one run prints the tables bench/README.md quotes.
package bench_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/kubescheme"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/apirequests"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/claimfloor"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/latency"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/reconciletest"
)

func TestMain(m *testing.M) {
	reconciletest.Main(m, func(mgr ctrl.Manager) error { return reconcile.SetupControllers(mgr, reconcile.Options{}) })
}

// BenchmarkAPICreate is the floor: one ConfigMap create, as the API server
// answers it.
func BenchmarkAPICreate(b *testing.B) {
	c := testcluster.Get(b).Client
	ns := floorNamespace(b)
	for _, clients := range []int{1, 20} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			latency.Run(b, clients, func() time.Duration { return createConfigMap(b, c, ns) })
		})
	}
}

// createConfigMap creates a ConfigMap in ns and returns how long the API
// server took to answer.
func createConfigMap(b *testing.B, c client.Client, ns string) time.Duration {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "floor-"}}
	start := time.Now()
	if err := c.Create(context.Background(), cm); err != nil {
		b.Error(err)
	}
	return time.Since(start)
}

// readyWatcher tells waiters when a sandbox first shows Ready, from a watch
// (an informer), as a client would learn it.
type readyWatcher struct {
	mu      sync.Mutex
	waiters map[string]chan *v1.Sandbox
}

func newReadyWatcher(b *testing.B) *readyWatcher {
	cluster := testcluster.Get(b)
	w := &readyWatcher{waiters: map[string]chan *v1.Sandbox{}}
	// Without their managed fields, as the reconciler caches them: at
	// scale this watch of every Sandbox shares the process it measures.
	// Nor does it see ClaimAgainstFloor's floor claims, as the reconciler
	// does not (reconciletest.Hidden): those watch their own.
	notHidden, err := labels.Parse("!" + reconciletest.Hidden)
	if err != nil {
		b.Fatal(err)
	}
	informers, err := cache.New(cluster.Config, cache.Options{
		Scheme: kubescheme.Scheme, DefaultTransform: cache.TransformStripManagedFields(), DefaultLabelSelector: notHidden,
	})
	if err != nil {
		b.Fatal(err)
	}
	inf, err := informers.GetInformer(context.Background(), &v1.Sandbox{})
	if err != nil {
		b.Fatal(err)
	}
	notify := func(obj any) {
		s, ok := obj.(*v1.Sandbox)
		if !ok || !conditions.IsTrue(s, v1.ReadyCondition) {
			return
		}
		w.mu.Lock()
		ch := w.waiters[s.Name]
		delete(w.waiters, s.Name)
		w.mu.Unlock()
		if ch != nil {
			ch <- s
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: notify, UpdateFunc: func(_, obj any) { notify(obj) },
	}); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	go func() { _ = informers.Start(ctx) }()
	informers.WaitForCacheSync(ctx)
	return w
}

func (w *readyWatcher) expect(name string) chan *v1.Sandbox {
	ch := make(chan *v1.Sandbox, 1)
	w.mu.Lock()
	w.waiters[name] = ch
	w.mu.Unlock()
	return ch
}

// claim creates a Sandbox claiming from the pool and returns it as the
// watch first saw it Ready (nil if not within a minute) and how long that
// took from the create.
func (w *readyWatcher) claim(b *testing.B, pool string) (*v1.Sandbox, time.Duration) {
	s := &v1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("claim")},
		Spec:       v1.SandboxSpec{WarmPoolRef: &v1.LocalObjectReference{Name: pool}, Owner: "bench@example.com"},
	}
	ready := w.expect(s.Name)
	start := time.Now()
	if err := testcluster.Get(b).Client.Create(context.Background(), s); err != nil {
		b.Error(err)
		return nil, 0
	}
	b.Cleanup(func() { _ = testcluster.Get(b).Client.Delete(context.Background(), s) })
	select {
	case got := <-ready:
		return got, time.Since(start)
	case <-time.After(time.Minute):
		b.Errorf("sandbox %s not Ready within a minute", s.Name)
		return nil, time.Since(start)
	}
}

// fullPool creates a template and a warm pool of size and waits until
// every member is Ready and no namespace is terminating: the namespaces of
// an earlier run (or sub-benchmark) being deleted would load the API
// server while the caller measures.
func fullPool(b *testing.B, size int32) *v1.WarmPool {
	c := testcluster.Get(b).Client
	ctx := context.Background()
	tpl := &v1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("bench")}, Spec: v1.SandboxTemplateSpec{Image: "python:3.12"}}
	if err := c.Create(ctx, tpl); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Delete(ctx, tpl) })
	pool := &v1.WarmPool{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("bench")},
		Spec:       v1.WarmPoolSpec{TemplateRef: v1.LocalObjectReference{Name: tpl.Name}, Replicas: ptr.To(size)},
	}
	if err := c.Create(ctx, pool); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Delete(ctx, pool) })
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pool), pool); err == nil && pool.Status.ReadyReplicas == size {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("pool of %d not full: %d ready", size, pool.Status.ReadyReplicas)
		}
	}
	testcluster.Get(b).WaitNoTerminatingNamespaces(b)
	return pool
}

// BenchmarkWarmClaim is a Sandbox with a warmPoolRef created → Ready seen by
// the client's watch, against a pool large enough to serve every claim warm
// while it refills.
func BenchmarkWarmClaim(b *testing.B) {
	watcher := newReadyWatcher(b)
	for _, clients := range []int{1, 20} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			pool := fullPool(b, int32(b.N))
			var warm atomic.Int64
			writes, reads := reconciletest.WriteCount(), reconciletest.ReadCount()
			// The API server's metrics are read before the process's CPU
			// is: parsing them costs half a second of it, which is the
			// benchmark's, not the claims'.
			requests := apirequests.Take(b, testcluster.Get(b).Config)
			passes, cpu := sandboxPasses(b), cpuTime()
			latency.Run(b, clients, func() time.Duration {
				s, d := watcher.claim(b, pool.Name)
				if s != nil && s.Status.LaunchType == v1.LaunchWarm {
					warm.Add(1)
				}
				return d
			})
			// The process's: the reconciler's, its informers' and the
			// clients'.
			b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/1000/float64(b.N), "cpu-ms/claim")
			apirequests.Report(b, testcluster.Get(b).Config, requests, "claim")
			b.ReportMetric(float64(warm.Load())/float64(b.N), "warm-ratio")
			// The client's create, and the controllers' writes but the
			// refill's (building members is the pool's cost, not the
			// claim's).
			claimWrites := reconciletest.Writes(writes, func(w reconciletest.Write) bool { return !refillWrite(w) })
			b.ReportMetric(1+float64(len(claimWrites))/float64(b.N), "writes/claim")
			// Reads past the cache: a claim should need none.
			b.ReportMetric(float64(reconciletest.ReadCount()-reads)/float64(b.N), "reads/claim")
			// The claim's pass and the one its status write brings; any
			// more take CPU from the cores the API server answers the
			// next claims on.
			b.ReportMetric((sandboxPasses(b)-passes)/float64(b.N), "passes/claim")
		})
	}
}

// BenchmarkClaimAgainstFloor times warm claims from one client, each beside
// its floor: the same three writes and two watch events with no controller,
// their objects hidden from the controllers running here
// (reconciletest.Hidden). Two floors: "watches=2" is the floor of any
// controller-made claim, seen by a controller's watch and its client's,
// each of every Sandbox (claimfloor.Watching); "watches=1", the floor
// until 2026-12-06, has one watch of the claim's Sandbox by name serve
// both, which no controller can (claimfloor.WatchedOp). Paired so, the
// floor is measured on the cluster as it is when the claim is, which a
// separate run of bench/floor is not: its p50 has moved by a fifth from
// one run to the next. Each call rests 10 ms after it (latency.Paired),
// so the work a claim leaves behind (the pass its status write brings)
// lands on neither; back to back, WarmClaim pays it. The pool holds a
// third more members than the claims take, so none is built while they
// run.
func BenchmarkClaimAgainstFloor(b *testing.B) {
	watcher := newReadyWatcher(b)
	floor := claimfloor.New(b, map[string]string{reconciletest.Hidden: "true"})
	for _, watches := range []int{2, 1} {
		b.Run(fmt.Sprintf("watches=%d", watches), func(b *testing.B) {
			testcluster.Get(b).WaitNoTerminatingNamespaces(b)
			members := floor.Members(b, b.N)
			floorOp := func() time.Duration { return floor.WatchedOp(b, members, nil) }
			if watches == 2 {
				watching := floor.Watch(b)
				defer watching.Close()
				floorOp = func() time.Duration { return watching.Op(b, members) }
			}
			pool := fullPool(b, int32(b.N+b.N/3+2))
			claimBesideFloor(b, watcher, pool, floorOp)
		})
	}
}

// claimBesideFloor is BenchmarkClaimAgainstFloor's pairs of a claim from
// pool and a call of floor.
func claimBesideFloor(b *testing.B, watcher *readyWatcher, pool *v1.WarmPool, floor func() time.Duration) {
	requests := apirequests.Take(b, testcluster.Get(b).Config)
	before, cpuBefore := countProcess(b), cpuTime()
	var cold atomic.Int64
	latency.Paired(b, pairSettle, floor, func() time.Duration {
		s, d := watcher.claim(b, pool.Name)
		if s != nil && s.Status.LaunchType != v1.LaunchWarm {
			cold.Add(1)
		}
		return d
	})
	// The process's CPU (the reconciler, its informers and both calls'
	// clients) and its collector's share: what the pair takes from the
	// cores the API server answers on.
	b.ReportMetric(float64((cpuTime()-cpuBefore).Microseconds())/1000/float64(b.N), "cpu-ms/pair")
	b.ReportMetric(float64(countProcess(b).since(before).gcCPU.Microseconds())/1000/float64(b.N), "gc-cpu-ms/pair")
	if cold.Load() > 0 {
		b.Errorf("%d of %d claims were not served warm", cold.Load(), b.N)
	}
	// A pair's: the floor's three writes (watches are not counted) and
	// what the claim set off.
	apirequests.Report(b, testcluster.Get(b).Config, requests, "pair")
}

// pairSettle is the rest after each call of a claim paired with its floor:
// the pass a claim's status write brings takes about 0.4 ms.
const pairSettle = 10 * time.Millisecond

// sandboxPasses is how many passes the sandbox controller has made in this
// process, as controller-runtime counts them for its metrics.
func sandboxPasses(b *testing.B) float64 {
	var passes float64
	sandboxSeries(b, func(family string, m *dto.Metric) {
		if family == "controller_runtime_reconcile_total" {
			passes += m.GetCounter().GetValue()
		}
	})
	return passes
}

// BenchmarkSequentialClaims is an agent's run_once against a pool of 3:
// claim, use the sandbox for half a second, delete it, claim again, from
// one client. The pool must replace each member as it goes, since claims
// one at a time are no burst; warm-ratio says how many claims found one.
// The latency is the claim's alone.
func BenchmarkSequentialClaims(b *testing.B) {
	watcher := newReadyWatcher(b)
	pool := fullPool(b, 3)
	var warm atomic.Int64
	latency.Run(b, 1, func() time.Duration {
		s, d := watcher.claim(b, pool.Name)
		if s == nil {
			return d
		}
		if s.Status.LaunchType == v1.LaunchWarm {
			warm.Add(1)
		}
		time.Sleep(500 * time.Millisecond)
		if err := testcluster.Get(b).Client.Delete(context.Background(), s); err != nil {
			b.Error(err)
		}
		return d
	})
	b.ReportMetric(float64(warm.Load())/float64(b.N), "warm-ratio")
}

// refillWrite tells the writes that build and count pool members: their
// creates (the namespace and the objects in it but the owner's binding,
// which only a claim writes) and the pool's status.
func refillWrite(w reconciletest.Write) bool {
	if w.Method == http.MethodPost {
		for _, resource := range []string{"/namespaces", "/pods", "/networkpolicies", "/resourcequotas", "/limitranges"} {
			if strings.HasSuffix(w.Path, resource) {
				return true
			}
		}
	}
	return strings.Contains(w.Path, "/warmpools/")
}

package bench_test

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/apirequests"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/claimfloor"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/latency"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/reconciletest"
)

// scaleSize is the cluster BenchmarkScale builds: AGENTSANDBOX_SCALE
// sandboxes (default 10,000) on a tenth as many kwok nodes in 10 node
// pools, and 20 warm pools of AGENTSANDBOX_SCALE/200 members (50 at
// 10,000).
type scaleSize struct{ sandboxes, nodes, poolSize int }

func scaleFromEnv(b *testing.B) scaleSize {
	n := 10000
	if s := os.Getenv("AGENTSANDBOX_SCALE"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 200 {
			b.Fatalf("AGENTSANDBOX_SCALE=%q: want a number of sandboxes, 200 or more", s)
		}
	}
	return scaleSize{sandboxes: n, nodes: n / 10, poolSize: n / 200}
}

// scaleRow is one line of BenchmarkScale's table.
type scaleRow struct {
	what, empty, atScale, ratio string
}

// BenchmarkScale builds a cluster of thousands of sandboxes (scaleSize)
// with the reconciler running in-process and measures what grows with
// it, each beside the same measure on the empty cluster where there is
// one: warm claim latency at 1 and 20 clients beside its three-write
// floor (at 1, each claim paired with a floor call), the reconciler's API
// requests at rest, its heap and the process's RSS and CPU at rest and
// through a burst of claims, a restart to all caches synced and the reads
// it costs, the Sandboxes page (its load, a change reaching an open page,
// an open page at rest), and a template change rolling every warm
// member. Last it runs
// the reconciler as a process of its own, for its RSS and CPU at rest
// with Go's default collector and then as deployed, and as deployed
// through a second burst without the benchmark's share.
// It prints a table and reports each figure. Run it alone and once:
//
//	make bench-scale   (go test -run '^$' -bench Scale -benchtime 1x -timeout 90m ./bench/)
func BenchmarkScale(b *testing.B) {
	size := scaleFromEnv(b)
	cluster := testcluster.Get(b)
	c := cluster.Client
	var table []scaleRow
	add := func(what, empty, atScale, ratio string) {
		table = append(table, scaleRow{what, empty, atScale, ratio})
	}
	for b.Loop() {
		watcher := newReadyWatcher(b)
		claimFloor := claimfloor.New(b, map[string]string{reconciletest.Hidden: "true"})
		emptyFloor := apiCreateLatencies(b)
		emptyClaims := claimLatencies(b, watcher, claimFloor, "empty")
		emptyRest := atRest(b, "empty")
		emptyPage := measurePage(b, "empty")

		run := testcluster.Name("scale")
		begin := time.Now()
		templates, pools := populate(b, c, run, size)
		b.Logf("built %d sandboxes on %d nodes with %d warm pools of %d in %s", size.sandboxes, size.nodes, len(pools), size.poolSize, time.Since(begin).Round(time.Second))
		cluster.WaitNoTerminatingNamespaces(b)
		settled := waitRootCAPublished(b)
		add("after the populate: until the root CA is in every namespace", "", settled.Round(time.Second).String(), "")
		settled = waitFirstHeartbeats(b, run)
		add("then until every node has sent its first heartbeat", "", settled.Round(time.Second).String(), "")

		rest := atRest(b, "scale")
		writeHeapProfile(b)
		add("API writes at rest (30 s)", fmt.Sprint(emptyRest.writes), fmt.Sprint(rest.writes), "")
		add("API reads at rest (30 s)", fmt.Sprint(emptyRest.reads), fmt.Sprint(rest.reads), "")
		add("the API server's answers at rest, every client (30 s): total; the most asked",
			fmt.Sprintf("%.0f; %s", emptyRest.served.Total(), emptyRest.served.Top(5)), fmt.Sprintf("%.0f; %s", rest.served.Total(), rest.served.Top(5)),
			ratio(rest.served.Total(), emptyRest.served.Total()))
		add("heap in use at rest", mib(emptyRest.heap), mib(rest.heap), ratio(float64(rest.heap), float64(emptyRest.heap)))
		add("process RSS at rest (reconciler and benchmark)", "", mib(rest.rss), "")
		var cached uint64
		for _, w := range weighCache(b) {
			add("the reconciler's cache: "+w.kind+" (objects, heap)", "", w.String(), "")
			cached += w.bytes
		}
		add("the reconciler's cache: every kind", "", mib(cached), "")
		b.ReportMetric(float64(rest.writes), "rest-writes")
		b.ReportMetric(float64(rest.heap)/(1<<20), "rest-heap-MiB")

		floor := apiCreateLatencies(b)
		claims := claimLatencies(b, watcher, claimFloor, "scale")
		for i, clients := range []int{1, 20} {
			for _, p := range []float64{0.5, 0.99} {
				e, s := percentile(emptyFloor[i], p), percentile(floor[i], p)
				add(fmt.Sprintf("API create p%d, %d client(s): the floor", int(p*100), clients), ms(e), ms(s), ratio(float64(s), float64(e)))
				how := "paired with the claims"
				if clients > 1 {
					how = "mixed with the claims"
				}
				ef, sf := percentile(emptyClaims.floor[i], p), percentile(claims.floor[i], p)
				add(fmt.Sprintf("the claim's three-write floor p%d, %d client(s), %s", int(p*100), clients, how), ms(ef), ms(sf), ratio(float64(sf), float64(ef)))
				e, s = percentile(emptyClaims.latencies[i], p), percentile(claims.latencies[i], p)
				add(fmt.Sprintf("warm claim p%d, %d client(s)", int(p*100), clients), ms(e), ms(s), ratio(float64(s), float64(e)))
				add(fmt.Sprintf("warm claim p%d ÷ its floor's p%d, %d client(s)", int(p*100), int(p*100), clients),
					fmt.Sprintf("%.3f", float64(e)/float64(ef)), fmt.Sprintf("%.3f", float64(s)/float64(sf)), ratio(float64(s)/float64(sf), float64(e)/float64(ef)))
				b.ReportMetric(float64(s)/float64(e), fmt.Sprintf("claim-p%d-c%d-ratio", int(p*100), clients))
				b.ReportMetric(float64(sf)/float64(ef), fmt.Sprintf("floor-p%d-c%d-ratio", int(p*100), clients))
			}
		}
		add(fmt.Sprintf("claims not served warm (of %d)", claimsFrom1+claimsFrom20), strconv.Itoa(emptyClaims.cold), strconv.Itoa(claims.cold), "")
		add(fmt.Sprintf("20 clients' %d claims and %d floor calls: time", claimsFrom20, claimsFrom20), ms(emptyClaims.took20), ms(claims.took20), ratio(float64(claims.took20), float64(emptyClaims.took20)))
		for _, name := range append([]string{benchmarkName}, clusterProcesses...) {
			e, s := emptyClaims.cpu20[name], claims.cpu20[name]
			add(fmt.Sprintf("CPU of %s: at rest (30 s); meanwhile", name),
				ms(emptyRest.cpu[name])+"; "+ms(e), ms(rest.cpu[name])+"; "+ms(s), ratio(float64(s), float64(e)))
		}
		e, s := emptyClaims.inside20, claims.inside20
		add("meanwhile this process's collector: CPU, cycles",
			fmt.Sprintf("%s, %d", ms(e.gcCPU), e.gcCycles), fmt.Sprintf("%s, %d", ms(s.gcCPU), s.gcCycles), ratio(float64(s.gcCPU), float64(e.gcCPU)))
		add("meanwhile its goroutines' wait for a core: p50, p99",
			ms(e.runWait(0.5))+", "+ms(e.runWait(0.99)), ms(s.runWait(0.5))+", "+ms(s.runWait(0.99)), ratio(float64(s.runWait(0.99)), float64(e.runWait(0.99))))
		add("meanwhile the sandbox controller's requests: count, wait in its queue",
			e.queued.String(), s.queued.String(), ratio(float64(s.queued.mean()), float64(e.queued.mean())))
		add("meanwhile the sandbox controller's passes: count, time",
			e.passes.String(), s.passes.String(), ratio(float64(s.passes.mean()), float64(e.passes.mean())))
		add("warm claim ÷ its floor, 1 client: the median of the pairs' ratios",
			fmt.Sprintf("%.3f", emptyClaims.perFloor), fmt.Sprintf("%.3f", claims.perFloor), ratio(claims.perFloor, emptyClaims.perFloor))
		b.ReportMetric(claims.perFloor/emptyClaims.perFloor, "claim-per-floor-c1-ratio")
		for _, row := range claimLoadRows(emptyClaims, claims) {
			add(row.what, row.empty, row.atScale, row.ratio)
		}
		page := measurePage(b, "scale")
		for _, row := range pageRows(emptyPage, page) {
			add(row.what, row.empty, row.atScale, row.ratio)
		}
		b.ReportMetric(float64(percentile(page.loads, 0.5).Microseconds())/1000, "page-load-p50-ms")
		b.ReportMetric(float64(percentile(page.changes, 0.5).Microseconds())/1000, "page-change-p50-ms")

		burst := claimBurst(b, c, watcher, pools, size, inProcess(b))
		add(fmt.Sprintf("%d-claim burst: time, CPU", burst.claims), "", fmt.Sprintf("%s, %s CPU", burst.took.Round(time.Millisecond), burst.cpu.Round(time.Millisecond)), "")
		add(fmt.Sprintf("%d-claim burst: peak heap, peak RSS", burst.claims), "", mib(burst.peakHeap)+", "+mib(burst.peakRSS), "")
		b.ReportMetric(float64(burst.peakRSS)/(1<<20), "burst-peak-RSS-MiB")

		reads, writes := reconciletest.ReadCount(), reconciletest.WriteCount()
		synced, err := reconciletest.Restart()
		if err != nil {
			b.Fatal(err)
		}
		add("restart to every cache synced", "", synced.Round(time.Millisecond).String(), "")
		add("restart: API reads, writes until synced", "", fmt.Sprintf("%d, %d", reconciletest.ReadCount()-reads, reconciletest.WriteCount()-writes), "")
		b.ReportMetric(synced.Seconds(), "restart-sync-s")

		took, rollWrites, members := rollTemplates(b, c, templates, pools)
		add(fmt.Sprintf("template change rolling %d members: time, writes", members), "", fmt.Sprintf("%s, %d", took.Round(time.Second), rollWrites), "")
		b.ReportMetric(took.Seconds(), "roll-s")

		bin, deployed := buildReconciler(b), deployedRuntimeEnv(b)
		// Go's default collector first, for what the Deployment's runtime
		// settings change.
		defaultGC, _ := measureAlone(b, bin, append(slices.Clone(deployed), "GOGC=100"), add)
		defaultGC.stop()
		alone, mem := measureAlone(b, bin, deployed, add)
		burst = claimBurst(b, c, watcher, pools, size, alone.meter(b))
		add(fmt.Sprintf("the reconciler alone, as deployed: %d-claim burst: time, CPU, peak RSS", burst.claims), "",
			fmt.Sprintf("%s, %s CPU, %s", burst.took.Round(time.Millisecond), burst.cpu.Round(time.Millisecond), mib(burst.peakRSS)), "")
		b.ReportMetric(float64(mem.rss)/(1<<20), "alone-rest-RSS-MiB")
		b.ReportMetric(float64(burst.peakRSS)/(1<<20), "alone-burst-peak-RSS-MiB")
	}
	var out strings.Builder
	fmt.Fprintf(&out, "\n| at %d sandboxes, %d nodes | empty cluster | at scale | ratio |\n|---|---|---|---|\n", size.sandboxes, size.nodes)
	for _, r := range table {
		fmt.Fprintf(&out, "| %s | %s | %s | %s |\n", r.what, r.empty, r.atScale, r.ratio)
	}
	// Printed, not logged: the log of a benchmark is cut after ten lines.
	fmt.Print(out.String())
}

// claimLatencies claims from a full pool, claimsFrom1 times from 1 client
// and claimsFrom20 times from 20 clients, and returns the latencies of
// each, created to Ready as a watch sees it. The pool has a member for
// every claim, as BenchmarkWarmClaim's has, so no claim waits for the pool
// to refill. The pool and its sandboxes are deleted before it returns: the
// pool's refill would otherwise load what is measured next (the rest, the
// burst).
//
// The claims from one client are paired with their floor
// (claimfloor.Watching), as BenchmarkClaimAgainstFloor pairs them: the
// cluster's speed drifts by a fifth between runs, and the empty cluster is
// measured half an hour before the full one, so the floor measured beside
// each claim tells the growth of the API server under a claim from the
// claim's own. The claims from twenty clients run mixed with their
// floor's calls (latency.Mixed), each client taking a claim and a floor
// call in turn, for the same reason. (Paired in waves, twenty claims
// against twenty floor calls, the claims from twenty clients measured
// 3.96× the empty cluster's once, and the floor 5.19×: the floor's
// watches, opened twenty at a time over 10,000 Sandboxes, loaded the API
// server beyond what the claims see; the floor's two watches are now
// opened once. Run right after the floor's calls, the claims from twenty
// clients measured 1.45× the empty cluster's in run 14, the floor 0.75×,
// and in the next run the other way round: it took the empty cluster's
// claims 5.4 s, the full one's 4.2 s.) The twenty clients come first.
// label names the cluster's state in the profiles, when
// AGENTSANDBOX_SCALE_CPUPROFILE asks for them, of the twenty clients'
// claims and floor.
func claimLatencies(b *testing.B, w *readyWatcher, floor *claimfloor.Floor, label string) claims {
	pool := fullPool(b, int32(claimsFrom1+claimsFrom20))
	var cold atomic.Int64
	claim := func() time.Duration {
		s, took := w.claim(b, pool.Name)
		if s != nil && s.Status.LaunchType != v1.LaunchWarm {
			cold.Add(1)
		}
		return took
	}
	members, watching := floor.Members(b, claimsFrom1+claimsFrom20), floor.Watch(b)
	defer watching.Close()
	floorOp := func() time.Duration { return watching.Op(b, members) }
	// Twenty clients first, once the controller manager has settled the
	// namespaces just made. (After the one-client claims, the twenty-client
	// floor shared the cluster with the pool's refill, and measured 2.81×
	// the empty cluster's once while the claims after it measured 1.02×.)
	waitRootCAPublished(b)
	var out claims
	profiled, processProfiled := profileAPIServer(b, "mixed20-"+label, phaseProfile), profileProcess(b, "mixed20-"+label)
	cpu, inside, start := clusterCPU(b), countProcess(b), time.Now()
	out.floor[1], out.latencies[1] = latency.Mixed(20, claimsFrom20, floorOp, claim)
	out.took20, out.cpu20, out.inside20 = time.Since(start), since(b, cpu), countProcess(b).since(inside)
	profiled()
	processProfiled()
	// The pool refills what the twenty clients took before the one
	// client claims, paired and resting, from a pool as full as theirs.
	waitRefilled(b, pool)
	procs, cfg, start := findProcesses(b), testcluster.Get(b).Config, time.Now()
	out.floorLoad, out.claimLoad = &loadLog{procs: procs, start: start}, &loadLog{procs: procs, start: start}
	checks, followed := apirequests.Take(b, cfg).CacheChecks, func() []gcCycle { return nil }
	if pids := procs["kube-apiserver"]; len(pids) == 1 {
		followed = followCollector(b, pids[0])
	}
	out.floor[0], out.latencies[0] = latency.Pairs(claimsFrom1, pairSettle, out.floorLoad.timed(floorOp), out.claimLoad.timed(claim))
	out.took1, out.cacheChecks1, out.apiServerGC1 = time.Since(start), apirequests.Take(b, cfg).CacheChecks.Since(checks), followed()
	out.perFloor = latency.MedianRatio(out.floor[0], out.latencies[0])
	out.cold = int(cold.Load())
	slices.Sort(out.floor[0])
	slices.Sort(out.latencies[0])
	removePool(b, pool)
	return out
}

// slowCalls is how many of the one client's slowest claims, and of its
// slowest floor calls, claimLoadRows weighs against all: the p99 of 300 is
// the fourth-slowest, and ten of 10 ms ticks each are enough to tell a
// busy process from an idle one.
const slowCalls = 10

// claimLoadRows are the table's rows of what the cluster did while the one
// client's claims and floor calls ran: the API server's checks of its
// cache, the cores each process kept busy during all the calls and during
// the slowest, the API server's collector cycles and how many of the
// calls, and of the slowest, met one, and when the slowest came. The one
// client's p99 grew with the cluster by 1.66–4.02× in runs 15–17, its
// floor's as much; these say what the slowest calls shared.
func claimLoadRows(empty, atScale claims) []scaleRow {
	checks := func(c claims) string {
		return fmt.Sprintf("%s; %.0f (%s)", c.took1.Round(100*time.Millisecond), c.cacheChecks1.Total(), c.cacheChecks1.Top(5))
	}
	rows := []scaleRow{{what: fmt.Sprintf("1 client's %d pairs: time; the API server's checks of its cache against etcd meanwhile", claimsFrom1),
		empty: checks(empty), atScale: checks(atScale)}}
	for _, name := range append([]string{benchmarkName}, clusterProcesses...) {
		busy := func(c claims) string {
			return fmt.Sprintf("%.2f; %.2f; %.2f", cores(c.oneClientCalls(), name), cores(c.claimLoad.slowest(slowCalls), name), cores(c.floorLoad.slowest(slowCalls), name))
		}
		rows = append(rows, scaleRow{what: fmt.Sprintf("1 client, cores %s kept busy: during every call; the %d slowest claims; the %d slowest floor calls", name, slowCalls, slowCalls),
			empty: busy(empty), atScale: busy(atScale)})
	}
	collected := func(c claims) string {
		return describeCycles(c.apiServerGC1)
	}
	rows = append(rows, scaleRow{what: "1 client: the API server's collector during the pairs", empty: collected(empty), atScale: collected(atScale)})
	during := func(c claims) string {
		all := c.oneClientCalls()
		in := func(calls []callLoad) int { return duringCollector(calls, c.claimLoad.start, c.apiServerGC1) }
		return fmt.Sprintf("%d of %d; %d; %d", in(all), len(all), in(c.claimLoad.slowest(slowCalls)), in(c.floorLoad.slowest(slowCalls)))
	}
	rows = append(rows, scaleRow{what: fmt.Sprintf("1 client: calls that ran during a cycle of the API server's collector: of every call; of the %d slowest claims; of the %d slowest floor calls", slowCalls, slowCalls),
		empty: during(empty), atScale: during(atScale)})
	came := func(c claims) string {
		return starts(c.claimLoad.slowest(slowCalls)) + " / " + starts(c.floorLoad.slowest(slowCalls))
	}
	return append(rows, scaleRow{what: fmt.Sprintf("1 client: the %d slowest claims started at (s into the pairs) / the floor's", slowCalls),
		empty: came(empty), atScale: came(atScale)})
}

// oneClientCalls are the one client's claims and floor calls, with their
// load.
func (c claims) oneClientCalls() []callLoad {
	return append(slices.Clone(c.claimLoad.calls), c.floorLoad.calls...)
}

// claims is what claimLatencies measured.
type claims struct {
	// latencies are the claims' from 1 and from 20 clients, sorted.
	latencies [2][]time.Duration
	// floor is the three-write floor's, sorted: from 1 client beside each
	// claim, and from 20 clients mixed with theirs.
	floor [2][]time.Duration
	// perFloor is the median of those pairs' ratios, claim to floor.
	perFloor float64
	// floorLoad and claimLoad are the one client's calls with the CPU
	// each of the cluster's processes used during each, took1 how long
	// the pairs took, cacheChecks1 the API server's checks of its watch
	// cache against etcd meanwhile, by resource, and apiServerGC1 its
	// collector's cycles.
	floorLoad, claimLoad *loadLog
	took1                time.Duration
	cacheChecks1         apirequests.Counts
	apiServerGC1         []gcCycle
	// took20 is how long the twenty clients took for their claims and
	// floor calls, and cpu20 the CPU each of the cluster's processes and
	// this one used meanwhile.
	took20 time.Duration
	cpu20  map[string]time.Duration
	// inside20 is how they were served in this process: at
	// scale each of its collector's cycles marks a larger heap (at 10,000
	// sandboxes, run 14, seven times the empty cluster's).
	inside20 processCounts
	// cold is how many of the claims a member did not serve.
	cold int
}

// clusterProcesses are the local cluster's processes, by their names in
// /proc (cut to 15 bytes), whose CPU beside the claims the table shows.
var clusterProcesses = []string{"kube-apiserver", "etcd", "kube-scheduler", "kube-controller", "kwok-controller"}

// benchmarkName names this process's CPU in claims.cpu20 and rest.cpu:
// the in-process reconciler, its informers, the benchmark's watch and
// clients.
const benchmarkName = "this process (reconciler, clients)"

// clusterCPU is the CPU time used so far by each of clusterProcesses
// running on this machine, and by this process.
func clusterCPU(b *testing.B) map[string]time.Duration {
	return findProcesses(b).cpu()
}

// since is the CPU each process used since clusterCPU read before.
func since(b *testing.B, before map[string]time.Duration) map[string]time.Duration {
	now := clusterCPU(b)
	for name, d := range before {
		now[name] -= d
	}
	return now
}

// waitRootCAPublished waits until the controller manager has published its
// root CA (the kube-root-ca.crt ConfigMap) into every namespace, and says
// how long that took. Its publisher works one namespace at a time, about
// 70 a second here, so for minutes after the populate made 11,000
// namespaces it is most of what the API server does (2,002 creates in one
// 30 s at rest, 0.42 of the two cores): a cluster catching up on the
// namespaces just made, which a cluster that has held its sandboxes for a
// while is not, and which the claims measured next would share the cores
// with.
func waitRootCAPublished(b *testing.B) time.Duration {
	c, ctx, begin := testcluster.Get(b).Client, context.Background(), time.Now()
	var namespaces, published int
	err := wait.PollUntilContextTimeout(ctx, 5*time.Second, 15*time.Minute, true, func(ctx context.Context) (bool, error) {
		namespaceList := &metav1.PartialObjectMetadataList{}
		namespaceList.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
		caList := &metav1.PartialObjectMetadataList{}
		caList.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
		if err := c.List(ctx, namespaceList); err != nil {
			return false, err
		}
		if err := c.List(ctx, caList, client.MatchingFields{"metadata.name": "kube-root-ca.crt"}); err != nil {
			return false, err
		}
		namespaces, published = len(namespaceList.Items), len(caList.Items)
		return published >= namespaces, nil
	})
	if err != nil {
		b.Fatalf("the root CA is in %d of %d namespaces after 15 minutes: %v", published, namespaces, err)
	}
	return time.Since(begin)
}

// waitFirstHeartbeats waits until each of the run's kwok nodes has sent
// its first heartbeat (a status patch), then 15 s more for what the last
// patches set off in the controller manager and the scheduler to end.
// kwok's node-heartbeat-with-lease stage sends a node's heartbeat 600–610
// s after the last one, so nodes made within seconds of
// each other, as the populate makes its 1,000, send theirs together: 1,000
// status patches in ten seconds, every ten minutes. The first of those
// waves came in the thirty seconds at rest or with the claims when the
// populate took less than ten minutes (the eleventh run, 2026-12-06: 245
// node patches at rest, and kwok at 4.1 s of CPU there against 0.8–0.9 s),
// and not when it took more. After it the next is ten minutes away, past
// the rest and the claims. A real cluster's nodes, started at different
// times, report theirs spread out (a kubelet's every five minutes when
// nothing changed): a steady three a second at a thousand nodes, which
// this measures without.
func waitFirstHeartbeats(b *testing.B, run string) time.Duration {
	c, ctx, begin := testcluster.Get(b).Client, context.Background(), time.Now()
	var nodes, beaten int
	err := wait.PollUntilContextTimeout(ctx, 5*time.Second, 15*time.Minute, true, func(ctx context.Context) (bool, error) {
		list := &corev1.NodeList{}
		if err := c.List(ctx, list); err != nil {
			return false, err
		}
		nodes, beaten = 0, 0
		for _, n := range list.Items {
			if !strings.HasPrefix(n.Name, run+"-") {
				continue
			}
			nodes++
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.LastHeartbeatTime.Sub(n.CreationTimestamp.Time) > 5*time.Minute {
					beaten++
				}
			}
		}
		return nodes > 0 && beaten == nodes, nil
	})
	if err != nil {
		b.Fatalf("%d of %d nodes have sent their first heartbeat after 15 minutes: %v", beaten, nodes, err)
	}
	time.Sleep(15 * time.Second)
	return time.Since(begin)
}

// waitRefilled waits until pool, whose members were just claimed, is full
// again and no namespace is terminating. The pool looks again a second
// after its last claim (its batch), so its status is read only after
// that.
func waitRefilled(b *testing.B, pool *v1.WarmPool) {
	time.Sleep(3 * time.Second)
	c, ctx := testcluster.Get(b).Client, context.Background()
	err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pool), pool); err != nil {
			return false, err
		}
		return pool.Status.ReadyReplicas == *pool.Spec.Replicas, nil
	})
	if err != nil {
		b.Fatalf("warm pool %s not refilled: %d of %d Ready: %v", pool.Name, pool.Status.ReadyReplicas, *pool.Spec.Replicas, err)
	}
	testcluster.Get(b).WaitNoTerminatingNamespaces(b)
}

// removePool deletes pool and the sandboxes claimed from it, and waits
// until they are gone and no namespace is terminating.
func removePool(b *testing.B, pool *v1.WarmPool) {
	cluster := testcluster.Get(b)
	ctx := context.Background()
	sandboxes := &v1.SandboxList{}
	if err := cluster.Client.List(ctx, sandboxes); err != nil {
		b.Fatal(err)
	}
	for i := range sandboxes.Items {
		if s := &sandboxes.Items[i]; s.Spec.WarmPoolRef != nil && s.Spec.WarmPoolRef.Name == pool.Name {
			if err := cluster.Client.Delete(ctx, s); client.IgnoreNotFound(err) != nil {
				b.Fatal(err)
			}
		}
	}
	if err := cluster.Client.Delete(ctx, pool); client.IgnoreNotFound(err) != nil {
		b.Fatal(err)
	}
	// The pool's finalizer keeps it until its members' namespaces are
	// gone, the claimed ones among them: hundreds take the controller
	// manager minutes.
	err := wait.PollUntilContextTimeout(ctx, time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(pool), &v1.WarmPool{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		b.Fatalf("warm pool %s not deleted: %v", pool.Name, err)
	}
	cluster.WaitNoTerminatingNamespaces(b)
}

// apiCreateLatencies is the API server's own floor beside the claims: a
// ConfigMap created, in the claims' shape (claimsFrom1 times from 1
// client, claimsFrom20 from 20), as BenchmarkAPICreate creates them. Its
// growth with the cluster is the API server's, not the reconciler's.
func apiCreateLatencies(b *testing.B) [2][]time.Duration {
	c, ns := testcluster.Get(b).Client, floorNamespace(b)
	return latencies(func() time.Duration { return createConfigMap(b, c, ns) })
}

// claimsFrom1 and claimsFrom20 are how many claims (and floor calls) are
// timed from 1 and from 20 clients. The median of two waves of 20 (40
// claims, until 2026-12-06) moved by half between runs of one build; the
// p99 of 100 and of 200 (until 2026-12-07) was their second-largest, and
// the floor's moved from 0.40× to 1.65× the empty cluster's between runs.
// Of 300 and 600 it is the fourth- and the seventh-largest.
const claimsFrom1, claimsFrom20 = 300, 600

// latencies runs op claimsFrom1 times from 1 client and claimsFrom20 times
// from 20 clients, and returns what each took, sorted, by run.
func latencies(op func() time.Duration) [2][]time.Duration {
	return [2][]time.Duration{latency.Concurrently(1, claimsFrom1, op), latency.Concurrently(20, claimsFrom20, op)}
}

// rest is what the reconciler costs when nothing changes.
type rest struct {
	writes, reads int
	heap, rss     uint64
	// cpu is what the cluster's processes and this one used over the 30 s:
	// the load the claims measured next run beside.
	cpu map[string]time.Duration
	// served is what the API server answered over the 30 s, from every
	// client (the node leases kwok renews, the controller manager's
	// resyncs): what that load is spent on.
	served apirequests.Counts
}

// atRest waits for the controllers to settle, then counts their API
// requests over 30 s, and reads the heap after a collection. label names
// the cluster's state in the API server's profile.
func atRest(b *testing.B, label string) rest {
	time.Sleep(10 * time.Second)
	cfg := testcluster.Get(b).Config
	reads, writes, cpu, served := reconciletest.ReadCount(), reconciletest.WriteCount(), clusterCPU(b), apirequests.Take(b, cfg)
	profiled := profileAPIServer(b, label, 30*time.Second)
	time.Sleep(30 * time.Second)
	profiled()
	r := rest{reads: reconciletest.ReadCount() - reads, writes: reconciletest.WriteCount() - writes, cpu: since(b, cpu),
		served: apirequests.Take(b, cfg).Requests.Since(served.Requests)}
	// The target is none: any that come are named, to be explained.
	for _, w := range reconciletest.Writes(writes, func(reconciletest.Write) bool { return true }) {
		b.Logf("a write at rest: %s %s", w.Method, w.Path)
	}
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	r.heap, r.rss = m.HeapInuse, rssBytes(b)
	return r
}

// profileAPIServer takes the API server's CPU profile over d, when
// AGENTSANDBOX_SCALE_CPUPROFILE names a path prefix, into
// <prefix>-<label>.pprof: where its CPU goes at rest and under the twenty
// clients' floor and claims (go tool pprof -top, or -diff_base for the
// empty cluster's against the full one's). The returned function waits
// for it.
func profileAPIServer(b *testing.B, label string, d time.Duration) (wait func()) {
	prefix := os.Getenv("AGENTSANDBOX_SCALE_CPUPROFILE")
	if prefix == "" {
		return func() {}
	}
	cs, err := kubernetes.NewForConfig(testcluster.Get(b).Config)
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
		defer cancel()
		raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(int(d.Seconds()))).DoRaw(ctx)
		if err == nil {
			err = os.WriteFile(prefix+"-"+label+".pprof", raw, 0o644)
		}
		done <- err
	}()
	return func() {
		if err := <-done; err != nil {
			b.Errorf("the API server's CPU profile: %v", err)
		}
	}
}

// phaseProfile is how long the API server's profile of the twenty
// clients' claims and floor calls runs: the claims alone took 4.2–6.2 s
// in runs 14 and 15, and the floor's calls are as many and about as slow;
// a profile longer than its phase would count what follows it.
const phaseProfile = 8 * time.Second

// profileProcess takes this process's CPU profile, when
// AGENTSANDBOX_SCALE_CPUPROFILE names a path prefix, into
// <prefix>-process-<label>.pprof, until the returned function is called.
func profileProcess(b *testing.B, label string) (stop func()) {
	prefix := os.Getenv("AGENTSANDBOX_SCALE_CPUPROFILE")
	if prefix == "" {
		return func() {}
	}
	f, err := os.Create(prefix + "-process-" + label + ".pprof")
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
	}
}

// writeHeapProfile writes the heap's profile at rest, at scale, to the
// file AGENTSANDBOX_SCALE_HEAPPROFILE names, when it names one: where the
// memory the cache weights do not explain goes (go tool pprof -top).
func writeHeapProfile(b *testing.B) {
	path := os.Getenv("AGENTSANDBOX_SCALE_HEAPPROFILE")
	if path == "" {
		return
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	runtime.GC()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

// deleteAll deletes objs, newest first (the sandboxes before their pools,
// templates and nodes), 32 at a time, and says how far it got every 10 s:
// at 10,000 sandboxes it takes minutes, after the table is printed.
func deleteAll(c client.Client, objs []client.Object) {
	var deleted atomic.Int64
	var g errgroup.Group
	g.SetLimit(32)
	progress := time.NewTicker(10 * time.Second)
	defer progress.Stop()
	for _, obj := range slices.Backward(objs) {
		select {
		case <-progress.C:
			fmt.Fprintf(os.Stderr, "deleting what the benchmark made: %d of %d deletes answered\n", deleted.Load(), len(objs))
		default:
		}
		g.Go(func() error {
			_ = c.Delete(context.Background(), obj)
			deleted.Add(1)
			return nil
		})
	}
	_ = g.Wait()
	fmt.Fprintf(os.Stderr, "deleted what the benchmark made: %d objects\n", len(objs))
}

// populate makes the cluster of size: kwok nodes in 10 node pools, a
// template per node pool, two warm pools per template (Recreate), and the
// sandboxes: of every ten, seven running and one stopped from a template,
// and two from a warm pool (claimed, or started cold from its template
// while the pool is empty). It returns when every sandbox is Running or
// Stopped.
func populate(b *testing.B, c client.Client, run string, size scaleSize) ([]*v1.SandboxTemplate, []*v1.WarmPool) {
	ctx := context.Background()
	// What was created is kept as kind and name alone, so that the
	// process's heap and RSS are the reconciler's and not thousands of
	// created objects held for their deletion.
	var mu sync.Mutex
	var made []client.Object
	b.Cleanup(func() { deleteAll(c, made) })
	created := func(obj client.Object) error {
		err := c.Create(ctx, obj)
		ref := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
		ref.SetName(obj.GetName())
		mu.Lock()
		made = append(made, ref)
		mu.Unlock()
		return err
	}
	group := func(i int) string { return fmt.Sprintf("%s-%d", run, i%10) }
	var g errgroup.Group
	g.SetLimit(32)
	for i := range size.nodes {
		g.Go(func() error { return created(kwokNode(fmt.Sprintf("%s-%04d", run, i), group(i))) })
	}
	var templates []*v1.SandboxTemplate
	var pools []*v1.WarmPool
	for i := range 10 {
		np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: group(i)}, Spec: v1.NodePoolSpec{
			RuntimeHandler: "runc", NodeSelector: map[string]string{"agentsandbox.dev/node-group": group(i)}}}
		tpl := &v1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: group(i)}, Spec: v1.SandboxTemplateSpec{
			Image: "python:3.12", NodePoolRef: &v1.LocalObjectReference{Name: np.Name}}}
		templates = append(templates, tpl)
		g.Go(func() error { return created(np) })
		g.Go(func() error { return created(tpl) })
		for j := range 2 {
			pool := &v1.WarmPool{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", tpl.Name, j)}, Spec: v1.WarmPoolSpec{
				TemplateRef: v1.LocalObjectReference{Name: tpl.Name}, Replicas: ptr.To(int32(size.poolSize)),
				UpdateStrategy: v1.WarmPoolUpdateStrategy{Type: v1.RecreateUpdateStrategy}}}
			pools = append(pools, pool)
			g.Go(func() error { return created(pool) })
		}
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	waitPoolsFull(b, c, pools, time.Duration(size.sandboxes)*10*time.Millisecond+5*time.Minute)
	for i := range size.sandboxes {
		sbx := &v1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%05d", run, i)}, Spec: v1.SandboxSpec{Owner: fmt.Sprintf("user%d@example.com", i%100)}}
		switch i % 10 {
		case 7, 8:
			sbx.Spec.WarmPoolRef = &v1.LocalObjectReference{Name: pools[i%len(pools)].Name}
		default:
			sbx.Spec.TemplateRef = &v1.LocalObjectReference{Name: templates[i%len(templates)].Name}
		}
		if i%10 == 6 {
			sbx.Spec.State = v1.SandboxStopped
		}
		g.Go(func() error { return created(sbx) })
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(time.Duration(size.sandboxes)*150*time.Millisecond + 5*time.Minute)
	for ; ; time.Sleep(5 * time.Second) {
		list := &v1.SandboxList{}
		if err := c.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			b.Fatal(err)
		}
		settled := 0
		for _, s := range list.Items {
			if strings.HasPrefix(s.Name, run) && (s.Status.Phase == v1.SandboxPhaseRunning || s.Status.Phase == v1.SandboxPhaseStopped) {
				settled++
			}
		}
		if settled == size.sandboxes {
			return templates, pools
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d sandboxes Running or Stopped in time", settled, size.sandboxes)
		}
	}
}

// kwokNode is a node kwok runs, in a node group.
func kwokNode(name, group string) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("500"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "agentsandbox.dev/node-group": group,
		}, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"}},
		// Both kinds of address, as hack/cluster.sh's nodes have them.
		Status: corev1.NodeStatus{Allocatable: capacity, Capacity: capacity, Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: "localhost"},
		}},
	}
}

// waitPoolsFull waits until every pool has all its members Ready.
func waitPoolsFull(b *testing.B, c client.Client, pools []*v1.WarmPool, timeout time.Duration) {
	for deadline := time.Now().Add(timeout); ; time.Sleep(2 * time.Second) {
		full := 0
		for _, p := range pools {
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(p), p); err == nil && p.Status.ReadyReplicas == *p.Spec.Replicas {
				full++
			}
		}
		if full == len(pools) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d warm pools full in %s", full, len(pools), timeout)
		}
	}
}

// burst is what a burst of claims cost.
type burst struct {
	claims            int
	took, cpu         time.Duration
	peakHeap, peakRSS uint64
}

// meter reads what the reconciler costs: the CPU it used so far, and its
// heap in use (0 where it cannot be read) and RSS now.
type meter struct {
	cpu    func() time.Duration
	memory func() (heap, rss uint64)
}

// inProcess meters this process, which runs the controllers in-process.
func inProcess(b *testing.B) meter {
	return meter{cpu: cpuTime, memory: func() (uint64, uint64) {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse, rssBytes(b)
	}}
}

// meter meters the reconciler's process, whose heap is not read.
func (p *reconcilerProcess) meter(b *testing.B) meter {
	return meter{cpu: func() time.Duration { return p.cpu(b) }, memory: func() (uint64, uint64) {
		return 0, p.memory(b).rss
	}}
}

// claimBurst claims every warm member at once, 50 clients at a time,
// sampling the reconciler's heap and RSS while it runs.
func claimBurst(b *testing.B, c client.Client, w *readyWatcher, pools []*v1.WarmPool, size scaleSize, m meter) burst {
	waitPoolsFull(b, c, pools, 10*time.Minute)
	out := burst{claims: len(pools) * size.poolSize}
	done := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		for {
			heap, rss := m.memory()
			out.peakHeap, out.peakRSS = max(out.peakHeap, heap), max(out.peakRSS, rss)
			select {
			case <-done:
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	})
	cpu := m.cpu()
	begin := time.Now()
	var g errgroup.Group
	g.SetLimit(50)
	for i := range out.claims {
		g.Go(func() error {
			w.claim(b, pools[i%len(pools)].Name)
			return nil
		})
	}
	_ = g.Wait()
	out.took, out.cpu = time.Since(begin), m.cpu()-cpu
	close(done)
	sampler.Wait()
	return out
}

// rollTemplates changes every template's image, which rolls every warm
// member, and returns how long until every pool is full of members of the
// new template, the controllers' writes meanwhile, and how many members
// rolled.
func rollTemplates(b *testing.B, c client.Client, templates []*v1.SandboxTemplate, pools []*v1.WarmPool) (time.Duration, int, int) {
	ctx := context.Background()
	waitPoolsFull(b, c, pools, 10*time.Minute)
	writes := reconciletest.WriteCount()
	begin := time.Now()
	for _, tpl := range templates {
		patch := client.MergeFrom(tpl.DeepCopy())
		tpl.Spec.Image = "python:3.13"
		if err := c.Patch(ctx, tpl, patch); err != nil {
			b.Fatal(err)
		}
	}
	for deadline := time.Now().Add(15 * time.Minute); ; time.Sleep(2 * time.Second) {
		rolled, members := 0, 0
		for _, p := range pools {
			tpl := &v1.SandboxTemplate{}
			if c.Get(ctx, client.ObjectKeyFromObject(p), p) != nil || c.Get(ctx, client.ObjectKey{Name: p.Spec.TemplateRef.Name}, tpl) != nil {
				continue
			}
			members += int(*p.Spec.Replicas)
			current := &corev1.NamespaceList{}
			err := c.List(ctx, current, client.MatchingLabels{
				v1.LabelWarmPool: p.Name, v1.LabelMember: v1.MemberAvailable, v1.LabelTemplateHash: tpl.Status.ContentHash,
			})
			if err == nil && len(current.Items) == int(*p.Spec.Replicas) && p.Status.ReadyReplicas == *p.Spec.Replicas {
				rolled++
			}
		}
		if rolled == len(pools) {
			return time.Since(begin), reconciletest.WriteCount() - writes, members
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d warm pools rolled in 15 minutes", rolled, len(pools))
		}
	}
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(p*float64(len(sorted)-1))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

func mib(bytes uint64) string { return fmt.Sprintf("%.0f MiB", float64(bytes)/(1<<20)) }

func ratio(atScale, empty float64) string {
	if empty == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f×", atScale/empty)
}

// rssBytes is the process's resident set size now. It reports a failure
// with Error, not Fatal: the burst's sampler calls it from a goroutine of
// its own.
func rssBytes(b *testing.B) uint64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		b.Error(err)
		return 0
	}
	fields := strings.Fields(string(data))
	pages, _ := strconv.ParseUint(fields[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}

// cpuTime is the CPU time the process used so far, user and system.
func cpuTime() time.Duration {
	var u syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

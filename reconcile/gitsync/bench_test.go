package gitsync_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/applier"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/declarations"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/gittest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/reconciletest"
)

// BenchmarkSync measures a GitSync of N templates (a file each), with
// every controller running: first its request floor (benchApplyFloor),
// then converging from empty, as a ratio to that floor, with the sync's writes
// per object (dry runs included: the API server does not persist them, but
// they cost as much to serve; status writes not); when the template
// controller has checked every template; then a resync that the interval
// starts after that (a request would rightly have the status record it),
// with its writes, all of them, and reads; and the peak RSS of the
// benchmark process (reconciler, Git client and test together: an upper
// bound on the reconciler's). Then, for the ratio, `kubectl apply
// --server-side` of a 1,000-file subset, first and again unchanged, by one
// kubectl for the directory and by one kubectl per file, as a pipeline
// looping over files does. The second is where kubectl is CPU-bound, at
// about the rate the GitSync issue quotes (16 objects/s).
//
//	make bench-gitops (go test -run '^$' -bench Sync -benchtime 1x ./reconcile/gitsync/)
func BenchmarkSync(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		var floor time.Duration
		b.Run(fmt.Sprintf("apply-floor=%d", n), func(b *testing.B) {
			for range b.N {
				floor = benchApplyFloor(b, n)
			}
		})
		b.Run(fmt.Sprintf("declarations=%d", n), func(b *testing.B) {
			for range b.N {
				converge := benchSync(b, n)
				if floor > 0 {
					b.ReportMetric(converge.Seconds()/floor.Seconds(), "converge/floor")
				}
			}
		})
	}
	b.Run("kubectl=1000", func(b *testing.B) {
		for range b.N {
			benchKubectl(b, 1000, false)
		}
	})
	b.Run("kubectl-per-file=1000", func(b *testing.B) {
		for range b.N {
			benchKubectl(b, 1000, true)
		}
	})
}

// benchInterval is the GitSync's interval in the benchmark: long enough
// not to start during the converge's own syncs, short enough to wait for.
const benchInterval = 20 * time.Second

// benchApplyFloor is the request floor of a converge of n templates: the
// same declarations, decoded as a GitSync decodes them, created by the
// same server-side apply, as many at once as the applier sends, with no
// GitSync (no Git, no validation, no status) and the controllers running
// as in the converge. A sync that sends one request per object cannot
// converge faster on this cluster.
func benchApplyFloor(b *testing.B, n int) time.Duration {
	c := testcluster.Get(b).Client
	prefix := testcluster.Name("floor")
	var decls []declarations.Declaration
	for name, content := range templateFiles(prefix, n) {
		d, err := declarations.Decode(name, []byte(content))
		if err != nil {
			b.Fatal(err)
		}
		decls = append(decls, d...)
	}
	applier.SetOwner(decls, prefix)
	b.Cleanup(func() {
		_ = c.DeleteAllOf(context.Background(), &v1.SandboxTemplate{}, client.MatchingLabels{v1.LabelGitSync: prefix})
	})
	start := time.Now()
	var g errgroup.Group
	g.SetLimit(32) // the applier's concurrency
	for _, d := range decls {
		g.Go(func() error {
			return c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(d.Object.DeepCopy()), client.FieldOwner(applier.FieldManager))
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	took := time.Since(start)
	b.ReportMetric(took.Seconds(), "apply-s")
	b.ReportMetric(float64(n)/took.Seconds(), "objects/s")
	return took
}

// benchSync converges n templates through a GitSync and returns how long
// that took.
func benchSync(b *testing.B, n int) time.Duration {
	srv := gittest.New(b, "", "")
	prefix := testcluster.Name("bench")
	srv.Commit("main", templateFiles(prefix, n))
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
	syncWrites := reconciletest.Writes(writes, func(w reconciletest.Write) bool { return !strings.HasSuffix(w.Path, "/status") })
	b.ReportMetric(float64(len(syncWrites))/float64(n), "converge-writes/object")
	b.ReportMetric(float64(reconciletest.ReadCount()-reads)/float64(n), "converge-reads/object")
	// The template controller checks each new template and writes its
	// status; the no-op resync is measured once it is done, so that its
	// window holds the resync's writes only.
	for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(time.Second) {
		checked := map[string]bool{}
		for _, w := range reconciletest.Writes(writes, func(w reconciletest.Write) bool {
			return strings.Contains(w.Path, "/sandboxtemplates/"+prefix+"-") && strings.HasSuffix(w.Path, "/status")
		}) {
			checked[w.Path] = true
		}
		if len(checked) == n {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the template controller checked %d of %d templates in 10 minutes", len(checked), n)
		}
	}
	b.ReportMetric(time.Since(start).Seconds(), "templates-checked-s")

	// An interval sync may have started while the templates were being
	// checked: wait for the next one to end and measure the one after it,
	// which starts inside the window, so that its reads and time are its
	// own.
	waitIntervalSync(b, gs, syncSamples(b, gs.Name)["success"], 3*benchInterval)
	writes, reads = reconciletest.WriteCount(), reconciletest.ReadCount()
	noop := waitIntervalSync(b, gs, syncSamples(b, gs.Name)["success"], 3*benchInterval)
	time.Sleep(time.Second) // a status patch would follow the metric
	if r := gitsyncReady(getGitSync(b, gs)); r != v1.ReasonReconciliationSucceeded {
		b.Fatalf("no-op resync: %s", r)
	}
	b.ReportMetric(noop.Seconds(), "noop-s")
	b.ReportMetric(float64(len(reconciletest.Writes(writes, func(reconciletest.Write) bool { return true }))), "noop-writes")
	b.ReportMetric(float64(reconciletest.ReadCount()-reads), "noop-reads")
	reconciletest.ReportPeakRSS(b)
	return converge
}

func getGitSync(t testing.TB, gs *v1.GitSync) *v1.GitSync {
	t.Helper()
	got := &v1.GitSync{}
	if err := testcluster.Get(t).Client.Get(context.Background(), client.ObjectKeyFromObject(gs), got); err != nil {
		t.Fatal(err)
	}
	return got
}

// benchKubectl applies files templates, one a file, with kubectl's
// server-side apply, as a pipeline without the reconciler would, then again
// unchanged: one kubectl for the whole directory, or (perFile) one kubectl
// per file, all sharing a discovery cache as a user's runs do. It reports
// kubectl's own CPU time per object too, to tell whether kubectl or the API
// server bounds it.
func benchKubectl(b *testing.B, files int, perFile bool) {
	dir := b.TempDir()
	paths := []string{dir}
	if perFile {
		paths = nil
	}
	for name, content := range templateFiles(testcluster.Name("kubectl"), files) {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			b.Fatal(err)
		}
		if perFile {
			paths = append(paths, path)
		}
	}
	cluster, cache := testcluster.Get(b), b.TempDir()
	b.Cleanup(func() { cluster.Kubectl(b, "delete", "--wait=false", "-f", dir) })
	objects := float64(files)
	apply := func() (took time.Duration, cpuPerObject float64) {
		cpu, start := childrenCPU(b), time.Now()
		for _, p := range paths {
			cluster.KubectlCached(b, cache, "apply", "--server-side", "--field-manager", "bench-kubectl", "-f", p)
		}
		return time.Since(start), (childrenCPU(b) - cpu).Seconds() * 1000 / objects
	}
	first, firstCPU := apply()
	again, _ := apply()
	b.ReportMetric(first.Seconds(), "converge-s")
	b.ReportMetric(objects/first.Seconds(), "objects/s")
	b.ReportMetric(firstCPU, "kubectl-cpu-ms/object")
	b.ReportMetric(again.Seconds(), "noop-s")
}

// childrenCPU is the user and system time of the benchmark's finished child
// processes (the kubectl runs) so far.
func childrenCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// templateFiles declares n templates, one a file.
func templateFiles(prefix string, n int) map[string]string {
	out := map[string]string{}
	for i := range n {
		out[fmt.Sprintf("t%05d.yaml", i)] = fmt.Sprintf("apiVersion: agentsandbox.dev/v1alpha1\nkind: SandboxTemplate\nmetadata:\n  name: %s-%d\nspec:\n  image: python:3.12\n", prefix, i)
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

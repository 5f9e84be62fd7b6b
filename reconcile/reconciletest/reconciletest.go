// Package reconciletest runs controllers against the test cluster for the
// duration of a test package, the way `agentsandbox reconcile` runs them.
package reconciletest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile"
)

// ServiceAccountName is the ServiceAccount config/ installs the reconciler
// under, in v1.SystemNamespace.
const ServiceAccountName = "agentsandbox-reconciler"

// ServiceAccount is the reconciler's identity: that ServiceAccount's user
// name, and the groups the API server puts it in.
var (
	ServiceAccount       = testcluster.ServiceAccountUser(v1.SystemNamespace, ServiceAccountName)
	ServiceAccountGroups = testcluster.ServiceAccountGroups(v1.SystemNamespace)
)

// Run runs the package's tests (m.Run) with a manager running the
// controllers that setup registers, started when the first test asks for
// the cluster (testcluster.OnFirstUse) and stopped after the last. Use it
// from TestMain. The manager runs without leader election and reconciles
// every object of the cluster, which testcluster lets this package hold
// alone: two reconcilers at once is not how it runs in a cluster.
func Run(m *testing.M, setup func(ctrl.Manager) error) int {
	quietLogs()
	testcluster.OnFirstUse(func(cluster *testcluster.Cluster) (err error) {
		running = &manager{cluster: cluster, setup: setup}
		running.stop, running.cache, err = start(cluster, setup)
		return err
	})
	code := m.Run()
	if running != nil && running.stop != nil {
		finishPoolDeletions(running.cluster)
		if err := running.stop(); err != nil {
			println("manager:", err.Error())
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// manager is the package's running manager, and how it was made.
type manager struct {
	cluster *testcluster.Cluster
	setup   func(ctrl.Manager) error
	stop    func() error
	cache   cache.Cache
}

// running is the manager Run started, nil before the first test asks for
// the cluster.
var running *manager

// Restart stops the package's controllers and starts them again, as a
// rollout of the reconciler does, and returns how long the new manager
// took from its start to its caches synced. The request counters go on
// counting, so ReadCount and WriteCount before and after say what the
// restart cost the API server.
func Restart() (time.Duration, error) {
	resume, err := Pause()
	if err != nil {
		return 0, err
	}
	begin := time.Now()
	err = resume()
	return time.Since(begin), err
}

// Pause stops the package's controllers until resume starts them again,
// so that a benchmark can run the reconciler as a process of its own
// against the same cluster meanwhile.
func Pause() (resume func() error, err error) {
	if running == nil {
		return nil, errors.New("no controllers running: ask for the cluster (testcluster.Get) first")
	}
	if err := running.stop(); err != nil {
		return nil, err
	}
	return func() (err error) {
		running.stop, running.cache, err = start(running.cluster, running.setup)
		return err
	}, nil
}

// finishPoolDeletions waits, for up to a minute, until no warm pool is
// being deleted: the controllers finish the deletions the package's last
// tests started, since a pool's finalizer, which deletes its members,
// needs them, and the next package to take the cluster would find the
// pool and its members there.
func finishPoolDeletions(cluster *testcluster.Cluster) {
	var deleting []string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pools := &v1.WarmPoolList{}
		if err := cluster.Client.List(ctx, pools); err != nil {
			return false, nil
		}
		deleting = deleting[:0]
		for _, p := range pools.Items {
			if p.DeletionTimestamp != nil {
				deleting = append(deleting, p.Name)
			}
		}
		return len(deleting) == 0, nil
	})
	if err != nil {
		println("warm pools still being deleted a minute after the last test:", strings.Join(deleting, ", "))
	}
}

// Cache is the running controllers' informer cache, nil before the first
// test asks for the cluster: what they hold in memory, for a benchmark to
// weigh.
func Cache() cache.Cache {
	if running == nil {
		return nil
	}
	return running.cache
}

// start runs a manager with the controllers setup registers on cluster,
// returning once its caches are synced, with what stops it.
func start(cluster *testcluster.Cluster, setup func(ctrl.Manager) error) (func() error, cache.Cache, error) {
	// The controllers run as the reconciler's service account, with exactly
	// the RBAC config/rbac grants it, so a missing permission fails a test.
	cfg := testcluster.AsServiceAccount(cluster.Config, v1.SystemNamespace, ServiceAccountName)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return writeCounter{rt} })
	// No client-side rate limit, as `agentsandbox reconcile` has none
	// (controller-runtime's GetConfig leaves throttling to the API
	// server's priority and fairness): a benchmark must not measure a
	// limiter production does not have.
	cfg.QPS, cfg.Burst = -1, 0
	mgr, err := reconcile.NewManager(cfg, reconcile.ManagerOptions{
		GracefulShutdownTimeout: 5 * time.Second, Cache: hide,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("manager: %w", err)
	}
	if err := setup(mgr); err != nil {
		return nil, nil, fmt.Errorf("setup: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stop := func() error {
		cancel()
		return <-done
	}
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		_ = stop()
		return nil, nil, errors.New("manager caches did not sync")
	}
	return stop, mgr.GetCache(), nil
}

// Hidden is a label that keeps an object out of the controllers' caches
// here: no controller acts on it, and the watch events about it are not
// sent to this process. A benchmark that writes a claim's objects itself,
// beside the controllers, labels them with it (bench's ClaimAgainstFloor).
const Hidden = "reconciletest.agentsandbox.dev/hidden"

// hide narrows every informer to objects without the Hidden label, on the
// API server's side: a watch's label selector filters its events there.
func hide(opts *cache.Options) {
	notHidden, err := labels.NewRequirement(Hidden, selection.DoesNotExist, nil)
	if err != nil {
		panic(err) // a constant key; only a typo in it fails
	}
	for obj, by := range opts.ByObject {
		if by.Label == nil {
			by.Label = labels.Everything()
		}
		by.Label = by.Label.Add(*notHidden)
		opts.ByObject[obj] = by
	}
	opts.DefaultLabelSelector = labels.NewSelector().Add(*notHidden)
}

// quietLogs sets the controllers' logger: errors only, so a controller
// that cannot start its watches says why.
func quietLogs() {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel), zap.StacktraceLevel(zapcore.PanicLevel)))
}

var (
	requestsMu sync.Mutex
	writes     []Write
	reads      []string
)

// Write is one mutating request the controllers sent.
type Write struct {
	Method, Path string
}

// writeCounter records the controllers' mutating requests, so tests can
// count the API writes an operation costs, and the paths of their reads.
type writeCounter struct{ next http.RoundTripper }

func (w writeCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	// Copies: the parsed path shares the memory of the whole request URL,
	// query and all, which a benchmark of thousands of writes would
	// otherwise count as the reconciler's.
	if req.Method != http.MethodGet {
		requestsMu.Lock()
		writes = append(writes, Write{Method: req.Method, Path: strings.Clone(req.URL.Path)})
		requestsMu.Unlock()
	} else if q := req.URL.Query(); q.Get("watch") != "true" || q.Get("sendInitialEvents") == "true" {
		// A watch that streams the initial list first (client-go's
		// WatchList) is the list an informer starts with.
		requestsMu.Lock()
		reads = append(reads, strings.Clone(req.URL.Path))
		requestsMu.Unlock()
	}
	return w.next.RoundTrip(req)
}

// ReadCount is how many GET requests the controllers sent so far: gets,
// lists and watches that begin with a list (WatchList), not the watches
// that only follow changes. Pass it to Reads to see only what came after.
func ReadCount() int {
	requestsMu.Lock()
	defer requestsMu.Unlock()
	return len(reads)
}

// Reads returns the paths of the controllers' reads since the since-th
// that match.
func Reads(since int, match func(path string) bool) []string {
	requestsMu.Lock()
	defer requestsMu.Unlock()
	return matching(reads[since:], match)
}

// WriteCount is how many mutating requests the controllers sent so far; pass
// it to Writes to see only what came after.
func WriteCount() int {
	requestsMu.Lock()
	defer requestsMu.Unlock()
	return len(writes)
}

// Writes returns the controllers' mutating requests since the since-th that
// match.
func Writes(since int, match func(Write) bool) []Write {
	requestsMu.Lock()
	defer requestsMu.Unlock()
	return matching(writes[since:], match)
}

// matching is the requests that match.
func matching[T any](requests []T, match func(T) bool) []T {
	var out []T
	for _, r := range requests {
		if match(r) {
			out = append(out, r)
		}
	}
	return out
}

// Main is TestMain for a package whose tests need controllers running.
func Main(m *testing.M, setup func(ctrl.Manager) error) {
	os.Exit(Run(m, setup))
}

// MainLeakChecked is Main for a package that also fails when its tests
// leave a goroutine running (go.uber.org/goleak), checked once they ended
// and the controllers stopped: a connection, a copy or a watcher that
// outlives its test outlives its user in production too. What client-go
// keeps is not the tests': the cluster's transport with its certificate
// reloader, which lives as long as the process (connecting before the
// check takes note of what runs leaves it out), the HTTP/2 connections it
// keeps open for the next request, and an exec's heartbeat, which ends at its
// next ping (every 5 s) once the exec's connection closed.
func MainLeakChecked(m *testing.M, setup func(ctrl.Manager) error) {
	quietLogs()
	_, _ = testcluster.Connect() // before the check notes what runs; a test reports an error
	goleak.VerifyTestMain(withControllers{m: m, setup: setup}, goleak.IgnoreCurrent(),
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
		goleak.IgnoreTopFunction("k8s.io/client-go/tools/remotecommand.(*heartbeat).start"))
}

// withControllers runs a package's tests with Run, for goleak.
type withControllers struct {
	m     *testing.M
	setup func(ctrl.Manager) error
}

func (w withControllers) Run() int { return Run(w.m, w.setup) }

// ReportPeakRSS reports the peak resident set size (VmHWM) of the process as
// the benchmark metric peak-RSS-MiB: the process runs the reconciler
// in-process, so it is an upper bound on the reconciler's own.
func ReportPeakRSS(b *testing.B) {
	mib, err := peakRSSMiB()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(mib, "peak-RSS-MiB")
}

func peakRSSMiB() (float64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/self/status")
}

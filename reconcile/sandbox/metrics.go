package sandbox

import (
	"context"
	"sync"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// timeToReady is observed once per sandbox, when it first becomes Ready.
var timeToReady = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "agentsandbox_sandbox_time_to_ready_seconds",
	Help:    "Time from a sandbox's creation (as the reconciler saw it when it saw it within the second of its creationTimestamp) to its first Ready, by launch type.",
	Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300},
}, []string{"launch_type"})

// idleStops counts sandboxes stopped for idleness.
var idleStops = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "agentsandbox_sandbox_idle_stops_total",
	Help: "Sandboxes stopped because nobody used them for their lifecycle.idleTimeout.",
})

// wakeLatency is observed when a sandbox woken by a client after an idle
// stop is Ready again: from the client's activity record that woke it.
var wakeLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
	Name:    "agentsandbox_sandbox_wake_seconds",
	Help:    "Time from a client's use of a sandbox stopped for idleness (its activity record) to the sandbox being Ready again.",
	Buckets: []float64{0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120},
})

func init() {
	metrics.Registry.MustRegister(timeToReady, idleStops, wakeLatency)
}

// creationClock tells when sandboxes were created more precisely than their
// creationTimestamp, which has whole seconds: a warm claim takes tens of
// milliseconds, so timing it from that second would add up to a second to
// every observation and leave the histogram's small buckets meaningless.
// It keeps when this process saw each sandbox's creation. A sandbox whose
// creationTimestamp says second C, seen at S before C+1s, was created in
// [C, S]: S is late by no more than the API server's create and its watch
// delivery. One seen later than that (created while the reconciler was
// down, or far behind) keeps C.
type creationClock struct {
	seen sync.Map // UID → time.Time
}

// noteCreated records that obj's creation was seen now.
func (c *creationClock) noteCreated(obj client.Object, now time.Time) {
	if now.Sub(obj.GetCreationTimestamp().Time) < time.Second {
		c.seen.Store(obj.GetUID(), now)
	}
}

// forget drops what is kept for a sandbox that is gone.
func (c *creationClock) forget(obj client.Object) { c.seen.Delete(obj.GetUID()) }

// createdAt returns the best known creation time of sbx, and forgets it:
// it is asked once, at the first Ready.
func (c *creationClock) createdAt(sbx *v1.Sandbox) time.Time {
	if at, ok := c.seen.LoadAndDelete(sbx.UID); ok {
		return at.(time.Time)
	}
	return sbx.CreationTimestamp.Time
}

// phaseCollector counts sandboxes by phase at scrape time from the
// manager's cache, so the figures are right after a restart too (a gauge
// moved on transitions would start from zero).
type phaseCollector struct {
	reader client.Reader
	desc   *prometheus.Desc
}

// phaseCollectorOf is the registered collector: a process that builds a
// new manager (after a lost lease) counts from the new one's cache.
var phaseCollectorOf struct {
	sync.Mutex
	registered *phaseCollector
}

// RegisterPhaseMetric exports agentsandbox_sandboxes{phase}, from mgr's
// cache, in place of an earlier manager's.
func RegisterPhaseMetric(mgr ctrl.Manager) error {
	phaseCollectorOf.Lock()
	defer phaseCollectorOf.Unlock()
	if old := phaseCollectorOf.registered; old != nil {
		metrics.Registry.Unregister(old)
	}
	c := &phaseCollector{
		reader: mgr.GetCache(),
		desc:   prometheus.NewDesc("agentsandbox_sandboxes", "Sandboxes by phase.", []string{"phase"}, nil),
	}
	if err := metrics.Registry.Register(c); err != nil {
		return err
	}
	phaseCollectorOf.registered = c
	return nil
}

func (c *phaseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *phaseCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list := &v1.SandboxList{}
	if err := c.reader.List(ctx, list); err != nil {
		return
	}
	counts := map[v1.SandboxPhase]int{}
	for _, s := range list.Items {
		counts[s.Status.Phase]++
	}
	for _, phase := range []v1.SandboxPhase{v1.SandboxPhasePending, v1.SandboxPhaseStarting, v1.SandboxPhaseRunning,
		v1.SandboxPhaseStopping, v1.SandboxPhaseStopped, v1.SandboxPhaseFailed, v1.SandboxPhaseDeleting} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[phase]), string(phase))
	}
}

// observeReady observes the time to Ready of a sandbox Ready for the first
// time in this pass, and the wake latency of one a client woke.
func (r *Reconciler) observeReady(before, after *v1.Sandbox) {
	if conditions.IsTrue(before, v1.ReadyCondition) || !conditions.IsTrue(after, v1.ReadyCondition) {
		return
	}
	readyAt := after.Status.ReadyAt.Time
	if before.Status.ReadyAt == nil {
		timeToReady.WithLabelValues(string(after.Status.LaunchType)).Observe(readyAt.Sub(r.memory.created.createdAt(after)).Seconds())
	}
	if wokenAt, ok := r.memory.wokenAt(after.UID); ok {
		wakeLatency.Observe(readyAt.Sub(wokenAt).Seconds())
	}
}

package sandbox

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// timeToReady is observed once per sandbox, when it first becomes Ready.
var timeToReady = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "agentsandbox_sandbox_time_to_ready_seconds",
	Help:    "Time from a sandbox's creation to its first Ready, by launch type.",
	Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300},
}, []string{"launch_type"})

func init() {
	metrics.Registry.MustRegister(timeToReady)
}

func observeReady(sbx *v1.Sandbox, readyAt time.Time) {
	timeToReady.WithLabelValues(string(sbx.Status.LaunchType)).Observe(readyAt.Sub(sbx.CreationTimestamp.Time).Seconds())
}

// phaseCollector counts sandboxes by phase at scrape time from the
// manager's cache, so the figures are right after a restart too (a gauge
// moved on transitions would start from zero).
type phaseCollector struct {
	reader client.Reader
	desc   *prometheus.Desc
}

// RegisterPhaseMetric exports agentsandbox_sandboxes{phase}.
func RegisterPhaseMetric(mgr ctrl.Manager) error {
	return metrics.Registry.Register(&phaseCollector{
		reader: mgr.GetCache(),
		desc:   prometheus.NewDesc("agentsandbox_sandboxes", "Sandboxes by phase.", []string{"phase"}, nil),
	})
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
		v1.SandboxPhaseStopping, v1.SandboxPhaseStopped, v1.SandboxPhaseFailed} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[phase]), string(phase))
	}
}

package gitsync

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// syncDuration is how long syncs take, by result: "success" or the Ready
// reason of the failure, so a dashboard shows both speed and failure kinds.
var syncDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "agentsandbox_gitsync_duration_seconds",
	Help:    "Duration of GitSync syncs (fetch, decode, validate, apply, prune) by result.",
	Buckets: []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120},
}, []string{"name", "result"})

// The controller-runtime registry is served on the manager's metrics
// endpoint; registering once per process is what it expects.
func init() { metrics.Registry.MustRegister(syncDuration) }

func observeSync(name, result string, start time.Time) {
	syncDuration.WithLabelValues(name, result).Observe(time.Since(start).Seconds())
}

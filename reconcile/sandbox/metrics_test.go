package sandbox_test

import (
	"fmt"
	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"testing"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// TestMetricsCountSandboxes reads the manager's registry (what /metrics
// serves) after a sandbox became Ready.
func TestMetricsCountSandboxes(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	sbx := newSandbox(t, c, newTemplate(t, c, nil), nil)
	waitCondition(t, c, sbx, metav1.ConditionTrue, v1.ReasonPodReady)

	// The collector counts from the manager's cache, which may see the
	// Ready status a moment after the API server answered waitCondition.
	testcluster.Eventually(t, "the metrics to count the Ready sandbox", func() (bool, string) {
		running, readyObservations := phaseMetrics(t)
		return running >= 1 && readyObservations >= 1, fmt.Sprintf(
			"agentsandbox_sandboxes{phase=Running} = %v (want at least 1), agentsandbox_sandbox_time_to_ready_seconds has %d observations (want at least 1)",
			running, readyObservations)
	})
}

// phaseMetrics reads the manager's registry (what /metrics serves): the
// gauge of Running sandboxes and how many times-to-ready were observed.
func phaseMetrics(t *testing.T) (running float64, readyObservations uint64) {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	running = -1
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetName() {
			case "agentsandbox_sandboxes":
				if label(m, "phase") == "Running" {
					running = m.GetGauge().GetValue()
				}
			case "agentsandbox_sandbox_time_to_ready_seconds":
				readyObservations += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return running, readyObservations
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// idleMetrics reads how many sandboxes stopped for idleness and how many
// wakes were timed.
func idleMetrics(t *testing.T) (stops float64, wakes uint64) {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetName() {
			case "agentsandbox_sandbox_idle_stops_total":
				stops += m.GetCounter().GetValue()
			case "agentsandbox_sandbox_wake_seconds":
				wakes += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return stops, wakes
}

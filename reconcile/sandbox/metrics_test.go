package sandbox_test

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/sandbox"
)

// TestMetricsCountSandboxes reads the manager's registry (what /metrics
// serves) after a sandbox became Ready.
func TestMetricsCountSandboxes(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	sbx := newSandbox(t, c, newTemplate(t, c, nil), nil)
	waitCondition(t, c, sbx, metav1.ConditionTrue, sandbox.ReasonReady)

	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	running, readyObservations := -1.0, uint64(0)
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
	if running < 1 {
		t.Errorf("agentsandbox_sandboxes{phase=Running} = %v, want at least 1", running)
	}
	if readyObservations < 1 {
		t.Errorf("agentsandbox_sandbox_time_to_ready_seconds has no observation")
	}
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

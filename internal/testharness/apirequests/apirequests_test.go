package apirequests

import (
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func TestSinceKeepsWhatWasAnswered(t *testing.T) {
	before := Counts{"POST rolebindings": 10, "GET warmpools": 4, "PATCH namespaces": 2}
	after := Counts{"POST rolebindings": 30, "GET warmpools": 4, "PATCH namespaces": 12, "POST sandboxes": 20}
	got := after.Since(before)
	if len(got) != 3 || got["POST rolebindings"] != 20 || got["PATCH namespaces"] != 10 || got["POST sandboxes"] != 20 {
		t.Fatalf("Since = %v, want the three kinds that grew, by how much", got)
	}
	if got.Total() != 50 {
		t.Errorf("Total = %v, want 50", got.Total())
	}
	want := "PATCH namespaces 0.50, POST rolebindings 1.00, POST sandboxes 1.00"
	if per := got.Per(20); per != want {
		t.Errorf("Per(20) = %q, want %q", per, want)
	}
}

func TestTopIsTheLargestFirst(t *testing.T) {
	c := Counts{"PUT leases": 720, "PATCH nodes/status": 300, "GET namespaces": 12, "PUT resourcequotas/status": 300}
	if got, want := c.Top(3), "PUT leases 720, PATCH nodes/status 300, PUT resourcequotas/status 300"; got != want {
		t.Errorf("Top(3) = %q, want %q", got, want)
	}
	if got := (Counts{}).Top(3); got != "" {
		t.Errorf("Top of none = %q", got)
	}
}

func TestCacheChecksAreCountedByResource(t *testing.T) {
	const text = `# TYPE apiserver_storage_consistency_checks_total counter
apiserver_storage_consistency_checks_total{group="",resource="pods",status="success"} 3
apiserver_storage_consistency_checks_total{group="",resource="pods",status="error"} 1
apiserver_storage_consistency_checks_total{group="agentsandbox.dev",resource="sandboxes",status="success"} 2
`
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	got := cacheChecks(families)
	if len(got) != 2 || got["pods"] != 4 || got["sandboxes"] != 2 {
		t.Errorf("cacheChecks = %v, want pods 4 (every status) and sandboxes 2", got)
	}
	if none := cacheChecks(nil); len(none) != 0 {
		t.Errorf("cacheChecks of an API server that makes none = %v", none)
	}
}

// Package apirequests counts what the API server answered, by verb and
// resource, from its own apiserver_request_total metric. A transport around
// one client sees that client's requests; a benchmark of a claim also
// wants those the claim sets off elsewhere (the controller manager's
// garbage collector reading an owner, a pool's refill, the benchmark's own
// client), and only the API server sees them all.
package apirequests

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Counts are requests answered by "VERB resource" (or
// "VERB resource/subresource"), such as "POST rolebindings" or
// "PATCH sandboxes/status". Watches and requests for no resource (discovery,
// health, the metrics themselves) are left out: a watch is counted only
// when it ends, and the others are nobody's work on objects.
type Counts map[string]float64

// Snapshot reads the API server's request counters.
func Snapshot(tb testing.TB, cfg *rest.Config) Counts {
	tb.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		tb.Fatalf("failed to read the API server's metrics: %v", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		tb.Fatalf("failed to parse the API server's metrics: %v", err)
	}
	counts := Counts{}
	family, ok := families["apiserver_request_total"]
	if !ok {
		tb.Fatal("the API server's metrics have no apiserver_request_total")
	}
	for _, m := range family.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["resource"] == "" || labels["verb"] == "WATCH" {
			continue
		}
		key := labels["verb"] + " " + labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		counts[key] += m.GetCounter().GetValue()
	}
	return counts
}

// Since is what was answered after before was taken.
func (c Counts) Since(before Counts) Counts {
	diff := Counts{}
	for key, n := range c {
		if d := n - before[key]; d > 0 {
			diff[key] = d
		}
	}
	return diff
}

// Total is the number of requests counted.
func (c Counts) Total() float64 {
	var total float64
	for _, n := range c {
		total += n
	}
	return total
}

// Per is each count divided by n, as "VERB resource 1.00" sorted by key and
// separated by commas: what each of n operations cost, on one line, since
// the testing package cuts a benchmark's log at ten lines.
func (c Counts) Per(n int) string {
	var lines []string
	for _, key := range slices.Sorted(maps.Keys(c)) {
		lines = append(lines, fmt.Sprintf("%s %.2f", key, c[key]/float64(n)))
	}
	return strings.Join(lines, ", ")
}

// Report reports the requests answered since before as a benchmark metric,
// api-requests per op, and logs them by kind.
func Report(b *testing.B, cfg *rest.Config, before Counts, op string) {
	b.Helper()
	requests := Snapshot(b, cfg).Since(before)
	b.ReportMetric(requests.Total()/float64(b.N), "api-requests/"+op)
	b.Logf("requests per %s the API server answered, from every client, over %d: %s", op, b.N, requests.Per(b.N))
}

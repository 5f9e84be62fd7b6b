// Package apirequests counts what the API server answered, by verb and
// resource, from its own apiserver_request_total metric. A transport around
// one client sees that client's requests; a benchmark of a claim also
// wants those the claim sets off elsewhere (the controller manager's
// garbage collector reading an owner, a pool's refill, the benchmark's own
// client), and only the API server sees them all. Beside them it reads the
// API server's CPU time (process_cpu_seconds_total), which weighs what the
// requests and the watch events they feed cost it, where a count of them
// cannot: a claim and its floor may ask the same requests of it and not
// the same work.
package apirequests

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
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

// Snapshot is the API server's request counters and CPU time at one
// moment.
type Snapshot struct {
	Requests Counts
	// CPUSeconds is the API server process's CPU time since it started.
	CPUSeconds float64
	// CacheChecks are the checks of its watch cache against etcd it has
	// made, by resource (apiserver_storage_consistency_checks_total). Each
	// lists every object of its resource from etcd and from the cache, a
	// few minutes apart per resource: work of its own, which at thousands
	// of objects the requests beside it share the cores with.
	CacheChecks Counts
}

// Take reads the API server's request counters and CPU time.
func Take(tb testing.TB, cfg *rest.Config) Snapshot {
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
	cpu, ok := families["process_cpu_seconds_total"]
	if !ok || len(cpu.GetMetric()) != 1 {
		tb.Fatal("the API server's metrics have no process_cpu_seconds_total")
	}
	return Snapshot{Requests: requestCounts(tb, families), CPUSeconds: cpu.GetMetric()[0].GetCounter().GetValue(),
		CacheChecks: cacheChecks(families)}
}

// cacheChecks are the consistency checks apiserver_storage_consistency_checks_total
// counted, by resource: none when the API server runs without them
// (--feature-gates=DetectCacheInconsistency=false).
func cacheChecks(families map[string]*dto.MetricFamily) Counts {
	counts := Counts{}
	for _, m := range families["apiserver_storage_consistency_checks_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "resource" {
				counts[l.GetValue()] += m.GetCounter().GetValue()
			}
		}
	}
	return counts
}

// requestCounts are the requests apiserver_request_total counted.
func requestCounts(tb testing.TB, families map[string]*dto.MetricFamily) Counts {
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

// Top is the n largest counts, largest first, as "VERB resource 12" separated
// by commas.
func (c Counts) Top(n int) string {
	keys := slices.SortedFunc(maps.Keys(c), func(a, b string) int {
		if c[a] != c[b] {
			return cmp.Compare(c[b], c[a])
		}
		return strings.Compare(a, b)
	})
	var out []string
	for _, key := range keys[:min(n, len(keys))] {
		out = append(out, fmt.Sprintf("%s %.0f", key, c[key]))
	}
	return strings.Join(out, ", ")
}

// Report reports what the API server answered and the CPU it used since
// before, per op, as the benchmark metrics api-requests/op and
// apiserver-cpu-ms/op, and logs the requests by kind.
func Report(b *testing.B, cfg *rest.Config, before Snapshot, op string) {
	b.Helper()
	now := Take(b, cfg)
	requests := now.Requests.Since(before.Requests)
	b.ReportMetric(requests.Total()/float64(b.N), "api-requests/"+op)
	b.ReportMetric((now.CPUSeconds-before.CPUSeconds)*1000/float64(b.N), "apiserver-cpu-ms/"+op)
	b.Logf("requests per %s the API server answered, from every client, over %d: %s", op, b.N, requests.Per(b.N))
}

package latency_test

import (
	"flag"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/latency"
)

// TestRunReportsPercentiles runs an operation whose n-th call takes n ms
// from several clients and checks every call ran once and the percentiles
// are read from the sorted latencies.
func TestRunReportsPercentiles(t *testing.T) {
	// testing.Benchmark reads -test.benchtime; 100 calls are enough and
	// keep the test from growing b.N for a second.
	benchtime := flag.Lookup("test.benchtime")
	previous := benchtime.Value.String()
	if err := benchtime.Value.Set("100x"); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = benchtime.Value.Set(previous) }()
	var calls atomic.Int64
	var n int
	result := testing.Benchmark(func(b *testing.B) {
		n = b.N
		calls.Store(0)
		latency.Run(b, 4, func() time.Duration {
			return time.Duration(calls.Add(1)) * time.Millisecond
		})
	})
	if got := calls.Load(); got != int64(n) {
		t.Fatalf("op ran %d times for b.N = %d", got, n)
	}
	for metric, p := range map[string]float64{"p50-ms": 0.50, "p95-ms": 0.95, "p99-ms": 0.99} {
		want := float64(int(p*float64(n-1)) + 1)
		if got := result.Extra[metric]; got != want {
			t.Errorf("%s = %v, want %v (b.N = %d)", metric, got, want, n)
		}
	}
}

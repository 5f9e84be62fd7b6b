// Package latency runs an operation from parallel clients in a benchmark
// and reports its latency percentiles, for the benchmarks that compare
// claim latency with the API server's floor.
package latency

import (
	"sort"
	"sync"
	"testing"
	"time"
)

// Run calls op b.N times from clients goroutines, each call timing itself,
// and reports the p50, p95 and p99 in milliseconds.
func Run(b *testing.B, clients int, op func() time.Duration) {
	var (
		mu   sync.Mutex
		next int
		took []time.Duration
		wg   sync.WaitGroup
	)
	b.ResetTimer()
	for range clients {
		wg.Go(func() {
			for {
				mu.Lock()
				if next >= b.N {
					mu.Unlock()
					return
				}
				next++
				mu.Unlock()
				d := op()
				mu.Lock()
				took = append(took, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	percentile := func(p float64) float64 {
		if len(took) == 0 {
			return 0
		}
		return float64(took[int(p*float64(len(took)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(percentile(0.50), "p50-ms")
	b.ReportMetric(percentile(0.95), "p95-ms")
	b.ReportMetric(percentile(0.99), "p99-ms")
}

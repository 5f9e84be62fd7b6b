// Package latency runs an operation from parallel clients in a benchmark
// and reports its latency percentiles, for the benchmarks that compare
// claim latency with the API server's floor.
package latency

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// Run calls op b.N times from clients goroutines, each call timing itself,
// and reports the p50, p95 and p99 in milliseconds.
func Run(b *testing.B, clients int, op func() time.Duration) {
	b.ResetTimer()
	took := Concurrently(clients, b.N, op)
	b.StopTimer()
	report(b, "", took)
}

// Concurrently calls op n times from clients goroutines, each call timing
// itself, and returns the n times in ascending order.
func Concurrently(clients, n int, op func() time.Duration) []time.Duration {
	return spread(clients, n, op)[0]
}

// Mixed calls floor and op n times each from clients goroutines, each
// goroutine alternating between them and every other one starting with
// floor, and returns the times of each in ascending order. Both then run
// under the same load, clients calls of both kinds under way at once, so
// that a change in the cluster's speed while they run moves both alike,
// as Pairs has it for one client.
func Mixed(clients, n int, floor, op func() time.Duration) (floors, ops []time.Duration) {
	took := spread(clients, n, floor, op)
	return took[0], took[1]
}

// spread calls each of calls n times from clients goroutines, each
// goroutine taking them in turn, starting with the one its number picks
// (of the ones with calls left), and returns the times of each call, in
// ascending order.
func spread(clients, n int, calls ...func() time.Duration) [][]time.Duration {
	var (
		mu   sync.Mutex
		left = make([]int, len(calls))
		took = make([][]time.Duration, len(calls))
		wg   sync.WaitGroup
	)
	for i := range calls {
		left[i], took[i] = n, make([]time.Duration, 0, n)
	}
	// next is the first call from turn on with calls left, or -1.
	next := func(turn int) int {
		for i := range calls {
			if k := (turn + i) % len(calls); left[k] > 0 {
				left[k]--
				return k
			}
		}
		return -1
	}
	for client := range clients {
		wg.Go(func() {
			for turn := client; ; turn++ {
				mu.Lock()
				k := next(turn)
				mu.Unlock()
				if k < 0 {
					return
				}
				d := calls[k]()
				mu.Lock()
				took[k] = append(took[k], d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, t := range took {
		slices.Sort(t)
	}
	return took
}

// Paired calls floor and op b.N times each from one client, in pairs
// (Pairs), and compares op with floor within each pair. It reports op's
// p50, p95 and p99 in milliseconds, floor's as floor-p50-ms and so on, op's
// p50 and p99 as a ratio to floor's (x-floor-p50, x-floor-p99), and the
// median of the pairs' ratios (x-floor-pairs).
func Paired(b *testing.B, settle time.Duration, floor, op func() time.Duration) {
	b.ResetTimer()
	floors, ops := Pairs(b.N, settle, floor, op)
	b.StopTimer()
	pairs := MedianRatio(floors, ops)
	opAt, floorAt := report(b, "", ops), report(b, "floor-", floors)
	b.ReportMetric(opAt(0.50)/floorAt(0.50), "x-floor-p50")
	b.ReportMetric(opAt(0.99)/floorAt(0.99), "x-floor-p99")
	b.ReportMetric(pairs, "x-floor-pairs")
}

// Pairs calls floor and op n times each from one client, in pairs, and
// returns what each call took, by pair. A drift of the cluster's speed
// over the run, which between two runs can exceed the gap measured, then
// moves both alike. The order within a pair alternates (floor first, then
// op first) and each call is followed by settle, so that the work one call
// leaves behind ends before the next call is timed and lands on neither.
func Pairs(n int, settle time.Duration, floor, op func() time.Duration) (floors, ops []time.Duration) {
	floors, ops = make([]time.Duration, n), make([]time.Duration, n)
	timed := func(call func() time.Duration) time.Duration {
		d := call()
		time.Sleep(settle)
		return d
	}
	for i := range n {
		if i%2 == 0 {
			floors[i] = timed(floor)
			ops[i] = timed(op)
		} else {
			ops[i] = timed(op)
			floors[i] = timed(floor)
		}
	}
	return floors, ops
}

// MedianRatio is the median, over the pairs, of op's time over floor's;
// floors and ops are by pair, as Pairs returns them.
func MedianRatio(floors, ops []time.Duration) float64 {
	if len(ops) == 0 {
		return 0
	}
	ratios := make([]float64, len(ops))
	for i := range ratios {
		ratios[i] = float64(ops[i]) / float64(max(floors[i], 1))
	}
	slices.Sort(ratios)
	return ratios[(len(ratios)-1)/2]
}

// report sorts took and reports its p50, p95 and p99 in milliseconds as
// prefix+"p50-ms" and so on. It returns the percentile of took in
// milliseconds at p in [0, 1].
func report(b *testing.B, prefix string, took []time.Duration) (at func(p float64) float64) {
	slices.Sort(took)
	at = func(p float64) float64 {
		if len(took) == 0 {
			return 0
		}
		return float64(took[int(p*float64(len(took)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.50), prefix+"p50-ms")
	b.ReportMetric(at(0.95), prefix+"p95-ms")
	b.ReportMetric(at(0.99), prefix+"p99-ms")
	return at
}

package latency_test

import (
	"flag"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/latency"
)

// TestRunReportsPercentiles runs an operation whose n-th call takes n ms
// from several clients and checks every call ran once and the percentiles
// are read from the sorted latencies.
func TestRunReportsPercentiles(t *testing.T) {
	// 100 calls are enough and keep the test from growing b.N for a
	// second.
	benchtime(t, "100x")
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

// TestConcurrentlyKeepsToItsClients runs 50 calls from 5 clients and checks
// that no more than 5 were under way at once, that 5 were at some point, and
// that the 50 times come back in ascending order.
func TestConcurrentlyKeepsToItsClients(t *testing.T) {
	var now, most atomic.Int64
	took := latency.Concurrently(5, 50, func() time.Duration {
		in := now.Add(1)
		for m := most.Load(); in > m && !most.CompareAndSwap(m, in); m = most.Load() {
		}
		time.Sleep(2 * time.Millisecond)
		now.Add(-1)
		return time.Duration(in) * time.Millisecond
	})
	if len(took) != 50 || !slices.IsSorted(took) {
		t.Fatalf("got %d times, sorted %v: %v", len(took), slices.IsSorted(took), took)
	}
	if m := most.Load(); m != 5 {
		t.Errorf("at most %d calls under way at once, want 5", m)
	}
}

// TestMixedRunsBothUnderTheSameLoad runs 30 calls each of a floor and an
// operation from 4 clients and checks that each kind's times come back as
// its own, sorted, that no more than 4 calls were under way at once, and
// that both kinds were under way together, two of each at the start (the
// first four calls wait for each other).
func TestMixedRunsBothUnderTheSameLoad(t *testing.T) {
	var (
		mu                    sync.Mutex
		inFlight              [2]int
		calls, most, together int
		allStarted            = make(chan struct{})
	)
	call := func(kind int, took time.Duration) func() time.Duration {
		return func() time.Duration {
			mu.Lock()
			inFlight[kind]++
			calls++
			first := calls <= 4
			if calls == 4 {
				close(allStarted)
			}
			most = max(most, inFlight[0]+inFlight[1])
			together = max(together, min(inFlight[0], inFlight[1]))
			mu.Unlock()
			if first {
				select {
				case <-allStarted:
				case <-time.After(5 * time.Second):
					t.Error("the first four calls were not under way together")
				}
			}
			time.Sleep(time.Millisecond)
			mu.Lock()
			inFlight[kind]--
			mu.Unlock()
			return took
		}
	}
	floors, ops := latency.Mixed(4, 30, call(0, time.Millisecond), call(1, 3*time.Millisecond))
	if len(floors) != 30 || len(ops) != 30 {
		t.Fatalf("got %d floor and %d op times, want 30 each", len(floors), len(ops))
	}
	for i := range floors {
		if floors[i] != time.Millisecond || ops[i] != 3*time.Millisecond {
			t.Fatalf("the times came back mixed up: floors %v, ops %v", floors, ops)
		}
	}
	if most > 4 {
		t.Errorf("%d calls under way at once, want at most 4", most)
	}
	if together != 2 {
		t.Errorf("at most %d calls of each kind under way together, want 2", together)
	}
}

// TestPairedAlternatesAndCompares runs a floor and an operation that takes
// three times as long in its i-th pair, and checks they ran in pairs whose
// order alternates and that every ratio reported is op's over floor's.
func TestPairedAlternatesAndCompares(t *testing.T) {
	benchtime(t, "10x")
	var calls []string
	var floors, ops int
	result := testing.Benchmark(func(b *testing.B) {
		calls, floors, ops = nil, 0, 0
		latency.Paired(b, 0, func() time.Duration {
			calls = append(calls, "floor")
			floors++
			return time.Duration(floors) * time.Millisecond
		}, func() time.Duration {
			calls = append(calls, "op")
			ops++
			return 3 * time.Duration(ops) * time.Millisecond
		})
	})
	if floors != 10 || ops != 10 {
		t.Fatalf("floor ran %d times and op %d for b.N = 10", floors, ops)
	}
	for i := 0; i < len(calls); i += 2 {
		want := []string{"floor", "op"}
		if i/2%2 == 1 {
			want = []string{"op", "floor"}
		}
		if calls[i] != want[0] || calls[i+1] != want[1] {
			t.Fatalf("pair %d ran %v, want %v (all: %v)", i/2, calls[i:i+2], want, calls)
		}
	}
	for metric, want := range map[string]float64{
		"floor-p50-ms": 5, "p50-ms": 15, "floor-p99-ms": 9, "p99-ms": 27,
		"x-floor-p50": 3, "x-floor-p99": 3, "x-floor-pairs": 3,
	} {
		if got := result.Extra[metric]; got != want {
			t.Errorf("%s = %v, want %v", metric, got, want)
		}
	}
}

// benchtime sets -test.benchtime, which testing.Benchmark reads, until t
// ends.
func benchtime(t *testing.T, value string) {
	setting := flag.Lookup("test.benchtime")
	previous := setting.Value.String()
	if err := setting.Value.Set(value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = setting.Value.Set(previous) })
}

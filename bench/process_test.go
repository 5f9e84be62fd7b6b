package bench_test

import (
	"fmt"
	"math"
	runtimemetrics "runtime/metrics"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// processCounts is what this process has counted so far of how its claims
// were served inside it: its collector's CPU and cycles, how long its
// goroutines waited for a core, and the sandbox controller's requests'
// waits in its work queue and its passes. Two of them apart (since) tell
// whether a slow claim was slow in the API server or in here, and if in
// here, whether for the cores or for a worker.
type processCounts struct {
	gcCPU    time.Duration
	gcCycles uint64
	// runWaits is the runtime's histogram of goroutines' waits from
	// runnable to running.
	runWaits *runtimemetrics.Float64Histogram
	// queued and passes are the sandbox controller's: how long its
	// requests waited in its work queue, and how long its passes took.
	queued, passes histogramSum
}

// histogramSum is a Prometheus histogram's count and sum, in seconds.
type histogramSum struct {
	count uint64
	sum   float64
}

func (h histogramSum) mean() time.Duration {
	if h.count == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.count) * float64(time.Second))
}

func (h histogramSum) String() string {
	return fmt.Sprintf("%d, mean %s", h.count, ms(h.mean()))
}

func countProcess(b *testing.B) processCounts {
	samples := []runtimemetrics.Sample{
		{Name: "/cpu/classes/gc/total:cpu-seconds"},
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/sched/latencies:seconds"},
	}
	runtimemetrics.Read(samples)
	out := processCounts{
		gcCPU:    time.Duration(samples[0].Value.Float64() * float64(time.Second)),
		gcCycles: samples[1].Value.Uint64(),
		runWaits: samples[2].Value.Float64Histogram(),
	}
	sandboxSeries(b, func(family string, m *dto.Metric) {
		switch family {
		case "workqueue_queue_duration_seconds":
			out.queued = histogramSum{m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()}
		case "workqueue_work_duration_seconds":
			out.passes = histogramSum{m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()}
		}
	})
	return out
}

// since is what the process counted between before and p.
func (p processCounts) since(before processCounts) processCounts {
	waits := &runtimemetrics.Float64Histogram{Buckets: p.runWaits.Buckets, Counts: make([]uint64, len(p.runWaits.Counts))}
	for i := range waits.Counts {
		waits.Counts[i] = p.runWaits.Counts[i] - before.runWaits.Counts[i]
	}
	return processCounts{
		gcCPU:    p.gcCPU - before.gcCPU,
		gcCycles: p.gcCycles - before.gcCycles,
		runWaits: waits,
		queued:   histogramSum{p.queued.count - before.queued.count, p.queued.sum - before.queued.sum},
		passes:   histogramSum{p.passes.count - before.passes.count, p.passes.sum - before.passes.sum},
	}
}

// runWait is the p-th quantile of the goroutines' waits for a core: the
// upper bound of the runtime's bucket it falls in (its lower bound for the
// last, unbounded one).
func (p processCounts) runWait(q float64) time.Duration {
	var total uint64
	for _, n := range p.runWaits.Counts {
		total += n
	}
	var seen uint64
	for i, n := range p.runWaits.Counts {
		seen += n
		if total > 0 && float64(seen) >= q*float64(total) {
			bound := p.runWaits.Buckets[i+1]
			if math.IsInf(bound, 1) {
				bound = p.runWaits.Buckets[i]
			}
			return time.Duration(bound * float64(time.Second))
		}
	}
	return 0
}

// sandboxSeries calls each with every series controller-runtime keeps in
// this process for the sandbox controller, by its family's name.
func sandboxSeries(b *testing.B, each func(family string, m *dto.Metric)) {
	families, err := metrics.Registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, family := range families {
		for _, m := range family.GetMetric() {
			for _, label := range m.GetLabel() {
				if label.GetName() == "controller" && label.GetValue() == "sandbox" {
					each(family.GetName(), m)
				}
			}
		}
	}
}

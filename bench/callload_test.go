package bench_test

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// processes are the cluster's processes running on this machine (by their
// names in clusterProcesses) and their ids, found once: reading their CPU
// is then a few small files, cheap enough to read around every timed call.
type processes map[string][]int

func findProcesses(b *testing.B) processes {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	found := processes{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		name := strings.TrimSpace(string(comm))
		if err == nil && slices.Contains(clusterProcesses, name) {
			found[name] = append(found[name], pid)
		}
	}
	return found
}

// cpu is the CPU time each process used so far, this one's under
// benchmarkName. /proc counts it in ticks of 10 ms.
func (p processes) cpu() map[string]time.Duration {
	out := map[string]time.Duration{benchmarkName: cpuTime()}
	for name, pids := range p {
		for _, pid := range pids {
			if d, err := processCPU(pid); err == nil {
				out[name] += d
			}
		}
	}
	return out
}

// callLoad is one timed call: what it measured, when it started, how long
// it ran in all, and the CPU each process used meanwhile.
type callLoad struct {
	took, at, wall time.Duration
	cpu            map[string]time.Duration
}

// loadLog keeps the load of every call it timed, from one client: which
// processes were busy while the slowest calls ran, against all of them, is
// what tells a slow API server from slow work of the claim's own.
type loadLog struct {
	procs processes
	start time.Time
	calls []callLoad
}

// timed wraps op to log its load. The CPU is read around op, so the
// reads themselves are not in what op measures.
func (l *loadLog) timed(op func() time.Duration) func() time.Duration {
	return func() time.Duration {
		before, begin := l.procs.cpu(), time.Now()
		took := op()
		wall, after := time.Since(begin), l.procs.cpu()
		for name, d := range before {
			after[name] -= d
		}
		l.calls = append(l.calls, callLoad{took: took, at: begin.Sub(l.start), wall: wall, cpu: after})
		return took
	}
}

// slowest are the n calls that measured longest, slowest first.
func (l *loadLog) slowest(n int) []callLoad {
	calls := slices.SortedFunc(slices.Values(l.calls), func(a, b callLoad) int { return int(b.took - a.took) })
	return calls[:min(n, len(calls))]
}

// cores is the CPU name used over calls' wall time: how many cores it kept
// busy, on average, while they ran.
func cores(calls []callLoad, name string) float64 {
	var cpu, wall time.Duration
	for _, c := range calls {
		cpu, wall = cpu+c.cpu[name], wall+c.wall
	}
	if wall == 0 {
		return 0
	}
	return float64(cpu) / float64(wall)
}

// starts says when calls started, in seconds since the log's start, in
// the order they came: whether the slowest came together.
func starts(calls []callLoad) string {
	at := make([]time.Duration, len(calls))
	for i, c := range calls {
		at[i] = c.at
	}
	slices.Sort(at)
	out := make([]string, len(at))
	for i, d := range at {
		out[i] = fmt.Sprintf("%.1f", d.Seconds())
	}
	return strings.Join(out, ", ")
}

func TestLoadLogWeighsTheSlowestCalls(t *testing.T) {
	l := &loadLog{procs: processes{}, start: time.Now()}
	spin := func(d time.Duration) func() time.Duration {
		return func() time.Duration {
			for begin := time.Now(); time.Since(begin) < d; {
			}
			return d
		}
	}
	idle := func() time.Duration { time.Sleep(30 * time.Millisecond); return 30 * time.Millisecond }
	for _, op := range []func() time.Duration{spin(60 * time.Millisecond), idle, spin(90 * time.Millisecond), idle} {
		l.timed(op)()
	}
	slow := l.slowest(2)
	if len(slow) != 2 || slow[0].took != 90*time.Millisecond || slow[1].took != 60*time.Millisecond {
		t.Fatalf("slowest(2) took %v, want the two spins, slowest first", []time.Duration{slow[0].took, slow[1].took})
	}
	// This process kept about a core busy while it spun, and none while it
	// slept; /proc and getrusage count coarsely, hence the margins.
	if busy := cores(slow, benchmarkName); busy < 0.5 {
		t.Errorf("cores while spinning = %.2f, want about 1", busy)
	}
	if busy := cores(l.calls, benchmarkName); busy >= cores(slow, benchmarkName) {
		t.Errorf("cores over every call = %.2f, want fewer than over the spins alone", busy)
	}
	if got := starts(l.slowest(10)); strings.Count(got, ",") != 3 || !strings.HasPrefix(got, "0.0, ") {
		t.Errorf("starts = %q, want four times in order, the first at 0.0 s", got)
	}
}

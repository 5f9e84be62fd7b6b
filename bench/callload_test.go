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
	// A spin runs until this process has used d of CPU, not d of wall time:
	// on a machine busy with other tests it takes longer but costs the same.
	spin := func(d time.Duration) func() time.Duration {
		return func() time.Duration {
			for begin := cpuTime(); cpuTime()-begin < d; {
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
	for _, c := range slow {
		if used := c.cpu[benchmarkName]; used < c.took {
			t.Errorf("a spin of %v of CPU was logged as %v, want at least what it spun", c.took, used)
		}
	}
	if spun, all := cores(slow, benchmarkName), cores(l.calls, benchmarkName); all >= spun {
		t.Errorf("cores over every call = %.2f, want fewer than over the spins alone (%.2f): the sleeps used none", all, spun)
	}
	if got := starts(l.slowest(10)); strings.Count(got, ",") != 3 || !strings.HasPrefix(got, "0.0, ") {
		t.Errorf("starts = %q, want four times in order, the first at 0.0 s", got)
	}
}

func TestCoresIsCPUOverWallTime(t *testing.T) {
	calls := []callLoad{
		{wall: 100 * time.Millisecond, cpu: map[string]time.Duration{"api": 50 * time.Millisecond}},
		{wall: 300 * time.Millisecond, cpu: map[string]time.Duration{"api": 550 * time.Millisecond}},
	}
	if got := cores(calls, "api"); got != 1.5 {
		t.Errorf("cores = %v, want 1.5 (600 ms of CPU over 400 ms)", got)
	}
	if got := cores(calls, "etcd"); got != 0 {
		t.Errorf("cores of a process not logged = %v, want 0", got)
	}
	if got := cores(nil, "api"); got != 0 {
		t.Errorf("cores over no calls = %v, want 0", got)
	}
}

package bench_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// gcCycle is one cycle of a Go process's collector, as GODEBUG=gctrace=1
// reports it: when it started (in the process's time, and on this
// machine's clock once placed), how long it ran from its first
// stop-the-world pause to its last, the CPU its marking took, and the
// heap it found live.
type gcCycle struct {
	sinceStart, clock, markCPU time.Duration
	liveMB                     int
	start                      time.Time
}

// gctraceLine is the start of a gctrace line: "gc 12 @3.456s 4%: 0.1+250+0.05
// ms clock, 0.2+30/120/5+0.1 ms cpu, 400->420->210 MB, ...". The clock
// times are the three phases' (sweep termination, concurrent mark, mark
// termination); the CPU's middle three are the marking's (assists,
// background, idle).
var gctraceLine = regexp.MustCompile(`^gc \d+ @([0-9.]+)s \d+%[^:]*: ([0-9.]+)\+([0-9.]+)\+([0-9.]+) ms clock, [0-9.]+\+([0-9.]+)/([0-9.]+)/([0-9.]+)\+[0-9.]+ ms cpu, \d+->\d+->(\d+) MB`)

// parseGCTrace reads a gctrace line; ok is false for any other line.
func parseGCTrace(line string) (c gcCycle, ok bool) {
	m := gctraceLine.FindStringSubmatch(line)
	if m == nil {
		return c, false
	}
	msOf := func(s string) time.Duration {
		f, _ := strconv.ParseFloat(s, 64)
		return time.Duration(f * float64(time.Millisecond))
	}
	c.sinceStart = msOf(m[1]) * 1000
	c.clock = msOf(m[2]) + msOf(m[3]) + msOf(m[4])
	c.markCPU = msOf(m[5]) + msOf(m[6]) + msOf(m[7])
	c.liveMB, _ = strconv.Atoi(m[8])
	return c, true
}

// followCollector follows the log of the process pid (its standard error,
// where the runtime prints gctrace lines) from its end, and returns the
// collector cycles it printed until stop is called, placed on this
// machine's clock. The line of a cycle is printed as the cycle ends, and
// is seen within a poll of it: the process's start on this clock is the
// earliest over the cycles of the time seen less the cycle's time since
// the start and its length, so no cycle is placed later than it ran.
//
// The local cluster's API server runs with GODEBUG=gctrace=1
// (hack/cluster/kwok.yaml); without it there are none.
func followCollector(tb testing.TB, pid int) (stop func() []gcCycle) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/fd/2", pid))
	if err != nil {
		tb.Fatalf("the API server's log: %v", err)
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		tb.Fatal(err)
	}
	type seen struct {
		cycle gcCycle
		at    time.Time
	}
	// cycles is the reader's alone until over is closed.
	var (
		cycles []seen
		done   = make(chan struct{})
		over   = make(chan struct{})
	)
	go func() {
		defer close(over)
		r := bufio.NewReader(f)
		var partial string
		for {
			line, err := r.ReadString('\n')
			partial += line
			if err == nil {
				if c, ok := parseGCTrace(partial); ok {
					cycles = append(cycles, seen{c, time.Now()})
				}
				partial = ""
				continue
			}
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return func() []gcCycle {
		close(done)
		<-over
		f.Close()
		if len(cycles) == 0 {
			return nil
		}
		var started time.Time
		for i, s := range cycles {
			if at := s.at.Add(-s.cycle.sinceStart - s.cycle.clock); i == 0 || at.Before(started) {
				started = at
			}
		}
		out := make([]gcCycle, len(cycles))
		for i, s := range cycles {
			out[i] = s.cycle
			out[i].start = started.Add(s.cycle.sinceStart)
		}
		return out
	}
}

// duringCollector is how many of calls ran, at least in part, while one of
// cycles did.
func duringCollector(calls []callLoad, logStart time.Time, cycles []gcCycle) int {
	n := 0
	for _, c := range calls {
		begin := logStart.Add(c.at)
		end := begin.Add(c.wall)
		if slices.ContainsFunc(cycles, func(g gcCycle) bool {
			return g.start.Before(end) && begin.Before(g.start.Add(g.clock))
		}) {
			n++
		}
	}
	return n
}

// describeCycles is the cycles' count, their clock times' median and
// largest, their marking's CPU, and the live heap of the last: "4 cycles;
// each 180.0 ms median, 420.0 ms most; marking 900.0 ms CPU; 1200 MB live".
func describeCycles(cycles []gcCycle) string {
	if len(cycles) == 0 {
		return "none"
	}
	clocks := make([]time.Duration, len(cycles))
	var cpu time.Duration
	for i, c := range cycles {
		clocks[i], cpu = c.clock, cpu+c.markCPU
	}
	slices.Sort(clocks)
	return strings.Join([]string{
		fmt.Sprintf("%d cycles", len(cycles)),
		"each " + ms(clocks[(len(clocks)-1)/2]) + " median, " + ms(clocks[len(clocks)-1]) + " most",
		"marking " + ms(cpu) + " CPU",
		fmt.Sprintf("%d MB live", cycles[len(cycles)-1].liveMB),
	}, "; ")
}

func TestGCTraceLinesPlaceTheCollectorsCycles(t *testing.T) {
	lines := []string{
		"gc 214 @4892.125s 8%: 0.12+250+0.050 ms clock, 0.24+30/120/5.5+0.10 ms cpu, 400->420->210 MB, 430 MB goal, 1 MB stacks, 0 MB globals, 2 P",
		"gc 215 @4896.500s 8% (checking for goroutine leaks): 0.10+12+0.040 ms clock, 0.20+1.5/10/0+0.08 ms cpu, 420->421->212 MB, 424 MB goal, 1 MB stacks, 0 MB globals, 2 P (forced)",
		`I1207 07:24:50.123456    3047 controller.go:231] "Updating" node="kwok-1"`,
	}
	var cycles []gcCycle
	for _, line := range lines {
		if c, ok := parseGCTrace(line); ok {
			cycles = append(cycles, c)
		}
	}
	if len(cycles) != 2 {
		t.Fatalf("parsed %d cycles, want the two gctrace lines", len(cycles))
	}
	first := cycles[0]
	if first.sinceStart != 4892125*time.Millisecond || first.clock != 250170*time.Microsecond || first.markCPU != 155500*time.Microsecond || first.liveMB != 210 {
		t.Errorf("first cycle = %+v, want @4892.125s, 250.17 ms clock, 155.5 ms marking, 210 MB live", first)
	}
	if cycles[1].clock != 12140*time.Microsecond {
		t.Errorf("second cycle's clock = %v, want 12.14 ms", cycles[1].clock)
	}

	start := time.Now()
	cycles[0].start, cycles[1].start = start.Add(100*time.Millisecond), start.Add(time.Second)
	calls := []callLoad{
		{at: 0, wall: 50 * time.Millisecond},                        // before the first
		{at: 90 * time.Millisecond, wall: 20 * time.Millisecond},    // into the first
		{at: 300 * time.Millisecond, wall: 10 * time.Millisecond},   // inside the first
		{at: 400 * time.Millisecond, wall: 10 * time.Millisecond},   // between
		{at: 1005 * time.Millisecond, wall: 100 * time.Millisecond}, // over the second's end
	}
	if n := duringCollector(calls, start, cycles); n != 3 {
		t.Errorf("duringCollector = %d, want the three calls that met a cycle", n)
	}
	if got := describeCycles(cycles); !strings.HasPrefix(got, "2 cycles; each 12.1 ms median, 250.2 ms most") || !strings.HasSuffix(got, "212 MB live") {
		t.Errorf("describeCycles = %q", got)
	}
}

func TestFollowCollectorPlacesACycleOnThisClock(t *testing.T) {
	log, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	// A process that prints, 0.3 s after it starts, the line of a cycle
	// that started at 0.25 s and ran 40 ms.
	cmd := exec.Command("sh", "-c", "sleep 0.3; echo 'gc 1 @0.250s 1%: 0.010+40+0.010 ms clock, 0.020+0/1.0/0+0.020 ms cpu, 4->4->2 MB, 4 MB goal, 0 MB stacks, 0 MB globals, 2 P' >&2; exec sleep 5")
	cmd.Stderr = log
	begin := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	stop := followCollector(t, cmd.Process.Pid)
	time.Sleep(700 * time.Millisecond)
	cycles := stop()
	if len(cycles) != 1 {
		t.Fatalf("followed %d cycles, want 1", len(cycles))
	}
	if at := cycles[0].start.Sub(begin); at < 200*time.Millisecond || at > 350*time.Millisecond {
		t.Errorf("the cycle was placed %v after the process started, want about 250 ms", at)
	}
}

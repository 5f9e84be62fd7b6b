package bench_test

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/reconciletest"
)

// reconcilerProcess is `agentsandbox reconcile` running as a process of
// its own, as config/'s Deployment runs it: its memory and CPU are then
// the reconciler's alone, not shared with a benchmark's clients, watches
// and records in one heap and one collector.
type reconcilerProcess struct {
	cmd    *exec.Cmd
	exited chan error
	// pprof is the address of its /debug/pprof, on loopback.
	pprof string
	// stop stops it (SIGTERM) and resumes the in-process controllers.
	stop func()
}

// buildReconciler builds the reconciler's binary as the Dockerfile builds
// it, and returns its path.
func buildReconciler(b *testing.B) string {
	bin := filepath.Join(b.TempDir(), "agentsandbox")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "../cmd/agentsandbox")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build the reconciler: %v\n%s", err, out)
	}
	return bin
}

// startReconciler pauses the in-process controllers and starts bin's
// reconciler in their place, with the same controllers' options (bench's
// TestMain: no egress gate, no gateway), as the reconciler's
// ServiceAccount, and with env (the Go runtime's settings) added to its
// environment. It returns once the process is ready (/readyz: every cache
// synced) and how long that took. stop, or the benchmark's end, stops the
// process and resumes the in-process controllers.
func startReconciler(b *testing.B, bin string, env []string) (*reconcilerProcess, time.Duration) {
	kubeconfig := testcluster.Get(b).ImpersonatingKubeconfig(b, reconciletest.ServiceAccount, reconciletest.ServiceAccountGroups...)
	health := freeLoopbackAddr(b)
	resume, err := reconciletest.Pause()
	if err != nil {
		b.Fatal(err)
	}
	p := &reconcilerProcess{exited: make(chan error, 1), pprof: freeLoopbackAddr(b)}
	p.cmd = exec.Command(bin, "reconcile", "--kubeconfig", kubeconfig, "--leader-elect=false", "--metrics-addr=0",
		"--health-addr", health, "--pprof-addr", p.pprof, "--egress-gate-image=", "--egress-gateway=", "--zap-log-level=error")
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stderr = os.Stderr
	// A benchmark killed before its cleanup must not leave a reconciler
	// running: its kubeconfig names the local cluster's address, which the
	// next cluster of that name (a test run's) takes over, and a second
	// reconciler there, without the gateway or the gate, breaks its tests.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	begin := time.Now()
	if err := p.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	p.stop = sync.OnceFunc(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		if err := <-p.exited; err != nil {
			b.Errorf("the reconciler did not stop cleanly on SIGTERM: %v", err)
		}
		if err := resume(); err != nil {
			b.Error(err)
		}
	})
	b.Cleanup(p.stop)
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		select {
		case err := <-p.exited:
			b.Fatalf("the reconciler exited before it was ready: %v", err)
		default:
		}
		if resp, err := http.Get("http://" + health + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, time.Since(begin)
			}
		}
		if time.Now().After(deadline) {
			b.Fatal("the reconciler not ready within 5 minutes")
		}
	}
}

// measureAlone starts bin's reconciler with env (startReconciler), lets it
// settle and adds to the table, under a name that says env, its start to
// ready and, at rest, its RSS, heap in use and CPU over 30 s. It returns
// the running process and its memory at rest.
func measureAlone(b *testing.B, bin string, env []string, add func(what, empty, atScale, ratio string)) (*reconcilerProcess, processMemory) {
	p, ready := startReconciler(b, bin, env)
	p.settle(b)
	cpu := p.cpu(b)
	time.Sleep(30 * time.Second)
	restCPU := p.cpu(b) - cpu
	mem := p.memory(b)
	what := fmt.Sprintf("the reconciler alone (`agentsandbox reconcile`, %s)", describeEnv(env))
	add(what+": start to ready (every cache synced)", "", ready.Round(time.Millisecond).String(), "")
	add(what+": RSS at rest (anonymous), peak RSS since its start", "", fmt.Sprintf("%s (%s), %s", mib(mem.rss), mib(mem.anon), mib(mem.peak)), "")
	add(what+": heap in use at rest, after a collection", "", mib(p.heap(b)), "")
	add(what+": CPU at rest (30 s)", "", restCPU.String(), "")
	return p, mem
}

// describeEnv spells out the runtime settings of env, the last of a name
// winning as it does in a process's environment, and a memory limit in
// MiB.
func describeEnv(env []string) string {
	values := map[string]string{}
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		if bytes, err := strconv.ParseUint(value, 10, 64); err == nil && name == "GOMEMLIMIT" {
			value = mib(bytes)
		}
		values[name] = value
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(values)) {
		out = append(out, name+"="+values[name])
	}
	return strings.Join(out, ", ")
}

// settle waits until the process has used under 1% of a core for 5 s
// (its first passes over every object done), at most 5 minutes.
func (p *reconcilerProcess) settle(b *testing.B) {
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); {
		before := p.cpu(b)
		time.Sleep(5 * time.Second)
		if p.cpu(b)-before < 50*time.Millisecond {
			return
		}
	}
	b.Log("the reconciler still busy after 5 minutes; measuring anyway")
}

// cpu is the CPU time the process used so far.
func (p *reconcilerProcess) cpu(b *testing.B) time.Duration {
	d, err := processCPU(p.cmd.Process.Pid)
	if err != nil {
		b.Error(err)
	}
	return d
}

// processCPU is the CPU time process pid used so far, user and system
// (/proc/PID/stat, in clock ticks of 1/100 s).
func processCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command's name, which is in parentheses and may
	// hold spaces: utime and stime are the 14th and 15th of the line.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// processMemory is what /proc says of the process's memory: its
// resident set now (VmRSS), the anonymous part of it (RssAnon: the heap,
// stacks and runtime; the rest are the binary's pages, which the kernel
// may drop and read again), and its peak since it started (VmHWM).
type processMemory struct{ rss, anon, peak uint64 }

func (p *reconcilerProcess) memory(b *testing.B) processMemory {
	var m processMemory
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		b.Error(err)
		return m
	}
	defer f.Close()
	for s := bufio.NewScanner(f); s.Scan(); {
		key, value, _ := strings.Cut(s.Text(), ":")
		kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		switch key {
		case "VmRSS":
			m.rss = kb << 10
		case "RssAnon":
			m.anon = kb << 10
		case "VmHWM":
			m.peak = kb << 10
		}
	}
	return m
}

// heap collects the process's garbage and returns its heap in use after
// (the runtime's HeapInuse, from /debug/pprof/heap's text form). When
// AGENTSANDBOX_SCALE_HEAPPROFILE names a file, the profile is also
// written to that name with ".alone" appended.
func (p *reconcilerProcess) heap(b *testing.B) uint64 {
	if path := os.Getenv("AGENTSANDBOX_SCALE_HEAPPROFILE"); path != "" {
		if err := os.WriteFile(path+".alone", p.get(b, "/debug/pprof/heap?gc=1"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for line := range strings.Lines(string(p.get(b, "/debug/pprof/heap?gc=1&debug=1"))) {
		if value, ok := strings.CutPrefix(line, "# HeapInuse = "); ok {
			inuse, err := strconv.ParseUint(strings.TrimSpace(value), 10, 64)
			if err != nil {
				b.Fatalf("/debug/pprof/heap: %q: %v", line, err)
			}
			return inuse
		}
	}
	b.Fatal("/debug/pprof/heap: no HeapInuse")
	return 0
}

// get is the body of the process's pprof server's answer to path.
func (p *reconcilerProcess) get(b *testing.B, path string) []byte {
	resp, err := http.Get("http://" + p.pprof + path)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %s %v", path, resp.Status, err)
	}
	return body
}

// deployedRuntimeEnv is the Go runtime's settings config/'s Deployment
// gives the reconciler: its GO* variables set to a value, and GOMEMLIMIT
// at the container's memory limit (a resourceFieldRef, resolved here as
// the kubelet resolves it, to bytes).
func deployedRuntimeEnv(b *testing.B) []string {
	data, err := os.ReadFile("../config/manager/deployment.yaml")
	if err != nil {
		b.Fatal(err)
	}
	deployment := &appsv1.Deployment{}
	if err := yaml.Unmarshal(data, deployment); err != nil {
		b.Fatalf("config/manager/deployment.yaml: %v", err)
	}
	for _, c := range deployment.Spec.Template.Spec.Containers {
		if c.Name != "reconciler" {
			continue
		}
		var env []string
		for _, e := range c.Env {
			switch {
			case !strings.HasPrefix(e.Name, "GO"):
			case e.Value != "":
				env = append(env, e.Name+"="+e.Value)
			case e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil && e.ValueFrom.ResourceFieldRef.Resource == "limits.memory":
				limit := c.Resources.Limits.Memory()
				if limit.IsZero() {
					b.Fatalf("config/manager/deployment.yaml: %s is the memory limit, and the reconciler has none", e.Name)
				}
				env = append(env, e.Name+"="+strconv.FormatInt(limit.Value(), 10))
			}
		}
		return env
	}
	b.Fatal("config/manager/deployment.yaml: no reconciler container")
	return nil
}

// freeLoopbackAddr is a loopback address no one listens on now.
func freeLoopbackAddr(b *testing.B) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

package realnode_test

import (
	"bufio"
	"context"
	"io"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// sequentialCommands is how many commands each side of
// BenchmarkSessionCommand runs, one after another.
const sequentialCommands = 100

// BenchmarkSessionCommand compares one command's round trip (`true`, from
// the call to its exit status) through the kept session with the sandbox's
// agent against a plain exec (API server, kubelet, runtime: what every
// command cost before the agent), in the same sandbox, and reports the
// agent daemon's resident memory in the idle sandbox. The floors are
// starting `true` from inside the sandbox, with no protocol at all, and a
// line's round trip through a kept exec stream (the only way in).
func BenchmarkSessionCommand(b *testing.B) {
	for _, handler := range handlers {
		b.Run(handler, func(b *testing.B) {
			e := requireNode(b)
			sbx := e.sandboxes(b, e.template(b, e.nodePool(b, handler), nil))[0]
			ctx := context.Background()
			kube, err := kubernetes.NewForConfig(e.cluster.Config)
			if err != nil {
				b.Fatal(err)
			}
			plain := func() {
				req := kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(sbx.Status.Namespace).
					Name(environment.PodName).SubResource("exec").
					VersionedParams(&corev1.PodExecOptions{Container: environment.ContainerName, Command: []string{"true"}, Stdout: true, Stderr: true}, scheme.ParameterCodec)
				exec, err := remotecommand.NewWebSocketExecutor(e.cluster.Config, "GET", req.URL().String())
				if err == nil {
					err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard, Stderr: io.Discard})
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			viaSession := func() {
				code, err := e.sdk.Exec(ctx, sbx.Name, sandboxclient.ExecOptions{Command: []string{"true"}})
				if err != nil || code != 0 {
					b.Fatalf("true through the session: %d, %v", code, err)
				}
			}
			if _, err := e.sdk.Session(ctx, sbx.Name); err != nil {
				b.Fatal(err)
			}
			viaSession() // the session is open before the clock starts
			b.ResetTimer()
			var sessionRuns, plainRuns []time.Duration
			var sessionWall, plainWall time.Duration
			for range b.N {
				start := time.Now()
				for range sequentialCommands {
					t := time.Now()
					viaSession()
					sessionRuns = append(sessionRuns, time.Since(t))
				}
				sessionWall += time.Since(start)
				start = time.Now()
				for range sequentialCommands {
					t := time.Now()
					plain()
					plainRuns = append(plainRuns, time.Since(t))
				}
				plainWall += time.Since(start)
			}
			b.StopTimer()
			sessionP50, plainP50 := percentile(sessionRuns, 0.5), percentile(plainRuns, 0.5)
			b.ReportMetric(sessionP50, "session-p50-ms")
			b.ReportMetric(percentile(sessionRuns, 0.99), "session-p99-ms")
			b.ReportMetric(plainP50, "exec-p50-ms")
			b.ReportMetric(percentile(plainRuns, 0.99), "exec-p99-ms")
			b.ReportMetric(plainP50/sessionP50, "exec/session")
			floor := e.spawnFloorMs(b, sbx.Name)
			b.ReportMetric(floor, "spawn-floor-p50-ms")
			b.ReportMetric(sessionP50/floor, "session/floor")
			stream := streamFloorMs(b, e.cluster.Config, kube, sbx.Status.Namespace)
			b.ReportMetric(stream, "stream-floor-p50-ms")
			b.ReportMetric(sessionP50/(stream+floor), "session/(stream+spawn)")
			b.ReportMetric(float64(sessionWall.Milliseconds())/float64(b.N), "session-100-ms")
			b.ReportMetric(float64(plainWall.Milliseconds())/float64(b.N), "exec-100-ms")
			b.ReportMetric(e.agentRSSMiB(b, sbx.Name), "agent-MiB")
		})
	}
}

// spawnFloorMs is the p50 of starting `true` and waiting for it from a
// process already in the sandbox (Python's subprocess, which forks and
// execs as the agent does): what a command costs in this runtime before
// any protocol, the floor of a command through the session.
func (e env) spawnFloorMs(b testing.TB, name string) float64 {
	out := e.python(b, name, `
import subprocess, time
runs = []
for _ in range(`+strconv.Itoa(sequentialCommands)+`):
    start = time.perf_counter()
    subprocess.run(["true"])
    runs.append(time.perf_counter() - start)
runs.sort()
print(runs[len(runs) // 2] * 1000)
`)
	ms, err := strconv.ParseFloat(strings.TrimSpace(out), 64)
	if err != nil {
		b.Fatalf("the spawn floor: %q", out)
	}
	return ms
}

// streamFloorMs is the p50 round trip of one line through a kept exec
// stream to `cat` in the sandbox: what every message between a client and
// anything in the sandbox crosses when the sandbox is reached only through
// an exec stream (API server, kubelet, the runtime's stdio of the exec'd
// process), before any protocol or process start. With the spawn floor it
// is the floor of a command through the session.
func streamFloorMs(b testing.TB, cfg *rest.Config, kube kubernetes.Interface, namespace string) float64 {
	req := kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).
		Name(environment.PodName).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: environment.ContainerName, Command: []string{"cat"}, Stdin: true, Stdout: true}, scheme.ParameterCodec)
	exec, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
	if err != nil {
		b.Fatal(err)
	}
	stdin, toCat := io.Pipe()
	fromCat, stdout := io.Pipe()
	go func() {
		err := exec.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout})
		stdout.CloseWithError(err)
	}()
	// cat ends with its input, and the stream with it.
	defer func() { _ = toCat.Close(); _, _ = io.Copy(io.Discard, fromCat) }()
	lines := bufio.NewReader(fromCat)
	var runs []time.Duration
	for i := range sequentialCommands + 1 {
		start := time.Now()
		if _, err := toCat.Write([]byte("x\n")); err != nil {
			b.Fatal(err)
		}
		if _, err := lines.ReadString('\n'); err != nil {
			b.Fatalf("the line back from cat: %v", err)
		}
		if i > 0 { // the first waits for the stream to open
			runs = append(runs, time.Since(start))
		}
	}
	return percentile(runs, 0.5)
}

// agentRSSMiB is the resident memory of the agent's daemon in the sandbox,
// as its kernel (gVisor's under runsc) reports it.
func (e env) agentRSSMiB(b testing.TB, name string) float64 {
	out := e.python(b, name, `
import os
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            if open("/proc/%s/cmdline" % p).read().split("\0")[:2][-1] != "serve": continue
            for line in open("/proc/%s/status" % p):
                if line.startswith("VmRSS:"): print(line.split()[1])
        except (OSError, IndexError): pass
`)
	kib, err := strconv.ParseFloat(strings.TrimSpace(out), 64)
	if err != nil {
		b.Fatalf("the agent's VmRSS: %q", out)
	}
	return kib / 1024
}

func percentile(runs []time.Duration, p float64) float64 {
	sorted := append([]time.Duration(nil), runs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	if len(sorted) == 0 {
		return 0
	}
	return float64(sorted[int(p*float64(len(sorted)-1))].Microseconds()) / 1000
}

package realnode_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/portforward"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// checkStopStart writes a workspace file, stops the sandbox (its pod goes,
// the volume stays), starts it again on a new pod and reads the file back.
func (e env) checkStopStart(t *testing.T, sbx started) {
	ctx := context.Background()
	content := "written before stop by " + t.Name() + "\n"
	if err := e.sdk.WriteFile(ctx, sbx.Name, "notes.txt", strings.NewReader(content), int64(len(content)), sandboxclient.FileOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.sdk.Stop(ctx, sbx.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := e.sdk.WaitStopped(ctx, sbx.Name, waitReady, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.sdk.Start(ctx, sbx.Name); err != nil {
		t.Fatal(err)
	}
	again := e.waitReady(t, sbx.Name)
	if again.pod.UID == sbx.pod.UID {
		t.Fatalf("pod %s was not replaced by stop and start", sbx.pod.UID)
	}
	var got bytes.Buffer
	if _, err := e.sdk.ReadFile(ctx, sbx.Name, "notes.txt", &got, sandboxclient.FileOptions{}); err != nil {
		t.Fatal(err)
	}
	if got.String() != content {
		t.Errorf("after stop and start the workspace file holds %q, want %q", got.String(), content)
	}
}

// checkPortForward reaches the sandbox's server through the API server.
func (e env) checkPortForward(t *testing.T, sbx started) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ports := make(chan uint16, 1)
	done := make(chan error, 1)
	go func() {
		done <- e.sdk.PortForward(ctx, sbx.Name, sandboxclient.PortForwardOptions{
			Ports: []string{"0:8080"},
			Ready: func(p []portforward.ForwardedPort) { ports <- p[0].Local },
		})
	}()
	var local uint16
	select {
	case local = <-ports:
	case err := <-done:
		t.Fatalf("port-forward ended before it listened: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("port-forward did not listen within a minute")
	}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", local))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Directory listing") {
		t.Errorf("GET through port-forward: %s %q", resp.Status, body)
	}
}

// checkMemoryLimit proves the template's memory limit is the kernel's: a
// command that outgrows it is killed, and a sandbox whose own process
// outgrows it says so in its status.
func (e env) checkMemoryLimit(t *testing.T, pool *v1.NodePool) {
	limited := func(s *v1.SandboxTemplateSpec) {
		s.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("128Mi")
	}
	tpl := e.template(t, pool, limited)
	sbx := e.sandboxes(t, tpl)[0]
	_, code, _ := e.exec(t, sbx.Name, "python3", "-c", "b = bytearray(512 << 20); print(len(b))")
	if code != 137 {
		t.Errorf("a 512 MiB allocation under a 128 MiB limit exited %d, want 137 (SIGKILL by the OOM killer)", code)
	}

	hog := e.template(t, pool, func(s *v1.SandboxTemplateSpec) {
		limited(s)
		s.Command = []string{"python3", "-c", "import time; time.sleep(1); b = bytearray(512 << 20); time.sleep(3600)"}
	})
	name := testcluster.Name("real-hog")
	if err := e.c.Create(context.Background(), &v1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1.SandboxSpec{TemplateRef: &v1.LocalObjectReference{Name: hog.Name}, Owner: "alice@example.com"},
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.deleteAndWait(t, name) })
	got := &v1.Sandbox{}
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, waitReady, true, func(ctx context.Context) (bool, error) {
		if err := e.c.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
			return false, err
		}
		return strings.Contains(conditions.GetMessage(got, v1.ReadyCondition), "OOMKilled"), nil
	})
	if err != nil {
		t.Fatalf("the sandbox whose process outgrew its memory limit never said OOMKilled; Ready is %s %v: %s (%v)",
			conditions.GetReason(got, v1.ReadyCondition), conditions.IsTrue(got, v1.ReadyCondition), conditions.GetMessage(got, v1.ReadyCondition), err)
	}
	t.Logf("status of the sandbox killed for memory: %s", conditions.GetMessage(got, v1.ReadyCondition))
}

// checkWarmClaim claims a started gVisor sandbox from a warm pool and runs
// code in it at once, then runs a Python snippet with `agentsandbox run`.
func (e env) checkWarmClaim(t *testing.T, tpl *v1.SandboxTemplate) {
	ctx := context.Background()
	pool := e.warmPool(t, tpl.Name, 1)
	sbx, err := e.sdk.Claim(ctx, sandboxclient.ClaimOptions{Pool: pool.Name, Wait: waitReady})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.deleteAndWait(t, sbx.Name) })
	if sbx.Status.LaunchType != v1.LaunchWarm {
		t.Errorf("claim launched %s (%s), want warm", sbx.Status.LaunchType, sbx.Status.LaunchMessage)
	}
	if out := e.python(t, sbx.Name, "print(6 * 7)"); strings.TrimSpace(out) != "42" {
		t.Errorf("first exec in the claimed sandbox printed %q", out)
	}
	// The SDK's file operations under gVisor.
	content := "import sys\nprint(sys.argv[1])\n"
	if err := e.sdk.WriteFile(ctx, sbx.Name, "hello.py", strings.NewReader(content), int64(len(content)), sandboxclient.FileOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, _, _ := e.exec(t, sbx.Name, "python3", "/workspace/hello.py", "from a file"); out != "from a file\n" {
		t.Errorf("the written script printed %q", out)
	}
	var back bytes.Buffer
	if _, err := e.sdk.ReadFile(ctx, sbx.Name, "hello.py", &back, sandboxclient.FileOptions{}); err != nil || back.String() != content {
		t.Errorf("read back %q (%v), want what was written", back.String(), err)
	}

	cli := buildCLI(t)
	cmd := exec.Command(cli, "run", "--kubeconfig", e.cluster.Kubeconfig, "--pool", pool.Name, "--quiet", "--",
		"python3", "-c", "import subprocess, sys; print(subprocess.run(['dmesg'], capture_output=True, text=True).stdout.splitlines()[0]); sys.exit(3)")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("agentsandbox run: %v, want exit code 3; stderr: %s", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "gVisor") {
		t.Errorf("agentsandbox run printed %q, want the first line of gVisor's dmesg", stdout.String())
	}
}

// buildCLI builds the agentsandbox binary for the test.
func buildCLI(t *testing.T) string {
	t.Helper()
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "agentsandbox")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/agentsandbox")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/agentsandbox: %v: %s", err, out)
	}
	return bin
}

// checkNothingLeft deletes the sandbox and proves its containers, their
// processes, mounts and network namespace went with it, although other
// mount namespaces on the machine were made while it ran (as other
// software on a real machine makes them): one that receives the mounts
// propagated to it (made before the sandbox, by runtimeSuite) and a copy
// of the machine's mounts made while the pod runs. A pod's mount copied
// into either would keep its network namespace's file busy and the pod
// Terminating for good.
func (e env) checkNothingLeft(t *testing.T, sbx started, before int) {
	ctx := context.Background()
	ids := strings.Fields(e.ctr(t, "containers", "ls", "-q", fmt.Sprintf(`labels."io.kubernetes.pod.uid"==%s`, sbx.pod.UID)))
	if len(ids) < 2 {
		t.Fatalf("containerd has %d containers for pod %s, want its sandbox and the sandbox container", len(ids), sbx.pod.UID)
	}
	var netns []string
	for _, id := range ids {
		var info struct {
			Spec struct {
				Linux struct {
					Namespaces []struct{ Type, Path string } `json:"namespaces"`
				} `json:"linux"`
			} `json:"Spec"`
		}
		if err := json.Unmarshal([]byte(e.ctr(t, "containers", "info", id)), &info); err != nil {
			t.Fatal(err)
		}
		for _, ns := range info.Spec.Linux.Namespaces {
			if ns.Type == "network" && ns.Path != "" {
				netns = append(netns, ns.Path)
			}
		}
	}
	if len(netns) == 0 {
		t.Fatal("found no network namespace of the pod to watch")
	}
	namespaces := []int{os.Getpid(), nodeProcess(t, "containerd"), before, otherMountNamespace(t, "private")}
	e.deleteAndWait(t, sbx.Name)
	var left []string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		left = leftovers(e.ctr(t, "containers", "ls", "-q"), ids, netns, string(sbx.pod.UID), namespaces)
		return len(left) == 0, nil
	})
	if err != nil {
		t.Errorf("after deleting sandbox %s: %s", sbx.Name, strings.Join(left, "; "))
	}
}

// leftovers lists what of a deleted pod is still on this machine, the
// mounts as the processes in mountsOf see them.
func leftovers(containers string, ids, netns []string, podUID string, mountsOf []int) []string {
	var left []string
	for _, id := range ids {
		if strings.Contains(containers, id) {
			left = append(left, "container "+id)
		}
	}
	for _, path := range netns {
		if _, err := os.Stat(path); err == nil {
			left = append(left, "network namespace "+path)
		}
	}
	for _, pid := range mountsOf {
		mounts, _ := os.ReadFile(fmt.Sprintf("/proc/%d/mounts", pid))
		for _, line := range strings.Split(string(mounts), "\n") {
			if strings.Contains(line, podUID) || containsAny(line, ids) || containsAny(line, netns) {
				left = append(left, fmt.Sprintf("mount %s (seen by process %d)", strings.Fields(line)[1], pid))
			}
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		cmdline, _ := os.ReadFile(p)
		if containsAny(string(cmdline), ids) {
			left = append(left, "process "+filepath.Base(filepath.Dir(p))+" "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return left
}

// otherMountNamespace starts a process in a mount namespace of its own, as
// other software on the machine does, with the given propagation (unshare's
// --propagation: private copies the machine's mounts as they are now,
// unchanged also receives those propagated later), and returns its PID; it
// is stopped when the test ends.
func otherMountNamespace(t *testing.T, propagation string) int {
	t.Helper()
	cmd := exec.Command("unshare", "--mount", "--propagation", propagation, "sleep", "infinity")
	if err := cmd.Start(); err != nil {
		t.Fatalf("start a process in a mount namespace of its own: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd.Process.Pid
}

// nodeProcess is the PID of one of the node's processes (hack/node.sh's
// pid files).
func nodeProcess(t testing.TB, name string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(nodeDir(), "pids", name))
	if err != nil {
		t.Fatalf("the real node's %s: %v", name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("the real node's %s pid file holds %q", name, b)
	}
	return pid
}

// nodeDir is hack/node.sh's directory of the node.
func nodeDir() string {
	cache := os.Getenv("AGENTSANDBOX_CACHE")
	if cache == "" {
		base, _ := os.UserCacheDir()
		cache = filepath.Join(base, "agentsandbox")
	}
	return filepath.Join(cache, "node")
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// ctr runs containerd's client against the real node's containerd.
func (e env) ctr(t testing.TB, args ...string) string {
	t.Helper()
	bin, err := testcluster.ToolBin("containerd")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bin, "ctr"), append([]string{
		"--address", filepath.Join(nodeDir(), "run", "containerd.sock"), "--namespace", "k8s.io",
	}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ctr %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// checkEphemeralStorageLimit: code that writes past its sandbox's
// ephemeral-storage limit through the root file system gets the pod
// evicted by the kubelet rather than the node's disk filled, and the
// sandbox starts again on a new pod, its workspace kept. A template that
// sets no limit (as sbx's) gets DefaultEphemeralStorage; under runc
// nothing else bounds the root file system. It reserves none of the
// node's disk: the API server, which copies a limit into a request left
// out, stored its request as zero.
func (e env) checkEphemeralStorageLimit(t *testing.T, pool *v1.NodePool, sbx started) {
	resources := sbx.pod.Spec.Containers[0].Resources
	if got := resources.Limits[corev1.ResourceEphemeralStorage]; got.String() != v1.DefaultEphemeralStorage {
		t.Errorf("a sandbox whose template sets no ephemeral-storage limit has %q, want %s", got.String(), v1.DefaultEphemeralStorage)
	}
	if got, set := resources.Requests[corev1.ResourceEphemeralStorage]; !set || !got.IsZero() {
		t.Errorf("a sandbox whose template requests no ephemeral storage requests %q (set %v), want 0", got.String(), set)
	}
	tpl := e.template(t, pool, func(s *v1.SandboxTemplateSpec) {
		s.SecurityContext.ReadOnlyRootFilesystem = false
		s.Resources.Limits[corev1.ResourceEphemeralStorage] = resource.MustParse("128Mi")
	})
	filler := e.sandboxes(t, tpl)[0]
	e.python(t, filler.Name, "open('/workspace/kept', 'w').write('kept')")
	e.python(t, filler.Name, "f = open('/tmp/fill', 'wb')\nfor _ in range(256): f.write(b'x' * (1 << 20))\nf.close()")

	ctx := context.Background()
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, waitReady, true, func(ctx context.Context) (bool, error) {
		got := &v1.Sandbox{}
		if err := e.c.Get(ctx, client.ObjectKey{Name: filler.Name}, got); err != nil {
			return false, err
		}
		pod, err := e.sdk.Pod(ctx, filler.Name)
		if err != nil {
			return false, nil // between the evicted pod and its replacement
		}
		return pod.UID != filler.pod.UID && conditions.IsTrue(got, v1.ReadyCondition), nil
	})
	if err != nil {
		t.Fatalf("a sandbox that wrote 256 MiB under a 128Mi ephemeral-storage limit was not started again on a new pod: %v", err)
	}
	// Its owner can tell why it started again: the Failed phase's event
	// gives the kubelet's words.
	events := &corev1.EventList{}
	if err := e.c.List(ctx, events, client.InNamespace(metav1.NamespaceDefault)); err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, ev := range events.Items {
		if ev.InvolvedObject.Kind == v1.KindSandbox && ev.InvolvedObject.Name == filler.Name {
			seen = append(seen, ev.Reason+": "+ev.Message)
		}
	}
	if !slices.ContainsFunc(seen, func(s string) bool {
		return strings.HasPrefix(s, string(v1.SandboxPhaseFailed)+": ") && strings.Contains(s, "ephemeral local storage")
	}) {
		t.Errorf("no Failed event names the eviction for ephemeral storage; the sandbox's events: %q", seen)
	}
	if got := e.python(t, filler.Name, "print(open('/workspace/kept').read())"); strings.TrimSpace(got) != "kept" {
		t.Errorf("the workspace after the eviction holds %q, want the file written before", got)
	}
}

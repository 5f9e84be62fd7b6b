package realnode_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/latency"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/realnode"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// The real node's figures (make bench-node, -benchtime 20x): what a user
// waits for a sandbox to run code, cold and from a warm pool, under each
// runtime, and what an idle sandbox costs the node.

var handlers = []string{realnode.RuncHandler, realnode.GVisorHandler}

// BenchmarkColdStart times creating a sandbox from a template until its
// first command has run: the pod is scheduled, its volume bound, the
// runtime started and the image's python3 executed.
func BenchmarkColdStart(b *testing.B) {
	for _, handler := range handlers {
		b.Run(handler, func(b *testing.B) {
			e := requireNode(b)
			tpl := e.template(b, e.nodePool(b, handler), nil)
			latency.Run(b, 1, func() time.Duration {
				start := time.Now()
				sbx, err := e.sdk.Claim(context.Background(), sandboxclient.ClaimOptions{Template: tpl.Name, Wait: waitReady})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { e.deleteAndWait(b, sbx.Name) })
				e.python(b, sbx.Name, "pass")
				took := time.Since(start)
				// Deleted at once, so the next start finds the node as idle.
				_ = e.sdk.Delete(context.Background(), sbx.Name)
				return took
			})
		})
	}
}

// BenchmarkWarmClaimExec times claiming a started sandbox from a warm pool
// until its first command (`true`) has run, through the SDK as a client
// would: the session with the sandbox's agent opened on the way. Each
// claim waits, untimed, for the pool to have a Ready member again, so none
// is a cold start.
func BenchmarkWarmClaimExec(b *testing.B) {
	for _, handler := range handlers {
		b.Run(handler, func(b *testing.B) {
			e := requireNode(b)
			tpl := e.template(b, e.nodePool(b, handler), nil)
			pool := &v1.WarmPool{
				ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("bench-warm")},
				Spec:       v1.WarmPoolSpec{TemplateRef: v1.LocalObjectReference{Name: tpl.Name}, Replicas: ptr.To[int32](2)},
			}
			if err := e.c.Create(context.Background(), pool); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = e.c.Delete(context.Background(), pool) })
			latency.Run(b, 1, func() time.Duration {
				e.waitPoolReady(b, pool)
				start := time.Now()
				sbx, err := e.sdk.Claim(context.Background(), sandboxclient.ClaimOptions{Pool: pool.Name, Wait: waitReady})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { e.deleteAndWait(b, sbx.Name) })
				if _, code, stderr := e.exec(b, sbx.Name, "true"); code != 0 {
					b.Fatalf("true in %s: exit %d: %s", sbx.Name, code, stderr)
				}
				took := time.Since(start)
				if sbx.Status.LaunchType != v1.LaunchWarm {
					b.Fatalf("claim %s was not warm: %s", sbx.Name, sbx.Status.LaunchMessage)
				}
				_ = e.sdk.Delete(context.Background(), sbx.Name)
				return took
			})
		})
	}
}

// waitPoolReady waits until the pool has a member a claim takes warm: an
// available member namespace whose pod is Ready. The pool's status would
// lag behind the claim just made.
func (e env) waitPoolReady(b testing.TB, pool *v1.WarmPool) {
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, waitReady, true, func(ctx context.Context) (bool, error) {
		members := &corev1.NamespaceList{}
		if err := e.c.List(ctx, members, client.MatchingLabels{v1.LabelWarmPool: pool.Name, v1.LabelMember: v1.MemberAvailable}); err != nil {
			return false, err
		}
		for _, ns := range members.Items {
			pod := &corev1.Pod{}
			if err := e.c.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: environment.PodName}, pod); err == nil && environment.PodReady(pod) {
				// The reconciler decides from its cache, which sees the
				// pod Ready a moment after the API server does.
				time.Sleep(500 * time.Millisecond)
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		b.Fatalf("warm pool %s has no Ready member: %v", pool.Name, err)
	}
}

// idleSandboxes is how many sandboxes BenchmarkIdleMemory averages over.
const idleSandboxes = 5

// BenchmarkIdleMemory reports what an idle sandbox (the template's Python
// server, waiting) holds on the node: the resident memory its pod's cgroup
// charges (pod-MiB), and that of its containerd shim (shim-MiB), which
// lives outside the pod's cgroup. Under gVisor the pod's cgroup holds the
// sentry and the gofer too.
func BenchmarkIdleMemory(b *testing.B) {
	for _, handler := range handlers {
		b.Run(handler, func(b *testing.B) {
			e := requireNode(b)
			tpl := e.template(b, e.nodePool(b, handler), nil)
			templates := make([]*v1.SandboxTemplate, idleSandboxes)
			for i := range templates {
				templates[i] = tpl
			}
			var pod, shim float64
			for range b.N {
				running := e.sandboxes(b, templates...)
				time.Sleep(5 * time.Second) // let start-up allocations settle
				for _, sbx := range running {
					pod += podRSSMiB(b, string(sbx.pod.UID))
					shim += e.shimRSSMiB(b, sbx)
				}
			}
			n := float64(b.N * idleSandboxes)
			b.ReportMetric(pod/n, "pod-MiB")
			b.ReportMetric(shim/n, "shim-MiB")
		})
	}
}

// podRSSMiB reads the resident memory (total_rss of memory.stat, page cache
// excluded) of a pod's cgroup, wherever its QoS class puts it.
func podRSSMiB(b testing.TB, uid string) float64 {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/memory/kubepods/*pod" + uid)
	more, _ := filepath.Glob("/sys/fs/cgroup/memory/kubepods/*/pod" + uid)
	dirs = append(dirs, more...)
	if len(dirs) != 1 {
		b.Fatalf("found %d memory cgroups of pod %s, want 1 (cgroup v1, cgroupfs driver)", len(dirs), uid)
	}
	stat, err := os.ReadFile(filepath.Join(dirs[0], "memory.stat"))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(stat), "\n") {
		if v, ok := strings.CutPrefix(line, "total_rss "); ok {
			bytes, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatal(err)
			}
			return bytes / (1 << 20)
		}
	}
	b.Fatalf("no total_rss in %s/memory.stat", dirs[0])
	return 0
}

// shimRSSMiB finds the containerd shim serving the pod (its command line
// names the pod sandbox's container ID) and reads its resident memory.
func (e env) shimRSSMiB(b testing.TB, sbx started) float64 {
	ids := strings.Fields(e.ctr(b, "containers", "ls", "-q", fmt.Sprintf(`labels."io.kubernetes.pod.uid"==%s`, sbx.pod.UID)))
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		cmdline, _ := os.ReadFile(p)
		if !strings.Contains(string(cmdline), "containerd-shim") || !containsAny(string(cmdline), ids) {
			continue
		}
		status, err := os.ReadFile(filepath.Join(filepath.Dir(p), "status"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
				return kb / 1024
			}
		}
	}
	b.Fatalf("no containerd shim found for pod %s", sbx.pod.UID)
	return 0
}

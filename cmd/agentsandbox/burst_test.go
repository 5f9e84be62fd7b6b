package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// The burst: more claims than the pool holds, from many clients at once,
// so warm claims race each other, the pool refills underneath them and
// the rest start cold. make test runs it at 40 claims from 10 clients
// against a pool of 20, which has every race the larger one has (claims
// racing for one member, top-up under claims, cold starts once the pool
// is empty). Its time goes to the namespace controller creating and
// deleting namespaces, which scales with the size: at 80 against 40, beside
// another test package on two cores, the variant with SIGKILLs took from
// 1 to 5 minutes, the 80 sandboxes being Ready after 18 s. make bench runs it at
// full size (AGENTSANDBOX_BURST=full): 1,000 claims from 50 clients
// against 500, most of whose 17 minutes go the same way.
var burstPool, burstClaims, burstClients = burstSize(os.Getenv("AGENTSANDBOX_BURST"))

func burstSize(scale string) (pool, claims, clients int) {
	if scale == "full" {
		return 500, 1000, 50
	}
	return 20, 40, 10
}

// burstLabel marks the burst's sandboxes, so one list finds them all.
const burstLabel = "agentsandbox.test/burst"

// TestWarmClaimBurst claims twice the pool's size in sandboxes from many
// clients at once, against a pool run by the real reconciler binary.
func TestWarmClaimBurst(t *testing.T) {
	claimBurst(t, 0, 1)
}

// TestWarmClaimBurstWithTwoReconcilers is the same burst with two
// reconcilers acting at once (--leader-elect=false on two replicas, or two
// leaders for a moment at a lease handover): both claim for every sandbox,
// and still none may end up holding two members.
func TestWarmClaimBurstWithTwoReconcilers(t *testing.T) {
	claimBurst(t, 0, 2)
}

// TestWarmClaimBurstSurvivesSIGKILL is the same burst with the reconciler
// killed with SIGKILL and restarted at random moments while it runs.
func TestWarmClaimBurstSurvivesSIGKILL(t *testing.T) {
	claimBurst(t, 6, 1)
}

// claimBurst runs the burst against reconcilers (processes of the binary
// at once), killing the first kills times during it, and checks: no member handed to two sandboxes, no sandbox holding two
// namespaces, every sandbox Ready, warm and cold launches adding up, the
// pool back at full size, and, once every sandbox is deleted, none of their
// namespaces left.
func claimBurst(t *testing.T, kills, reconcilers int) {
	cluster := testcluster.Get(t)
	c := cluster.Client
	ctx := context.Background()
	tpl := &v1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("burst")}, Spec: v1.SandboxTemplateSpec{Image: "python:3.12"}}
	if err := c.Create(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	pool := &v1.WarmPool{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("burst")},
		Spec:       v1.WarmPoolSpec{TemplateRef: v1.LocalObjectReference{Name: tpl.Name}, Replicas: ptr.To(int32(burstPool))},
	}
	if err := c.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	run := pool.Name

	proc := startReconciler(t, cluster)
	for range reconcilers - 1 {
		startReconciler(t, cluster)
	}
	// Registered after the reconcilers, so it runs while they do: the
	// pool's finalizer deletes its members.
	t.Cleanup(func() {
		_ = c.Delete(ctx, pool)
		_ = c.Delete(ctx, tpl)
		// The pool's members go too, before the next test loads the
		// cluster.
		waitNamespacesGone(t, client.MatchingLabels{v1.LabelWarmPool: pool.Name}, func(*corev1.Namespace) bool { return true })
	})
	waitPoolReady(t, pool, int32(burstPool), 5*time.Minute)

	start := time.Now()
	var created sync.WaitGroup
	for range burstClients {
		created.Go(func() {
			for range burstClaims / burstClients {
				s := &v1.Sandbox{
					ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("burst"), Labels: map[string]string{burstLabel: run}},
					Spec:       v1.SandboxSpec{WarmPoolRef: &v1.LocalObjectReference{Name: pool.Name}, Owner: "alice@example.com"},
				}
				if err := c.Create(ctx, s); err != nil {
					t.Errorf("create sandbox: %v", err)
					return
				}
			}
		})
	}
	if kills > 0 {
		// Spread over the seconds the burst takes.
		proc.killAndRestart(kills, 3*time.Second)
	}
	created.Wait()
	t.Cleanup(func() { _ = c.DeleteAllOf(ctx, &v1.Sandbox{}, client.MatchingLabels{burstLabel: run}) })

	sandboxes := waitBurstReady(t, run)
	t.Logf("%d sandboxes Ready %s after the first create", len(sandboxes), time.Since(start).Round(time.Second))

	// A claimed member is relabelled for its sandbox after the sandbox is
	// Ready, and a namespace another reconciler placed the sandbox in
	// before the first status write landed is deleted on the sandbox's
	// next pass: the checks below look once every sandbox holds exactly
	// one namespace by its label, or a minute has passed.
	holders := map[string][]string{}
	_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		held := &corev1.NamespaceList{}
		if err := c.List(ctx, held, client.HasLabels{v1.LabelSandbox}); err != nil {
			return false, nil
		}
		holders = map[string][]string{}
		for _, ns := range held.Items {
			if ns.DeletionTimestamp == nil {
				holders[ns.Labels[v1.LabelSandbox]] = append(holders[ns.Labels[v1.LabelSandbox]], ns.Name)
			}
		}
		for _, s := range sandboxes {
			if len(holders[s.Name]) != 1 {
				return false, nil
			}
		}
		return true, nil
	})
	holder := map[string]string{}
	launches := map[v1.LaunchType]int{}
	for _, s := range sandboxes {
		if other, dup := holder[s.Status.Namespace]; dup {
			t.Errorf("namespace %s handed to %s and %s", s.Status.Namespace, other, s.Name)
		}
		holder[s.Status.Namespace] = s.Name
		if got := holders[s.Name]; len(got) != 1 || got[0] != s.Status.Namespace {
			t.Errorf("sandbox %s (status: %s) holds namespaces %v, want exactly its own", s.Name, s.Status.Namespace, got)
		}
		launches[s.Status.LaunchType]++
		if member := strings.HasPrefix(s.Status.Namespace, "sandbox-wp-"); member != (s.Status.LaunchType == v1.LaunchWarm) {
			t.Errorf("sandbox %s launched %s into namespace %s", s.Name, s.Status.LaunchType, s.Status.Namespace)
		}
	}
	// Each reconciler may claim a member for the same sandbox before one
	// of them writes its status; all but one of those members are deleted.
	if warm := burstPool / reconcilers; launches[v1.LaunchWarm]+launches[v1.LaunchCold] != burstClaims || launches[v1.LaunchWarm] < warm {
		t.Errorf("launches %v: want warm + cold = %d with at least %d warm (the pool's %d, shared by %d reconcilers)", launches, burstClaims, warm, burstPool, reconcilers)
	}
	t.Logf("launches: %v", launches)

	waitPoolReady(t, pool, int32(burstPool), 5*time.Minute)

	if err := c.DeleteAllOf(ctx, &v1.Sandbox{}, client.MatchingLabels{burstLabel: run}); err != nil {
		t.Fatal(err)
	}
	waitNamespacesGone(t, client.HasLabels{v1.LabelSandbox}, func(ns *corev1.Namespace) bool { return holders[ns.Labels[v1.LabelSandbox]] != nil })
}

// waitPoolReady waits until the pool has size Ready members.
func waitPoolReady(t *testing.T, pool *v1.WarmPool, size int32, timeout time.Duration) {
	t.Helper()
	c := testcluster.Get(t).Client
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(pool), pool)
		return err == nil && pool.Status.ReadyReplicas == size && pool.Status.Replicas == size, nil
	})
	if err != nil {
		t.Fatalf("WarmPool %s not at %d Ready members after %s: %d Ready, %d members", pool.Name, size, timeout, pool.Status.ReadyReplicas, pool.Status.Replicas)
	}
}

// waitBurstReady waits until every sandbox of the burst is Ready and
// returns them; those that never are fail the test with their Ready
// condition's message.
func waitBurstReady(t *testing.T, run string) []v1.Sandbox {
	t.Helper()
	c := testcluster.Get(t).Client
	list := &v1.SandboxList{}
	var notReady []string
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.List(ctx, list, client.MatchingLabels{burstLabel: run}); err != nil {
			return false, nil
		}
		notReady = notReady[:0]
		for _, s := range list.Items {
			if !conditions.IsTrue(&s, v1.ReadyCondition) || s.Status.Namespace == "" {
				notReady = append(notReady, fmt.Sprintf("%s: %s", s.Name, conditions.GetMessage(&s, v1.ReadyCondition)))
			}
		}
		return len(list.Items) == burstClaims && len(notReady) == 0, nil
	})
	if err != nil {
		t.Fatalf("%d sandboxes of %d, %d not Ready, e.g. %v", len(list.Items), burstClaims, len(notReady), notReady[:min(5, len(notReady))])
	}
	return list.Items
}

// waitNamespacesGone waits until no namespace that opts lists and match
// accepts is left, terminating ones included: the garbage collector has
// deleted them and the namespace controller has emptied them.
func waitNamespacesGone(t *testing.T, opts client.ListOption, match func(*corev1.Namespace) bool) {
	t.Helper()
	c := testcluster.Get(t).Client
	left := 0
	err := wait.PollUntilContextTimeout(context.Background(), 2*time.Second, 15*time.Minute, true, func(ctx context.Context) (bool, error) {
		list := &corev1.NamespaceList{}
		if err := c.List(ctx, list, opts); err != nil {
			return false, nil
		}
		left = 0
		for i := range list.Items {
			if match(&list.Items[i]) {
				left++
			}
		}
		return left == 0, nil
	})
	if err != nil {
		t.Errorf("%d namespaces left 15 minutes after their sandboxes or pool were deleted", left)
	}
}

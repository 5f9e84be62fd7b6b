package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/gittest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// TestReconcilerRidesOutAnAPIOutage runs the real binary, leader-elected
// with short lease timings, and stops etcd and the API server for 20 s and
// then for 120 s, each in the middle of warm claims and of a GitSync's
// apply. The same process must lead again once the API is back (it loses
// the lease during the outage), never exit, serve /healthz throughout and a
// failing /readyz while it waits, serve every claim, and sync the revision
// exactly. Every line it logs meanwhile is JSON.
func TestReconcilerRidesOutAnAPIOutage(t *testing.T) {
	cluster := testcluster.Get(t)
	c := cluster.Client
	ctx := context.Background()
	tpl := &v1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("outage")},
		Spec:       v1.SandboxTemplateSpec{Image: "python:3.12"},
	}
	if err := c.Create(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(ctx, tpl) })
	pool := &v1.WarmPool{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("outage")},
		Spec:       v1.WarmPoolSpec{TemplateRef: v1.LocalObjectReference{Name: tpl.Name}, Replicas: ptr.To[int32](4)},
	}
	if err := c.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}

	health := testcluster.FreeAddr(t)
	proc := startReconcilerWith(t, cluster, "--zap-encoder=json", "--leader-election-namespace", v1.SystemNamespace, "--metrics-addr=0",
		"--health-addr", health, "--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=1s")
	deleteWhileReconciled(t, c, pool)
	waitPoolFull(t, c, pool)

	for _, outage := range []time.Duration{20 * time.Second, 120 * time.Second} {
		t.Run(fmt.Sprintf("%s outage", outage), func(t *testing.T) {
			holder := leaseHolder(t, c)
			// A first sync of many templates, under way when the API
			// server goes.
			run := testcluster.Name("outage")
			label := client.MatchingLabels{testcluster.RunLabel: run}
			declared := testcluster.TemplateFiles(map[string]string{}, "templates", outageTemplates, run)
			srv := gittest.New(t, "", "")
			srv.Commit("main", declared)
			t.Cleanup(func() { _ = c.DeleteAllOf(ctx, &v1.SandboxTemplate{}, label) })
			gs := newGitSync(t, srv.URL())
			waitSyncUnderway(t, c, label)
			sandboxes := createSandboxes(t, c, 3, v1.SandboxSpec{WarmPoolRef: &v1.LocalObjectReference{Name: pool.Name}, Owner: "alice@example.com"})
			seen := &healthSeen{}
			stopProbing := probeHealth(health, seen)
			cluster.Outage(t, outage)
			back := time.Now()
			stopProbing()
			if !alive(proc.proc.Process.Pid) {
				t.Fatal("the reconciler exited during the outage")
			}
			if !strings.Contains(seen.waiting, "waiting for the API server at") {
				t.Errorf("/readyz did not fail saying it waits for the API server while it was away (last 503: %q)", seen.waiting)
			}
			// A liveness probe fails a pod after three misses, 10 s apart.
			if seen.gap > 10 {
				t.Errorf("/healthz went unanswered for %d probes in a row (200 ms apart) during the outage", seen.gap)
			}
			leads := waitLeading(t, c, holder, back)
			t.Logf("the same reconciler led again %s after the API server was back", leads.Round(100*time.Millisecond))
			more := createSandboxes(t, c, 3, v1.SandboxSpec{WarmPoolRef: &v1.LocalObjectReference{Name: pool.Name}, Owner: "alice@example.com"})
			for _, s := range append(sandboxes, more...) {
				waitReady(t, c, s)
			}
			waitPoolFull(t, c, pool)
			if out, code := runCLI(t, "sync", "--gitsync", gs.Name, "--timeout", "3m"); code != 0 {
				t.Fatalf("sync after the outage: exit %d, output:\n%s", code, out)
			}
			list := &v1.SandboxTemplateList{}
			if err := c.List(ctx, list, label); err != nil {
				t.Fatal(err)
			}
			if len(list.Items) != outageTemplates {
				t.Errorf("%d templates of the revision on the cluster after the outage, want %d", len(list.Items), outageTemplates)
			}
			waitReadyz(t, health)
			if !alive(proc.proc.Process.Pid) {
				t.Fatal("the reconciler exited after the outage")
			}
		})
	}
	if lines := proc.notJSON(); len(lines) > 0 {
		t.Errorf("%d lines of the reconciler's output through the outages are not JSON, the first:\n%s", len(lines), strings.Join(lines[:min(5, len(lines))], ""))
	}
}

// outageTemplates is how many templates the sync under way during an
// outage applies: enough for it to be in the middle when the API goes.
const outageTemplates = 300

// healthSeen is what a reconciler's health endpoints answered while it
// was watched.
type healthSeen struct {
	mu sync.Mutex
	// waiting is /readyz's body when it failed with 503.
	waiting string
	// gap is the longest run of /healthz requests that got no answer.
	gap, misses int
}

// probeHealth asks /healthz and /readyz at addr every 200 ms until stopped.
func probeHealth(addr string, seen *healthSeen) (stop func()) {
	done, stopped := make(chan struct{}), make(chan struct{})
	hc := &http.Client{Timeout: time.Second}
	get := func(path string) (int, string) {
		resp, err := hc.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode, strings.TrimSpace(string(body))
	}
	go func() {
		defer close(stopped)
		for {
			healthz, _ := get("/healthz")
			readyz, body := get("/readyz")
			seen.mu.Lock()
			if healthz == http.StatusOK {
				seen.misses = 0
			} else if seen.misses++; seen.misses > seen.gap {
				seen.gap = seen.misses
			}
			if readyz == http.StatusServiceUnavailable {
				seen.waiting = body
			}
			seen.mu.Unlock()
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return func() { close(done); <-stopped }
}

// waitReadyz waits until the reconciler at addr answers /readyz 200.
func waitReadyz(t *testing.T, addr string) {
	t.Helper()
	hc := &http.Client{Timeout: time.Second}
	testcluster.Eventually(t, "/readyz 200", func() (bool, string) {
		resp, err := hc.Get("http://" + addr + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Sprintf("%d %s", resp.StatusCode, body)
	})
}

// alive tells whether the process runs (and is not a zombie).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// leaseHolder is who holds the reconciler's Lease now.
func leaseHolder(t *testing.T, c client.Client) string {
	t.Helper()
	lease := &coordinationv1.Lease{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: v1.SystemNamespace, Name: v1.ReconcilerLease}, lease); err != nil {
		t.Fatal(err)
	}
	return ptr.Deref(lease.Spec.HolderIdentity, "")
}

// waitLeading waits until holder renewed the reconciler's Lease after
// since, and returns how long after since that was.
func waitLeading(t *testing.T, c client.Client, holder string, since time.Time) time.Duration {
	t.Helper()
	lease := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: v1.SystemNamespace, Name: v1.ReconcilerLease}
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, key, lease); err != nil {
			return false, nil
		}
		renewed := lease.Spec.RenewTime
		return ptr.Deref(lease.Spec.HolderIdentity, "") == holder && renewed != nil && renewed.After(since), nil
	})
	if err != nil {
		t.Fatalf("%s did not lead again within a minute of the API server's return: lease %+v", holder, lease.Spec)
	}
	return max(0, lease.Spec.RenewTime.Sub(since))
}

// waitPoolFull waits until every member of the pool is Ready, and checks
// that as many members are available as the pool wants: none lost or
// claimed twice through the outage.
func waitPoolFull(t *testing.T, c client.Client, pool *v1.WarmPool) {
	t.Helper()
	waitPoolReady(t, pool, ptr.Deref(pool.Spec.Replicas, 1), 2*time.Minute)
	members := &corev1.NamespaceList{}
	if err := c.List(context.Background(), members, client.MatchingLabels{v1.LabelWarmPool: pool.Name, v1.LabelMember: v1.MemberAvailable}); err != nil {
		t.Fatal(err)
	}
	if n := len(members.Items); n != int(pool.DesiredReplicas()) {
		t.Errorf("warm pool %s holds %d available members, want %d", pool.Name, n, pool.DesiredReplicas())
	}
}

// TestReconcilerExitsWithoutItsCRDs: an API server that answers but does
// not serve a CRD of config/crd is not an outage to wait out: after
// crdGrace the reconciler exits, naming the CRD and what to install, with
// /readyz failing meanwhile. It does not run in parallel: the package's
// other tests would lose the kind (and every GitSync) too.
func TestReconcilerExitsWithoutItsCRDs(t *testing.T) {
	cluster := testcluster.Get(t)
	ctx := context.Background()
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "gitsyncs.agentsandbox.dev"}}
	if err := cluster.Client.Delete(ctx, crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := testcluster.InstallCRDs(context.Background(), cluster.Client); err != nil {
			t.Errorf("reinstall the CRDs: %v", err)
		}
		testcluster.Eventually(t, "the GitSync kind served again", func() (bool, string) {
			err := cluster.Client.List(context.Background(), &v1.GitSyncList{})
			return err == nil, fmt.Sprint(err)
		})
	})
	testcluster.Eventually(t, "the GitSync kind no longer served", func() (bool, string) {
		err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(crd), crd)
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})

	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	health := testcluster.FreeAddr(t)
	cmd := exec.Command(bin, "reconcile", "--kubeconfig", cluster.Kubeconfig, "--leader-elect=false", "--metrics-addr=0", "--health-addr", health)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	seen := &healthSeen{}
	stopProbing := probeHealth(health, seen)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("the reconciler still runs 2 minutes without the GitSync CRD:\n%s", out.String())
	}
	stopProbing()
	t.Logf("exited after %s: %v", time.Since(start).Round(time.Second), err)
	if err == nil {
		t.Errorf("the reconciler exited 0 without its CRDs")
	}
	if msg := out.String(); !strings.Contains(msg, "does not serve gitsyncs.agentsandbox.dev") || !strings.Contains(msg, "install the CRDs") {
		t.Errorf("the reconciler's last words do not name the CRD and what to install:\n%s", msg[max(0, len(msg)-2000):])
	}
	if !strings.Contains(seen.waiting, "to serve gitsyncs.agentsandbox.dev") {
		t.Errorf("/readyz did not fail saying what it waited for (last 503: %q)", seen.waiting)
	}
}

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// TestStandbyIsNotReadyWhileItsLeaseRequestsFail runs the real binary as
// a standby: another replica holds its Lease for an hour, in a namespace
// of the test's own, so it never leads. It reaches the API server through
// a proxy that the test cuts. A standby leads nothing, so nothing of it
// stops when the API server goes away; /readyz must still answer 503 once
// its lease requests have failed for the renew deadline, saying so,
// /healthz ok throughout, and /readyz ok again once requests pass.
func TestStandbyIsNotReadyWhileItsLeaseRequestsFail(t *testing.T) {
	cluster := testcluster.Get(t)
	c := cluster.Client
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("standby")}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(ctx, ns) })
	now := metav1.NowMicro()
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: v1.ReconcilerLease},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("another-replica"), LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime: &now, RenewTime: &now},
	}
	if err := c.Create(ctx, lease); err != nil {
		t.Fatal(err)
	}

	proxy := startAPIProxy(t, cluster)
	health := testcluster.FreeAddr(t)
	startReconcilerOn(t, proxy.kubeconfig, "--leader-election-namespace", ns.Name, "--metrics-addr=0", "--health-addr", health,
		"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=1s")
	waitReadyz(t, health)

	readyzFailsWhileCut(t, proxy, health, "the leader election's requests have failed for")
	if err := c.Get(ctx, client.ObjectKeyFromObject(lease), lease); err != nil {
		t.Fatal(err)
	}
	if holder := ptr.Deref(lease.Spec.HolderIdentity, ""); holder != "another-replica" {
		t.Errorf("the lease is held by %q: the standby took it over", holder)
	}
}

// TestUnelectedReconcilerIsNotReadyWhileCutOff runs the real binary
// with --leader-elect=false, through the proxy the test cuts: there is no
// lease to hear from, so /readyz hears every request the reconciler sends.
// At rest those are its informers' watches; the cut breaks them, and their
// lists, retried, fail. /readyz answers 503 once they have failed for the
// renew deadline (3 s here), saying so, and ok again once they pass.
func TestUnelectedReconcilerIsNotReadyWhileCutOff(t *testing.T) {
	cluster := testcluster.Get(t)
	ctx := context.Background()
	proxy := startAPIProxy(t, cluster)
	health := testcluster.FreeAddr(t)
	startReconcilerOn(t, proxy.kubeconfig, "--leader-elect=false", "--leader-elect-renew-deadline=3s", "--metrics-addr=0", "--health-addr", health)
	waitReadyz(t, health)
	// The controllers run, their watches started with them: a template
	// is found valid. (Cut before, an informer still syncing would fail
	// /readyz for the caches instead.)
	tpl := &v1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("unelected")}, Spec: v1.SandboxTemplateSpec{Image: "python:3.12"}}
	if err := cluster.Client.Create(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), tpl) })
	testcluster.Eventually(t, "the template found valid", func() (bool, string) {
		err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(tpl), tpl)
		return err == nil && conditions.IsTrue(tpl, v1.ReadyCondition), fmt.Sprint(err, tpl.Status.Conditions)
	})
	readyzFailsWhileCut(t, proxy, health, "the reconciler's requests have failed for")
}

// readyzFailsWhileCut cuts the reconciler serving health off the API
// server and wants its /readyz to fail saying want and naming the API
// server, /healthz answered throughout, and /readyz ok again once the
// proxy passes requests.
func readyzFailsWhileCut(t *testing.T, proxy *apiProxy, health, want string) {
	t.Helper()
	proxy.setCut(true)
	cut := time.Now()
	seen := &healthSeen{}
	stopProbing := probeHealth(health, seen)
	testcluster.Eventually(t, "/readyz failing", func() (bool, string) {
		seen.mu.Lock()
		defer seen.mu.Unlock()
		return strings.Contains(seen.waiting, want), seen.waiting
	})
	t.Logf("/readyz failed %s after the cut: %s", time.Since(cut).Round(100*time.Millisecond), seen.waiting)
	if !strings.HasPrefix(seen.waiting, "waiting for the API server at https://"+proxy.ln.Addr().String()+": ") {
		t.Errorf("/readyz = %q, want it to name the API server", seen.waiting)
	}
	proxy.setCut(false)
	back := time.Now()
	waitReadyz(t, health)
	t.Logf("/readyz ok %s after the proxy passed requests again", time.Since(back).Round(100*time.Millisecond))
	stopProbing()
	if seen.gap > 0 {
		t.Errorf("/healthz went unanswered %d times in a row while the API server was cut off", seen.gap)
	}
}

// apiProxy passes TCP connections on to the API server, unless cut: then
// it closes every connection it passes and each new one.
type apiProxy struct {
	ln     net.Listener
	target string
	// kubeconfig is the cluster's, with the proxy as its server.
	kubeconfig string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]bool
}

func startAPIProxy(t *testing.T, cluster *testcluster.Cluster) *apiProxy {
	t.Helper()
	server, err := url.Parse(cluster.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conf, err := clientcmd.LoadFromFile(cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	// The API server's certificate names 127.0.0.1, whatever the port.
	for _, c := range conf.Clusters {
		c.Server = "https://" + ln.Addr().String()
	}
	p := &apiProxy{ln: ln, target: server.Host, kubeconfig: filepath.Join(t.TempDir(), "kubeconfig"), conns: map[net.Conn]bool{}}
	if err := clientcmd.WriteToFile(*conf, p.kubeconfig); err != nil {
		t.Fatal(err)
	}
	go p.serve()
	t.Cleanup(func() { _ = ln.Close(); p.setCut(true) })
	return p
}

func (p *apiProxy) serve() {
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			up, err := net.Dial("tcp", p.target)
			if err != nil || !p.track(down, up) {
				_ = down.Close()
				if up != nil {
					_ = up.Close()
				}
				return
			}
			go func() { _, _ = io.Copy(up, down); _ = up.Close() }()
			_, _ = io.Copy(down, up)
			_ = down.Close()
			p.untrack(down, up)
		}()
	}
}

// track records the two ends of a connection to close on a cut, or says
// no while cut.
func (p *apiProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	for _, c := range conns {
		p.conns[c] = true
	}
	return true
}

func (p *apiProxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.conns, c)
	}
}

// setCut cuts the API server off, or lets requests through again.
func (p *apiProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			_ = c.Close()
		}
		clear(p.conns)
	}
}

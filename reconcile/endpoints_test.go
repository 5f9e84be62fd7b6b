package reconcile

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// TestEndpointsAnswerForEveryState serves the reconciler's endpoints as
// Run does and walks /readyz through what Run goes through, with a real
// manager's informer caches against the real API server: waiting for the
// API server, a manager whose caches have not synced, one that runs,
// failing lease requests, and the wait between two managers. /healthz
// answers throughout, metrics and profiles are served on their own
// addresses, and a taken address is refused, naming its flag.
func TestEndpointsAnswerForEveryState(t *testing.T) {
	cluster := testcluster.Get(t)
	health, metrics, profiles := testcluster.FreeAddr(t), testcluster.FreeAddr(t), testcluster.FreeAddr(t)
	leases := &contact{of: "the leader election's requests"}
	ready := newReadiness(cluster.Config.Host, leases, time.Second)
	served, err := serveEndpoints(Endpoints{Health: health, Metrics: metrics, Pprof: profiles}, ready)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(served.close)

	readyz := func(wantCode int, wantBody string) string {
		t.Helper()
		if code, body := get(health, "/healthz"); code != http.StatusOK || body != "ok" {
			t.Errorf("/healthz = %d %q, want 200 ok", code, body)
		}
		var body string
		testcluster.Eventually(t, fmt.Sprintf("/readyz %d %q", wantCode, wantBody), func() (bool, string) {
			var code int
			code, body = get(health, "/readyz")
			return code == wantCode && strings.Contains(body, wantBody), fmt.Sprintf("%d %q", code, body)
		})
		return body
	}
	readyz(http.StatusServiceUnavailable, "waiting for the API server at "+cluster.Config.Host)

	mgr, err := NewManager(cluster.Config, ManagerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready.running(mgr.GetCache())
	readyz(http.StatusServiceUnavailable, "waiting for the API server at "+cluster.Config.Host+" to fill the informer caches")
	startManager(t, mgr)
	readyz(http.StatusOK, "ok")

	leases.record(&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")})
	readyz(http.StatusOK, "ok") // not yet for a second
	time.Sleep(1100 * time.Millisecond)
	if body := readyz(http.StatusServiceUnavailable, "the leader election's requests have failed for"); !strings.HasSuffix(body, "dial tcp: connect: connection refused") {
		t.Errorf("/readyz = %q, want the last error of the lease requests", body)
	}
	leases.record(nil)
	readyz(http.StatusOK, "ok")

	ready.waitFor("the controllers of the last manager to stop")
	readyz(http.StatusServiceUnavailable, "waiting for the controllers of the last manager to stop")

	if code, body := get(metrics, "/metrics"); code != http.StatusOK || !strings.Contains(body, "rest_client_requests_total") {
		t.Errorf("/metrics = %d without client-go's request counts", code)
	}
	if code, _ := get(profiles, "/debug/pprof/"); code != http.StatusOK {
		t.Errorf("/debug/pprof/ = %d on --pprof-addr", code)
	}
	if code, _ := get(health, "/debug/pprof/"); code != http.StatusNotFound {
		t.Errorf("/debug/pprof/ = %d on --health-addr, want 404: the heap is shown only where asked", code)
	}
	if _, err := serveEndpoints(Endpoints{Metrics: testcluster.FreeAddr(t), Health: health}, ready); err == nil || !strings.Contains(err.Error(), "--health-addr "+health) {
		t.Errorf("a taken --health-addr: %v, want an error naming it", err)
	}
}

package reconcile

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// TestManagerLeadsAndReleases runs the manager against the real API
// server: it must hold the leader Lease while running and release it on
// shutdown.
func TestManagerLeadsAndReleases(t *testing.T) {
	cluster := testcluster.Get(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("leader")}}
	if err := cluster.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Client.Delete(ctx, ns) })

	mgr, err := NewManager(cluster.Config, ManagerOptions{
		LeaderElection: true, LeaderElectionNamespace: ns.Name,
		GracefulShutdownTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(runCtx) }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			stop()
			if err := <-done; err != nil {
				t.Logf("manager stopped: %v", err)
			}
		}
	})

	lease := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: ns.Name, Name: LeaderElectionID}
	waitFor(t, "leader lease held", func() bool {
		return cluster.Client.Get(ctx, key, lease) == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != ""
	})
	// The Lease can be written before the elector has read the answer: one
	// stopped in that moment never learns it leads and has nothing to
	// release (client-go's acquire). Releasing is asked of a leader that
	// knows it leads.
	select {
	case <-mgr.Elected():
	case <-time.After(30 * time.Second):
		t.Fatal("the manager never learned that it leads")
	}

	stop()
	stopped = true
	if err := <-done; err != nil {
		t.Fatalf("manager stopped with an error: %v", err)
	}
	if err := cluster.Client.Get(ctx, key, lease); err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "" {
		t.Errorf("lease still held by %q after shutdown: a new replica would wait for it to expire", *lease.Spec.HolderIdentity)
	}
}

// startManager starts mgr until the test ends, when it must stop without
// an error.
func startManager(t *testing.T, mgr ctrl.Manager) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("manager stopped: %v", err)
		}
	})
}

// get is the status and body of GET path at addr; 0 and the error when
// nothing answered.
func get(addr, path string) (int, string) {
	resp, err := http.Get(fmt.Sprintf("http://%s%s", addr, path))
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(body))
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

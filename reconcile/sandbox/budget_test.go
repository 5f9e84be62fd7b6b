package sandbox_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/reconciletest"
)

// claimPathWrites guards the writes a warm claim makes before its sandbox
// is Ready, the client's create included: create, the owner's binding
// (the claim) and the status. claimWrites adds what follows Ready: the
// member's relabel, once claims pause.
const (
	claimPathWrites = 3
	claimWrites     = 4
)

// TestWarmClaimWrites counts the API writes one warm claim costs: the
// client's create plus every controller write about the sandbox or its
// claimed namespace after the create (the member's own creation and the
// pool's refill are the pool's, and not counted), and those sent before
// the status write that made it Ready. Nor does a claim read past the
// cache: not on its way to Ready, and not in the pass its own status
// write brings, which runs as the client is told it is Ready.
func TestWarmClaimWrites(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	tpl := newTemplate(t, c, nil)
	pool := newPool(t, c, tpl, 1, nil)
	waitPoolReady(t, c, pool, 1)

	since, readsSince := reconciletest.WriteCount(), reconciletest.ReadCount()
	sbx := newSandbox(t, c, tpl, claimFrom(pool))
	got := waitCondition(t, c, sbx, metav1.ConditionTrue, v1.ReasonPodReady)
	if got.Status.LaunchType != "Warm" {
		t.Fatalf("the claim on a full pool cold-started (%s)", got.Status.LaunchMessage)
	}
	waitRelabelled(t, c, got)
	time.Sleep(time.Second) // let trailing writes, if any, happen
	ns := got.Status.Namespace
	mine := reconciletest.Writes(since, func(w reconciletest.Write) bool {
		return strings.Contains(w.Path, "/sandboxes/"+sbx.Name) || strings.Contains(w.Path, "/namespaces/"+ns)
	})
	events := &corev1.EventList{}
	if err := c.List(context.Background(), events, client.InNamespace(metav1.NamespaceDefault)); err != nil {
		t.Fatal(err)
	}
	eventWrites := 0
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "Sandbox" && e.InvolvedObject.Name == sbx.Name {
			eventWrites += int(max(e.Count, 1))
		}
	}
	total := 1 + len(mine) + eventWrites
	t.Logf("warm claim writes: 1 create + %d controller requests %v + %d events = %d", len(mine), mine, eventWrites, total)
	reads := reconciletest.Reads(readsSince, func(path string) bool {
		return strings.Contains(path, "/sandboxes/"+sbx.Name) || strings.Contains(path, "/namespaces/"+ns)
	})
	if len(reads) > 0 {
		t.Errorf("a warm claim read past the cache: %v", reads)
	}
	if total > claimWrites {
		t.Errorf("a warm claim cost %d API writes, more than %d", total, claimWrites)
	}
	toReady := 1
	for _, w := range mine {
		toReady++
		if strings.HasSuffix(w.Path, "/sandboxes/"+sbx.Name+"/status") {
			break
		}
	}
	if toReady > claimPathWrites {
		t.Errorf("the sandbox was Ready after %d serial writes, more than %d: %v", toReady, claimPathWrites, mine)
	}
	if want := "/namespaces/" + ns + "/rolebindings"; len(mine) == 0 || mine[0].Method != "POST" || !strings.HasSuffix(mine[0].Path, want) {
		t.Errorf("the claim's first write is %v, want the create of the owner's binding (POST …%s)", mine, want)
	}
}

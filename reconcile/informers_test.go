package reconcile

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// TestReadyOnlyOnceEveryInformerIsFilled runs every controller as Run
// does, against the real API server, and has them make a sandbox Ready:
// no informer may start filling after /readyz said ok. One that did (a
// controller's watch registered as it started, or a kind first read from
// the cache by a pass) would have been listed while the reconciler called
// itself ready, and the pass that asked for it would have waited for every
// object of its kind. Every collection they read must be of a kind
// CacheOptions names, which SetupControllers registers before the start.
func TestReadyOnlyOnceEveryInformerIsFilled(t *testing.T) {
	cluster := testcluster.Get(t)
	ctx := context.Background()
	cfg := testcluster.AsServiceAccount(cluster.Config, v1.SystemNamespace, "agentsandbox-reconciler")
	lists := &collectionReads{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return collectionReadsTransport{next: rt, reads: lists} })
	mgr, err := NewManager(cfg, ManagerOptions{GracefulShutdownTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := SetupControllers(mgr, Options{}); err != nil {
		t.Fatal(err)
	}
	ready := newReadiness(cfg.Host, nil, 0)
	ready.running(mgr.GetCache())
	startManager(t, mgr)
	testcluster.Eventually(t, "/readyz ok", func() (bool, string) {
		waiting := ready.check(ctx)
		return waiting == "", waiting
	})
	beforeReady := lists.resources()

	tpl := &v1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("informers")},
		Spec:       v1.SandboxTemplateSpec{Image: "ghcr.io/acme/python-sandbox:3.12", Command: []string{"sleep", "infinity"}},
	}
	sbx := &v1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("informers")},
		Spec:       v1.SandboxSpec{TemplateRef: &v1.LocalObjectReference{Name: tpl.Name}, Owner: "alice@example.com"},
	}
	for _, obj := range []client.Object{tpl, sbx} {
		if err := cluster.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	// Before the manager stops (cleanups run last first): only its
	// controllers finish the sandbox's deletion, and one left behind with
	// its namespace would be another test's on this shared cluster.
	t.Cleanup(func() {
		_ = cluster.Client.Delete(ctx, sbx)
		cluster.SandboxGone(t, sbx.Name)
		_ = cluster.Client.Delete(ctx, tpl)
	})
	got := &v1.Sandbox{}
	testcluster.Eventually(t, "sandbox "+sbx.Name+" Ready", func() (bool, string) {
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(sbx), got); err != nil {
			return false, err.Error()
		}
		return conditions.IsTrue(got, v1.ReadyCondition), conditions.GetMessage(got, v1.ReadyCondition)
	})
	// Ready comes once the pod runs; the namespace's policy was applied
	// before the pod was made.
	policies := &networkingv1.NetworkPolicyList{}
	if err := cluster.Client.List(ctx, policies, client.InNamespace(got.Status.Namespace)); err != nil || len(policies.Items) == 0 {
		t.Fatalf("no NetworkPolicy in the sandbox's namespace: %v", err)
	}

	cached := map[string]bool{}
	for obj := range CacheOptions().ByObject {
		gvk, err := apiutil.GVKForObject(obj, mgr.GetScheme())
		if err != nil {
			t.Fatal(err)
		}
		mapping, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatal(err)
		}
		cached[strings.TrimPrefix(mapping.Resource.Group+"/"+mapping.Resource.Version+"/"+mapping.Resource.Resource, "/")] = true
	}
	var late, uncached []string
	for _, r := range lists.resources() {
		if !slices.Contains(beforeReady, r) {
			late = append(late, r)
		}
		if !cached[r] {
			uncached = append(uncached, r)
		}
	}
	// A controller's watch of a kind CacheOptions leaves out would be
	// registered within moments of the start, most often before the first
	// look above: this catches it every time.
	if len(uncached) > 0 {
		t.Errorf("collections read of kinds CacheOptions does not name, so not registered before the start: %s", strings.Join(uncached, ", "))
	}
	if len(late) > 0 {
		t.Errorf("informers started after /readyz said ok: %s (listed before: %s)", strings.Join(late, ", "), strings.Join(beforeReady, ", "))
	}
	if len(beforeReady) == 0 {
		t.Error("no collection was read before /readyz said ok: the recording saw nothing")
	}
}

// collectionReads records the collections read across the whole cluster
// (GET /api/v1/pods, GET /apis/rbac.authorization.k8s.io/v1/rolebindings):
// what an informer lists and watches. Reads of one object or of one
// namespace's collection are not informers'.
type collectionReads struct {
	mu   sync.Mutex
	seen []string
}

func (c *collectionReads) resources() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.seen)
}

type collectionReadsTransport struct {
	next  http.RoundTripper
	reads *collectionReads
}

func (t collectionReadsTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if resource, ok := clusterCollection(req.URL.Path); ok && req.Method == http.MethodGet {
		t.reads.mu.Lock()
		if !slices.Contains(t.reads.seen, resource) {
			t.reads.seen = append(t.reads.seen, resource)
		}
		t.reads.mu.Unlock()
	}
	return t.next.RoundTrip(req)
}

// clusterCollection is the resource whose cluster-wide collection path is
// (group/version/resource), if it is one.
func clusterCollection(path string) (string, bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) == 3 && parts[0] == "api":
		return strings.Join(parts[1:], "/"), true
	case len(parts) == 4 && parts[0] == "apis":
		return strings.Join(parts[1:], "/"), true
	}
	return "", false
}

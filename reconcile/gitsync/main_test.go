package gitsync_test

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/declarations"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/gitsync"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/reconciletest"
)

// TestMain runs the GitSync controller alone for the tests, which write the
// status the other controllers would; a benchmark runs every controller,
// as `agentsandbox reconcile` does, since their caches and status writes
// are part of what syncing thousands of objects costs. Run benchmarks with
// -run '^$' (as make bench-gitops does): tests run beside them would meet
// controllers they do not expect.
func TestMain(m *testing.M) {
	flag.Parse()
	setup := func(mgr ctrl.Manager) error { return gitsync.NewReconciler(mgr, "").SetupWithManager(mgr) }
	if flag.Lookup("test.bench").Value.String() != "" {
		setup = func(mgr ctrl.Manager) error { return reconcile.SetupControllers(mgr, reconcile.Options{}) }
	}
	reconciletest.Main(m, setup)
}

func poolYAML(name, extra string) string {
	return fmt.Sprintf("apiVersion: agentsandbox.dev/v1alpha1\nkind: NodePool\nmetadata:\n  name: %s\n%sspec:\n  runtimeHandler: runsc\n  nodeSelector:\n    agentsandbox.dev/node-group: gvisor\n", name, extra)
}

func templateYAML(name, pool, image string) string {
	return fmt.Sprintf("apiVersion: agentsandbox.dev/v1alpha1\nkind: SandboxTemplate\nmetadata:\n  name: %s\nspec:\n  image: %s\n  nodePoolRef:\n    name: %s\n", name, image, pool)
}

// newGitSync creates a GitSync of the repository that only syncs when a
// test asks (interval 1h), and removes it and what it applied afterwards.
func newGitSync(t testing.TB, url string, mutate func(*v1.GitSync)) *v1.GitSync {
	t.Helper()
	c := testcluster.Get(t).Client
	gs := &v1.GitSync{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("gs")}, Spec: v1.GitSyncSpec{
		URL: url, Ref: v1.GitRef{Branch: "main"}, Interval: metav1.Duration{Duration: time.Hour},
	}}
	if mutate != nil {
		mutate(gs)
	}
	if err := c.Create(context.Background(), gs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeGitSync(t, gs) })
	return gs
}

// removeGitSync suspends gs and waits until the controller saw it, so no
// sync (an interval one, say) re-creates what is deleted next: the objects
// labelled as applied by gs, one request per kind, then gs.
func removeGitSync(t testing.TB, gs *v1.GitSync) {
	ctx := context.Background()
	c := testcluster.Get(t).Client
	got := &v1.GitSync{}
	if c.Get(ctx, client.ObjectKeyFromObject(gs), got) != nil {
		return
	}
	base := got.DeepCopy()
	got.Spec.Suspend = true
	if err := c.Patch(ctx, got, client.MergeFrom(base)); err == nil {
		_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
			err := c.Get(ctx, client.ObjectKeyFromObject(gs), got)
			return err != nil || got.Status.ObservedGeneration == got.Generation, nil
		})
	}
	for _, kind := range declarations.Kinds {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(v1.GroupVersion.WithKind(kind))
		// A delete of thousands of objects can end (at the API
		// server's request timeout) with some left: a benchmark's
		// 10,000 templates once left 350.
		for range 5 {
			if c.DeleteAllOf(ctx, u, client.MatchingLabels{v1.LabelGitSync: gs.Name}) == nil {
				break
			}
		}
	}
	_ = c.Delete(ctx, gs)
}

var requests atomic.Int64

// sync asks for an immediate sync and returns the GitSync once the
// controller handled the request.
func sync(t testing.TB, gs *v1.GitSync) *v1.GitSync {
	t.Helper()
	return waitHandled(t, gs, requestSync(t, gs), time.Minute)
}

// requestSync sets the reconcile-request annotation to a new token.
func requestSync(t testing.TB, gs *v1.GitSync) string {
	t.Helper()
	c := testcluster.Get(t).Client
	token := strconv.FormatInt(time.Now().UnixNano()+requests.Add(1), 10)
	cur := &v1.GitSync{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(gs), cur); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(cur.DeepCopy())
	if cur.Annotations == nil {
		cur.Annotations = map[string]string{}
	}
	cur.Annotations[v1.AnnotationReconcileRequestedAt] = token
	if err := c.Patch(context.Background(), cur, patch); err != nil {
		t.Fatal(err)
	}
	return token
}

// waitHandled waits up to timeout for the controller to finish the sync
// the token asked for.
func waitHandled(t testing.TB, gs *v1.GitSync, token string, timeout time.Duration) *v1.GitSync {
	t.Helper()
	c := testcluster.Get(t).Client
	got := &v1.GitSync{}
	var seen string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(gs), got); err != nil {
			seen = err.Error()
			return false, nil
		}
		seen = fmt.Sprintf("handled %q, conditions %v", got.Status.LastHandledReconcileAt, got.Status.Conditions)
		return got.Status.LastHandledReconcileAt == token && got.Status.ObservedGeneration == got.Generation &&
			!conditions.Has(got, v1.ReconcilingCondition), nil
	})
	if err != nil {
		t.Fatalf("timed out after %s waiting for the sync request %s; last seen: %s", timeout, token, seen)
	}
	return got
}

// wantReady fails unless Ready has status and reason and its message says
// every one of says.
func wantReady(t *testing.T, gs *v1.GitSync, status metav1.ConditionStatus, reason string, says ...string) {
	t.Helper()
	cond := conditions.Get(gs, v1.ReadyCondition)
	if cond == nil {
		t.Fatalf("no Ready condition: %v", gs.Status.Conditions)
	}
	if cond.Status != status || cond.Reason != reason {
		t.Fatalf("Ready = %s %s %q, want %s %s", cond.Status, cond.Reason, cond.Message, status, reason)
	}
	for _, s := range says {
		if !strings.Contains(cond.Message, s) {
			t.Errorf("Ready message %q does not say %q", cond.Message, s)
		}
	}
}

func getPool(t *testing.T, name string) (*v1.NodePool, bool) {
	t.Helper()
	p := &v1.NodePool{}
	err := testcluster.Get(t).Client.Get(context.Background(), client.ObjectKey{Name: name}, p)
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return p, true
}

func getTemplate(t *testing.T, name string) *v1.SandboxTemplate {
	t.Helper()
	tpl := &v1.SandboxTemplate{}
	if err := testcluster.Get(t).Client.Get(context.Background(), client.ObjectKey{Name: name}, tpl); err != nil {
		t.Fatal(err)
	}
	return tpl
}

// samples are the observations of one GitSync's sync durations with one
// result.
type samples struct {
	count uint64
	sum   float64
}

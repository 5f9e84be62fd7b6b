package nodepool_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxcd/pkg/runtime/conditions"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/nodepool"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/reconciletest"
)

func TestMain(m *testing.M) {
	reconciletest.Main(m, func(mgr ctrl.Manager) error { return nodepool.NewReconciler(mgr).SetupWithManager(mgr) })
}

const (
	// groupLabel puts a test's nodes in a group of their own, which only
	// that test's pools select.
	groupLabel = "test.agentsandbox.dev/group"
	// timeout bounds every wait for the controller.
	timeout = 30 * time.Second
)

// testTaint is on every test node from its creation, so that no pod of
// another test package is scheduled there, and so that the tests see the
// controller keep taints it did not set.
var testTaint = corev1.Taint{Key: "test.agentsandbox.dev/nodepool", Effect: corev1.TaintEffectNoSchedule}

// env is one test's view of the cluster.
type env struct {
	t *testing.T
	c client.Client
}

// setup marks the test parallel and connects it to the test cluster.
func setup(t *testing.T) *env {
	t.Parallel()
	return &env{t: t, c: testcluster.Get(t).Client}
}

// node creates a kwok node in group, which kwok reports Ready, carrying the
// test's own taint, and deletes it when the test ends.
func (e *env) node(group string) *corev1.Node {
	e.t.Helper()
	return testcluster.Get(e.t).Node(e.t, map[string]string{groupLabel: group}, testTaint)
}

// pool creates a NodePool named name (a fresh name when empty) and, when
// the test ends, deletes it and waits until the controller has let it go.
func (e *env) pool(name string, spec v1.NodePoolSpec) *v1.NodePool {
	e.t.Helper()
	if name == "" {
		name = testcluster.Name("np")
	}
	p := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	if err := e.c.Create(context.Background(), p); err != nil {
		e.t.Fatalf("create NodePool: %v", err)
	}
	e.t.Cleanup(func() { e.deletePool(p) })
	return p
}

// deletePool deletes the pool and waits until it is gone, which means the
// controller released its nodes.
func (e *env) deletePool(p *v1.NodePool) {
	e.t.Helper()
	if err := e.c.Delete(context.Background(), p); err != nil && !apierrors.IsNotFound(err) {
		e.t.Errorf("delete NodePool %s: %v", p.Name, err)
		return
	}
	e.eventually("NodePool "+p.Name+" deleted", func(ctx context.Context) error {
		err := e.c.Get(ctx, client.ObjectKeyFromObject(p), &v1.NodePool{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (err %v)", err)
	})
}

// eventually polls check until it returns nil and fails the test with its
// last error after the timeout.
func (e *env) eventually(what string, check func(ctx context.Context) error) {
	e.t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true,
		func(ctx context.Context) (bool, error) {
			last = check(ctx)
			return last == nil, nil
		})
	if err != nil {
		e.t.Fatalf("%s: not within %s: %v", what, timeout, last)
	}
}

// getPool reads the pool's live state.
func (e *env) getPool(ctx context.Context, p *v1.NodePool) (*v1.NodePool, error) {
	got := &v1.NodePool{}
	return got, e.c.Get(ctx, client.ObjectKeyFromObject(p), got)
}

// poolStatus waits until the pool's status describes its current
// generation and check accepts it, and returns it.
func (e *env) poolStatus(p *v1.NodePool, what string, check func(*v1.NodePool) error) *v1.NodePool {
	e.t.Helper()
	var got *v1.NodePool
	e.eventually("NodePool "+p.Name+" "+what, func(ctx context.Context) error {
		var err error
		if got, err = e.getPool(ctx, p); err != nil {
			return err
		}
		if got.Status.ObservedGeneration != got.Generation {
			return fmt.Errorf("observedGeneration %d, generation %d", got.Status.ObservedGeneration, got.Generation)
		}
		return check(got)
	})
	return got
}

// ready checks the pool's Ready condition: status, reason, and that
// Reconciling and Stalled are as wanted (kstatus: stalled only when no
// retry can help).
func ready(status metav1.ConditionStatus, reason string, stalled bool) func(*v1.NodePool) error {
	return func(p *v1.NodePool) error {
		c := conditions.Get(p, v1.ReadyCondition)
		if c == nil || c.Status != status || c.Reason != reason {
			return fmt.Errorf("Ready = %+v, want %s %s", c, status, reason)
		}
		if conditions.Has(p, v1.ReconcilingCondition) {
			return fmt.Errorf("Reconciling still set: %+v", conditions.Get(p, v1.ReconcilingCondition))
		}
		if got := conditions.IsTrue(p, v1.StalledCondition); got != stalled {
			return fmt.Errorf("Stalled = %v, want %v", got, stalled)
		}
		return nil
	}
}

// counts checks status.nodes and status.readyNodes.
func counts(nodes, readyNodes int32) func(*v1.NodePool) error {
	return func(p *v1.NodePool) error {
		if p.Status.Nodes != nodes || p.Status.ReadyNodes != readyNodes {
			return fmt.Errorf("nodes/readyNodes = %d/%d, want %d/%d", p.Status.Nodes, p.Status.ReadyNodes, nodes, readyNodes)
		}
		return nil
	}
}

// all combines checks.
func all(checks ...func(*v1.NodePool) error) func(*v1.NodePool) error {
	return func(p *v1.NodePool) error {
		for _, check := range checks {
			if err := check(p); err != nil {
				return err
			}
		}
		return nil
	}
}

// member waits until node carries pool's label and exactly the wanted
// pool taints, recorded as the pool's, besides the test taint, which must
// survive.
func (e *env) member(n *corev1.Node, p *v1.NodePool, want ...corev1.Taint) {
	e.t.Helper()
	e.nodeState(n, "in NodePool "+p.Name, p.Name, want)
}

// notMember waits until node carries no pool label, no record and only the
// test taint.
func (e *env) notMember(n *corev1.Node) {
	e.t.Helper()
	e.nodeState(n, "in no NodePool", "", nil)
}

func (e *env) nodeState(n *corev1.Node, what, label string, poolTaints []corev1.Taint) {
	e.t.Helper()
	e.eventually("node "+n.Name+" "+what, func(ctx context.Context) error {
		got := &corev1.Node{}
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(n), got); err != nil {
			return err
		}
		if l := got.Labels[v1.LabelNodePool]; l != label {
			return fmt.Errorf("label %s = %q, want %q", v1.LabelNodePool, l, label)
		}
		if _, recorded := got.Annotations[v1.AnnotationOwnedTaints]; recorded != (len(poolTaints) > 0) {
			return fmt.Errorf("annotation %s present = %v, want %v", v1.AnnotationOwnedTaints, recorded, len(poolTaints) > 0)
		}
		if want := append([]corev1.Taint{testTaint}, poolTaints...); !sameTaints(got.Spec.Taints, want) {
			return fmt.Errorf("taints %v, want %v", got.Spec.Taints, want)
		}
		return nil
	})
}

// sameTaints compares key, value and effect, in any order.
func sameTaints(got, want []corev1.Taint) bool {
	return len(got) == len(want) && !slices.ContainsFunc(want, func(w corev1.Taint) bool {
		return !slices.ContainsFunc(got, func(g corev1.Taint) bool {
			return g.Key == w.Key && g.Value == w.Value && g.Effect == w.Effect
		})
	})
}

package template_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/reconciletest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/template"
)

func TestMain(m *testing.M) {
	reconciletest.Main(m, func(mgr ctrl.Manager) error { return template.NewReconciler(mgr).SetupWithManager(mgr) })
}

func create(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), obj) })
}

// waitReady waits until the template's current generation was reconciled
// with Ready = status and reason, and returns it.
func waitReady(t *testing.T, c client.Client, tpl *v1.SandboxTemplate, status metav1.ConditionStatus, reason string) *v1.SandboxTemplate {
	t.Helper()
	got := &v1.SandboxTemplate{}
	last := ""
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(tpl), got); err != nil {
			return false, err
		}
		cond := conditions.Get(got, v1.ReadyCondition)
		if cond == nil {
			return false, nil
		}
		last = fmt.Sprintf("%s %s %s", cond.Status, cond.Reason, cond.Message)
		return cond.Status == status && cond.Reason == reason && got.Status.ObservedGeneration == got.Generation, nil
	})
	if err != nil {
		t.Fatalf("template %s: want Ready=%s %s, last %s", tpl.Name, status, reason, last)
	}
	return got
}

func TestInvalidTemplatesStallWithAnActionableReason(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	cases := []struct {
		name, reason, message string
		spec                  v1.SandboxTemplateSpec
	}{
		{"except outside cidr", v1.ReasonInvalidEgress, `except[0] "192.168.0.0/16" must be a CIDR inside 10.0.0.0/8`,
			v1.SandboxTemplateSpec{Image: "python:3.12", Network: v1.Network{Egress: []v1.EgressRule{{CIDR: "10.0.0.0/8", Except: []string{"192.168.0.0/16"}}}}}},
		{"host bits", v1.ReasonInvalidEgress, "did you mean 10.0.0.0/8",
			v1.SandboxTemplateSpec{Image: "python:3.12", Network: v1.Network{Egress: []v1.EgressRule{{CIDR: "10.1.2.3/8"}}}}},
		{"duplicate port names", v1.ReasonDuplicatePortName, `spec.ports[1].name "web" is already used by spec.ports[0]`,
			v1.SandboxTemplateSpec{Image: "python:3.12", Ports: []v1.ContainerPort{{Name: "web", ContainerPort: 80}, {Name: "web", ContainerPort: 8080}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tpl := &v1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("invalid")}, Spec: tc.spec}
			create(t, c, tpl)
			got := waitReady(t, c, tpl, metav1.ConditionFalse, tc.reason)
			if msg := conditions.GetMessage(got, v1.ReadyCondition); !strings.Contains(msg, tc.message) {
				t.Errorf("message %q does not say %q", msg, tc.message)
			}
			if !conditions.IsTrue(got, v1.StalledCondition) {
				t.Errorf("an invalid spec is not Stalled: %+v", got.Status.Conditions)
			}
		})
	}
}

// TestMissingNodePoolResolvesWhenCreated checks a template waits, Ready
// False but not stalled, for its node pool to exist and then to have its
// RuntimeClass, stalls with the pool when the pool cannot make it, and
// turns Ready once it has.
func TestMissingNodePoolResolvesWhenCreated(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	poolName := testcluster.Name("pool")
	tpl := &v1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("needs-pool")},
		Spec:       v1.SandboxTemplateSpec{Image: "python:3.12", NodePoolRef: &v1.LocalObjectReference{Name: poolName}},
	}
	create(t, c, tpl)
	got := waitReady(t, c, tpl, metav1.ConditionFalse, v1.ReasonNodePoolNotFound)
	if msg := conditions.GetMessage(got, v1.ReadyCondition); !strings.Contains(msg, `NodePool "`+poolName+`"`) {
		t.Errorf("message %q does not name the node pool", msg)
	}
	if conditions.IsTrue(got, v1.StalledCondition) {
		t.Errorf("a missing node pool is not a spec error and must not stall")
	}
	pool := &v1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: poolName},
		Spec:       v1.NodePoolSpec{RuntimeHandler: "runsc", NodeSelector: map[string]string{"pool": poolName}},
	}
	create(t, c, pool)
	// No NodePool controller runs here: the pool has no RuntimeClass until
	// the test writes the status that controller would.
	got = waitReady(t, c, tpl, metav1.ConditionFalse, v1.ReasonNodePoolNotReady)
	if msg := conditions.GetMessage(got, v1.ReadyCondition); !strings.Contains(msg, `NodePool "`+poolName+`"`) || !strings.Contains(msg, "RuntimeClass") {
		t.Errorf("message %q does not say the node pool has no RuntimeClass yet", msg)
	}
	if conditions.IsTrue(got, v1.StalledCondition) {
		t.Errorf("a node pool still making its RuntimeClass is no spec error and must not stall")
	}
	// A RuntimeClass of the pool's name that is not its own stalls the
	// pool, and the template with it.
	conflict := "RuntimeClass " + poolName + " exists and is not this pool's"
	setPoolStatus(t, c, pool, func(s *v1.NodePoolStatus) {
		s.Conditions = []metav1.Condition{{Type: v1.StalledCondition, Status: metav1.ConditionTrue, Reason: v1.ReasonRuntimeClassConflict,
			Message: conflict, LastTransitionTime: metav1.Now()}}
	})
	testcluster.Eventually(t, "the template Stalled with its node pool", func() (bool, string) {
		got := &v1.SandboxTemplate{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(tpl), got); err != nil {
			return false, err.Error()
		}
		msg := conditions.GetMessage(got, v1.ReadyCondition)
		return conditions.IsTrue(got, v1.StalledCondition) && conditions.GetReason(got, v1.ReadyCondition) == v1.ReasonNodePoolNotReady &&
			strings.Contains(msg, conflict), msg
	})
	setPoolStatus(t, c, pool, func(s *v1.NodePoolStatus) { s.Conditions, s.RuntimeClassName = nil, poolName })
	waitReady(t, c, tpl, metav1.ConditionTrue, v1.ReasonValid)
}

// setPoolStatus writes the status of pool that change makes, as the
// NodePool controller, which this package does not run, would.
func setPoolStatus(t *testing.T, c client.Client, pool *v1.NodePool, change func(*v1.NodePoolStatus)) {
	t.Helper()
	before := pool.DeepCopy()
	change(&pool.Status)
	if err := c.Status().Patch(context.Background(), pool, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
}

func TestContentHashFollowsWhatShapesASandbox(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	ctx := context.Background()
	tpl := &v1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("hash")}, Spec: v1.SandboxTemplateSpec{Image: "python:3.12"}}
	create(t, c, tpl)
	tpl = waitReady(t, c, tpl, metav1.ConditionTrue, v1.ReasonValid)
	first := tpl.Status.ContentHash
	if first == "" {
		t.Fatal("no content hash")
	}
	tpl.Spec.Lifecycle = &v1.Lifecycle{TTL: &metav1.Duration{Duration: time.Hour}}
	if err := c.Update(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	if got := waitReady(t, c, tpl, metav1.ConditionTrue, v1.ReasonValid).Status.ContentHash; got != first {
		t.Errorf("changing the default lifetime changed the hash %s -> %s; warm pools would roll for nothing", first, got)
	}
	tpl = waitReady(t, c, tpl, metav1.ConditionTrue, v1.ReasonValid)
	tpl.Spec.Image = "python:3.13"
	if err := c.Update(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	if got := waitReady(t, c, tpl, metav1.ConditionTrue, v1.ReasonValid).Status.ContentHash; got == first {
		t.Errorf("changing the image kept the hash %s", got)
	}
}

// TestNewTemplateCostsOneWrite checks a valid new template is checked with
// one status write and no event: a GitSync of thousands of templates costs
// the template controller as many writes, not twice or three times that.
func TestNewTemplateCostsOneWrite(t *testing.T) {
	c := testcluster.Get(t).Client
	since := reconciletest.WriteCount()
	tpl := &v1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("one-write")}, Spec: v1.SandboxTemplateSpec{Image: "python:3.13"}}
	create(t, c, tpl)
	waitReady(t, c, tpl, metav1.ConditionTrue, v1.ReasonValid)
	// A second pass (a requeue, a restart) finds nothing to write.
	time.Sleep(time.Second)
	writes := reconciletest.Writes(since, func(w reconciletest.Write) bool {
		return strings.Contains(w.Path, "/sandboxtemplates/"+tpl.Name) || strings.HasSuffix(w.Path, "/events")
	})
	if len(writes) != 1 || !strings.HasSuffix(writes[0].Path, "/status") {
		t.Errorf("a new valid template cost %d writes, want its one status patch: %v", len(writes), writes)
	}
}

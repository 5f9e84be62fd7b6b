package sandbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
)

// idleTemplate is a template whose sandboxes stop after idle without use.
func idleTemplate(t *testing.T, c client.Client, idle time.Duration, mutate func(*v1.Lifecycle)) *v1.SandboxTemplate {
	t.Helper()
	return newTemplate(t, c, func(tpl *v1.SandboxTemplate) {
		tpl.Spec.Workspace.Persistent = true
		tpl.Spec.Lifecycle = &v1.Lifecycle{IdleTimeout: &metav1.Duration{Duration: idle}}
		if mutate != nil {
			mutate(tpl.Spec.Lifecycle)
		}
	})
}

// recordActivity writes the clients' activity record, as the SDK does.
func recordActivity(t *testing.T, c client.Client, sbx *v1.Sandbox, at time.Time) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType,
		fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, v1.AnnotationLastActivity, at.UTC().Format(time.RFC3339Nano)))
	if err := c.Patch(context.Background(), &v1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: sbx.Name}}, patch); err != nil {
		t.Fatalf("record activity: %v", err)
	}
}

// TestIdleSandboxStopsAndWakes: a sandbox nobody uses stops after its idle
// timeout with its workspace kept, stays stopped, and a use recorded after
// the stop starts it again on the same workspace.
func TestIdleSandboxStopsAndWakes(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	ctx := context.Background()
	tpl := idleTemplate(t, c, 3*time.Second, nil)
	sbx := newSandbox(t, c, tpl, nil)
	ready := waitCondition(t, c, sbx, metav1.ConditionTrue, v1.ReasonPodReady)
	if idle := ready.Status.Idle; idle == nil || idle.Timeout.Duration != 3*time.Second || !idle.WakeOnConnect || idle.StopAt == nil ||
		ready.Status.LastActivityAt == nil || !idle.StopAt.Equal(&metav1.Time{Time: ready.Status.LastActivityAt.Add(3 * time.Second)}) {
		t.Errorf("a running sandbox with an idle timeout: idle %+v, last activity %v", idle, ready.Status.LastActivityAt)
	}
	ns := environment.NamespaceName(sbx.Name)
	pvc := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: v1.WorkspaceName}, pvc); err != nil {
		t.Fatal(err)
	}

	waitCondition(t, c, sbx, metav1.ConditionFalse, v1.ReasonIdleTimeout, "idle timeout")
	testcluster.Eventually(t, "idle sandbox's pod gone", func() (bool, string) {
		err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: environment.PodName}, &corev1.Pod{})
		return apierrors.IsNotFound(err), "pod still there"
	})
	stopped := waitCondition(t, c, sbx, metav1.ConditionFalse, v1.ReasonIdleTimeout, "workspace is kept")
	if stopped.Status.Phase != v1.SandboxPhaseStopped || stopped.Status.StoppedAt == nil || stopped.Spec.State != v1.SandboxRunning {
		t.Errorf("idle-stopped: phase %s, stopped at %v, spec.state %s; want Stopped, a time, Running (the spec is the owner's)",
			stopped.Status.Phase, stopped.Status.StoppedAt, stopped.Spec.State)
	}
	if !stopped.Readiness().Ready {
		t.Errorf("an idle-stopped sandbox is not settled for Terraform and GitSync: %+v", stopped.Readiness())
	}
	hasEvent(t, c, sbx, v1.ReasonIdleTimeout, "idle timeout 3s")
	// It stays stopped: nothing used it.
	time.Sleep(2 * time.Second)
	if err := c.Get(ctx, client.ObjectKeyFromObject(sbx), stopped); err != nil || conditions.GetReason(stopped, v1.ReadyCondition) != v1.ReasonIdleTimeout {
		t.Fatalf("an idle-stopped sandbox nobody used did not stay stopped: %s (%v)", conditions.GetReason(stopped, v1.ReadyCondition), err)
	}

	recordActivity(t, c, sbx, time.Now())
	woken := waitCondition(t, c, sbx, metav1.ConditionTrue, v1.ReasonPodReady)
	if woken.Status.StoppedAt != nil {
		t.Errorf("a woken sandbox keeps stoppedAt %v", woken.Status.StoppedAt)
	}
	hasEvent(t, c, sbx, v1.ReasonWoken, "starting the sandbox")
	if stops, wakes := idleMetrics(t); stops < 1 || wakes < 1 {
		t.Errorf("after an idle stop and a wake: agentsandbox_sandbox_idle_stops_total %v, agentsandbox_sandbox_wake_seconds has %d observations; want at least 1 of each", stops, wakes)
	}
	again := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: v1.WorkspaceName}, again); err != nil || again.UID != pvc.UID {
		t.Fatalf("workspace claim after the wake: uid %s, was %s (err %v)", again.UID, pvc.UID, err)
	}
	assertIsolated(t, c, woken)
}

// TestActivityKeepsASandboxRunning: a use recorded more often than the idle
// timeout keeps the sandbox running past it; when the uses end, it stops.
func TestActivityKeepsASandboxRunning(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	ctx := context.Background()
	sbx := newSandbox(t, c, idleTemplate(t, c, 3*time.Second, nil), nil)
	waitCondition(t, c, sbx, metav1.ConditionTrue, v1.ReasonPodReady)
	got := &v1.Sandbox{}
	for range 8 {
		recordActivity(t, c, sbx, time.Now())
		time.Sleep(time.Second)
		if err := c.Get(ctx, client.ObjectKeyFromObject(sbx), got); err != nil {
			t.Fatal(err)
		}
		if got.IdleStopped() {
			t.Fatalf("a sandbox used every second stopped for idleness: %s", conditions.GetMessage(got, v1.ReadyCondition))
		}
	}
	if got.Status.LastActivityAt == nil || time.Since(got.Status.LastActivityAt.Time) > 3*time.Second {
		t.Errorf("status.lastActivityAt %v does not follow the clients' record", got.Status.LastActivityAt)
	}
	waitCondition(t, c, sbx, metav1.ConditionFalse, v1.ReasonIdleTimeout)
}

// TestOwnerStoppedSandboxIsNotWoken: a use recorded on a sandbox its owner
// stopped does not start it; only its owner does.
func TestOwnerStoppedSandboxIsNotWoken(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	ctx := context.Background()
	sbx := newSandbox(t, c, idleTemplate(t, c, 2*time.Second, nil), nil)
	waitCondition(t, c, sbx, metav1.ConditionTrue, v1.ReasonPodReady)
	setState(t, c, sbx, v1.SandboxStopped)
	waitCondition(t, c, sbx, metav1.ConditionFalse, v1.ReasonStopped)
	recordActivity(t, c, sbx, time.Now().Add(time.Second))
	time.Sleep(3 * time.Second)
	got := &v1.Sandbox{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(sbx), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != v1.SandboxPhaseStopped || conditions.GetReason(got, v1.ReadyCondition) != v1.ReasonStopped {
		t.Errorf("an owner-stopped sandbox used afterwards: phase %s, reason %s; want it to stay Stopped",
			got.Status.Phase, conditions.GetReason(got, v1.ReadyCondition))
	}
}

// TestDeleteAfterStopped: a sandbox that stays stopped for the template's
// deleteAfterStopped is deleted, its namespace with it.
func TestDeleteAfterStopped(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	ctx := context.Background()
	tpl := idleTemplate(t, c, time.Hour, func(l *v1.Lifecycle) { l.DeleteAfterStopped = &metav1.Duration{Duration: 3 * time.Second} })
	sbx := newSandbox(t, c, tpl, func(s *v1.Sandbox) { s.Spec.State = v1.SandboxStopped })
	stopped := waitCondition(t, c, sbx, metav1.ConditionFalse, v1.ReasonStopped)
	if stopped.Status.DeleteAt == nil || stopped.Status.StoppedAt == nil || !stopped.Status.DeleteAt.Equal(&metav1.Time{Time: stopped.Status.StoppedAt.Add(3 * time.Second)}) {
		t.Errorf("a stopped sandbox with deleteAfterStopped 3s: stopped at %v, delete at %v", stopped.Status.StoppedAt, stopped.Status.DeleteAt)
	}
	hasEvent(t, c, sbx, v1.ReasonDeletedAfterStopped, "deleting the sandbox")
	testcluster.Eventually(t, "sandbox deleted after staying stopped", func() (bool, string) {
		err := c.Get(ctx, client.ObjectKeyFromObject(sbx), &v1.Sandbox{})
		return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err)
	})
}

// TestSandboxIdleTimeoutOnlyShortens: a sandbox's own idleTimeout applies
// where it is shorter than the template's and is held to the template's
// where it is longer; wakeOnConnect comes from the template.
func TestSandboxIdleTimeoutOnlyShortens(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	long := idleTemplate(t, c, time.Hour, func(l *v1.Lifecycle) { l.WakeOnConnect = ptr.To(false) })
	shorter := newSandbox(t, c, long, func(s *v1.Sandbox) { s.Spec.IdleTimeout = &metav1.Duration{Duration: 2 * time.Second} })
	short := idleTemplate(t, c, 2*time.Second, nil)
	longer := newSandbox(t, c, short, func(s *v1.Sandbox) { s.Spec.IdleTimeout = &metav1.Duration{Duration: time.Hour} })
	for _, sbx := range []*v1.Sandbox{shorter, longer} {
		got := waitCondition(t, c, sbx, metav1.ConditionFalse, v1.ReasonIdleTimeout)
		if got.Status.Idle == nil || got.Status.Idle.Timeout.Duration != 2*time.Second {
			t.Errorf("sandbox %s: idle %+v, want a timeout of 2s", sbx.Name, got.Status.Idle)
		}
	}
	got := waitCondition(t, c, shorter, metav1.ConditionFalse, v1.ReasonIdleTimeout)
	if got.Status.Idle == nil || got.Status.Idle.WakeOnConnect {
		t.Errorf("a template with wakeOnConnect false: status idle %+v", got.Status.Idle)
	}
}

// TestWarmMembersWaitAndTheClockStartsAtTheClaim: a pool's members,
// whatever their template's idle timeout, wait unclaimed for longer than it;
// a sandbox claimed from the pool starts its clock at the claim (it does
// not stop at once for the time its member waited) and stops once unused.
func TestWarmMembersWaitAndTheClockStartsAtTheClaim(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	pool := newPool(t, c, idleTemplate(t, c, 3*time.Second, nil), 1, nil)
	waitPoolReady(t, c, pool, 1)
	time.Sleep(4 * time.Second) // longer than the idle timeout
	waitPoolReady(t, c, pool, 1)
	sbx := newSandbox(t, c, &v1.SandboxTemplate{}, claimFrom(pool))
	ready := waitCondition(t, c, sbx, metav1.ConditionTrue, v1.ReasonPodReady)
	if ready.Status.LaunchType != v1.LaunchWarm || ready.Status.ClaimedAt == nil || ready.Status.LastActivityAt == nil ||
		ready.Status.LastActivityAt.Before(ready.Status.ClaimedAt) {
		t.Fatalf("a warm claim: launch %s, claimed at %v, last activity %v; want the clock to start at the claim",
			ready.Status.LaunchType, ready.Status.ClaimedAt, ready.Status.LastActivityAt)
	}
	waitCondition(t, c, sbx, metav1.ConditionFalse, v1.ReasonIdleTimeout)
}

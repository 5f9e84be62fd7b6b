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
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/apply"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
)

func TestColdStartBuildsAnIsolatedSandbox(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	tpl := newTemplate(t, c, nil)
	sbx := newSandbox(t, c, tpl, nil)

	got := waitCondition(t, c, sbx, metav1.ConditionTrue, v1.ReasonPodReady)
	assertIsolated(t, c, got)
	for _, m := range got.ManagedFields {
		if m.Subresource == "status" && m.Manager != apply.FieldManager {
			t.Errorf("status written by field manager %q, want %q", m.Manager, apply.FieldManager)
		}
	}
	s := got.Status
	if s.Phase != v1.SandboxPhaseRunning || s.Namespace != "sandbox-"+sbx.Name || s.PodName != environment.PodName ||
		s.PodIP == "" || s.LaunchType != v1.LaunchCold {
		t.Errorf("status %+v", s)
	}
	if s.RequestedAt == nil || s.ReadyAt == nil || s.ReadyAt.Before(s.RequestedAt) {
		t.Errorf("timestamps requested %v ready %v", s.RequestedAt, s.ReadyAt)
	}
	pod := &corev1.Pod{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: s.Namespace, Name: s.PodName}, pod); err != nil {
		t.Fatal(err)
	}
	if pod.Spec.Containers[0].Image != tpl.Spec.Image || pod.Spec.Volumes[0].EmptyDir == nil {
		t.Errorf("pod does not follow the template: image %s volumes %+v", pod.Spec.Containers[0].Image, pod.Spec.Volumes)
	}
	hasEvent(t, c, sbx, string(v1.SandboxPhaseRunning), "changed by kwok-admin")
}

// A status changed by hand is the controller's to say: the next pass writes
// back what it finds, although that is what it last wrote itself.
func TestStatusEditedByHandIsWrittenBack(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	tpl := newTemplate(t, c, nil)
	sbx := newSandbox(t, c, tpl, nil)
	edited := waitCondition(t, c, sbx, metav1.ConditionTrue, v1.ReasonPodReady)
	edited.Status.Phase = v1.SandboxPhaseFailed
	conditions.MarkFalse(edited, v1.ReadyCondition, v1.ReasonPodFailed, "edited by hand")
	if err := c.Status().Update(context.Background(), edited); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, c, sbx, metav1.ConditionTrue, v1.ReasonPodReady)
}

func TestStopAndStartKeepTheWorkspace(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	ctx := context.Background()
	tpl := newTemplate(t, c, func(tpl *v1.SandboxTemplate) { tpl.Spec.Workspace.Persistent = true })
	sbx := newSandbox(t, c, tpl, nil)
	waitCondition(t, c, sbx, metav1.ConditionTrue, v1.ReasonPodReady)
	ns := environment.NamespaceName(sbx.Name)
	pvc := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: v1.WorkspaceName}, pvc); err != nil {
		t.Fatalf("workspace claim: %v", err)
	}
	firstPod := &corev1.Pod{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: environment.PodName}, firstPod); err != nil {
		t.Fatal(err)
	}

	setState(t, c, sbx, v1.SandboxStopped)
	stopped := waitCondition(t, c, sbx, metav1.ConditionFalse, v1.ReasonStopped)
	if stopped.Status.Phase != v1.SandboxPhaseStopped || stopped.Status.PodName != "" {
		t.Errorf("stopped status %+v", stopped.Status)
	}
	testcluster.Eventually(t, "pod deleted", func() (bool, string) {
		err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: environment.PodName}, &corev1.Pod{})
		return apierrors.IsNotFound(err), "pod still there"
	})
	assertIsolated(t, c, stopped)

	setState(t, c, sbx, v1.SandboxRunning)
	waitCondition(t, c, sbx, metav1.ConditionTrue, v1.ReasonPodReady)
	again := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: v1.WorkspaceName}, again); err != nil || again.UID != pvc.UID {
		t.Fatalf("workspace claim after restart: uid %s, was %s (err %v)", again.UID, pvc.UID, err)
	}
	secondPod := &corev1.Pod{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: environment.PodName}, secondPod); err != nil {
		t.Fatal(err)
	}
	if secondPod.UID == firstPod.UID || secondPod.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != v1.WorkspaceName {
		t.Errorf("restart did not create a new pod on the same claim")
	}
	hasEvent(t, c, sbx, string(v1.SandboxPhaseStopped), "alice@example.com")
}

func TestDeleteLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	ctx := context.Background()
	tpl := newTemplate(t, c, func(tpl *v1.SandboxTemplate) { tpl.Spec.Workspace.Persistent = true })
	sbx := newSandbox(t, c, tpl, nil)
	waitCondition(t, c, sbx, metav1.ConditionTrue, v1.ReasonPodReady)
	if err := c.Delete(ctx, sbx); err != nil {
		t.Fatal(err)
	}
	testcluster.Eventually(t, "namespace gone", func() (bool, string) {
		err := c.Get(ctx, types.NamespacedName{Name: environment.NamespaceName(sbx.Name)}, &corev1.Namespace{})
		return apierrors.IsNotFound(err), "namespace still exists"
	})
	pvcs := &corev1.PersistentVolumeClaimList{}
	if err := c.List(ctx, pvcs, client.InNamespace(environment.NamespaceName(sbx.Name))); err != nil || len(pvcs.Items) != 0 {
		t.Errorf("claims left: %d (%v)", len(pvcs.Items), err)
	}
}

// TestDeleteWaitsForThePod: a deleted Sandbox stays, in phase Deleting,
// while its pod is still on its node (here held by a finalizer of the
// test's, as a node that cannot tear it down holds it), and goes once the
// pod has; the admission policy gave it the controller's finalizer.
func TestDeleteWaitsForThePod(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	ctx := context.Background()
	sbx := newSandbox(t, c, newTemplate(t, c, nil), nil)
	if !controllerutil.ContainsFinalizer(sbx, v1.FinalizerSandbox) {
		t.Fatalf("a new sandbox has finalizers %v, want %s from the admission policy", sbx.Finalizers, v1.FinalizerSandbox)
	}
	ready := waitCondition(t, c, sbx, metav1.ConditionTrue, v1.ReasonPodReady)
	const hold = "test.agentsandbox.dev/hold"
	pod := &corev1.Pod{}
	key := types.NamespacedName{Namespace: ready.Status.Namespace, Name: environment.PodName}
	if err := c.Get(ctx, key, pod); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(pod.DeepCopy())
	controllerutil.AddFinalizer(pod, hold)
	if err := c.Patch(ctx, pod, patch); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, sbx); err != nil {
		t.Fatal(err)
	}
	deleting := waitCondition(t, c, sbx, metav1.ConditionFalse, v1.ReasonDeleting, "deleting pod sandbox")
	if deleting.Status.Phase != v1.SandboxPhaseDeleting {
		t.Errorf("a deleted sandbox whose pod is terminating is in phase %s, want %s", deleting.Status.Phase, v1.SandboxPhaseDeleting)
	}
	if err := c.Get(ctx, key, pod); err != nil || pod.DeletionTimestamp == nil {
		t.Fatalf("the deleted sandbox's pod: %v, deleted at %v; want it being deleted", err, pod.DeletionTimestamp)
	}
	patch = client.MergeFrom(pod.DeepCopy())
	controllerutil.RemoveFinalizer(pod, hold)
	if err := c.Patch(ctx, pod, patch); err != nil {
		t.Fatal(err)
	}
	testcluster.Eventually(t, "sandbox gone once its pod is", func() (bool, string) {
		err := c.Get(ctx, client.ObjectKeyFromObject(sbx), &v1.Sandbox{})
		return apierrors.IsNotFound(err), fmt.Sprintf("get sandbox: %v", err)
	})
}

func TestExpiry(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	ctx := context.Background()
	tpl := newTemplate(t, c, nil)

	stop := newSandbox(t, c, tpl, func(s *v1.Sandbox) {
		s.Spec.TTL = &metav1.Duration{Duration: 3 * time.Second}
		s.Spec.ShutdownPolicy = v1.ShutdownPolicyStop
	})
	del := newSandbox(t, c, tpl, func(s *v1.Sandbox) {
		s.Spec.ShutdownTime = &metav1.Time{Time: time.Now().Add(3 * time.Second)}
		s.Spec.ShutdownPolicy = v1.ShutdownPolicyDelete
	})
	expired := waitCondition(t, c, stop, metav1.ConditionFalse, v1.ReasonExpired)
	if expired.Status.Phase != v1.SandboxPhaseStopped || expired.Status.ShutdownAt == nil {
		t.Errorf("expired sandbox status %+v", expired.Status)
	}
	if err := c.Get(ctx, types.NamespacedName{Name: environment.NamespaceName(stop.Name)}, &corev1.Namespace{}); err != nil {
		t.Errorf("an expired sandbox with policy Stop lost its namespace: %v", err)
	}
	testcluster.Eventually(t, "expired sandbox with policy Delete deleted", func() (bool, string) {
		err := c.Get(ctx, client.ObjectKeyFromObject(del), &v1.Sandbox{})
		return apierrors.IsNotFound(err), "still there"
	})
}

func TestTemplateProblemsAreReported(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	missingPool := newTemplate(t, c, func(tpl *v1.SandboxTemplate) {
		tpl.Spec.NodePoolRef = &v1.LocalObjectReference{Name: "no-such-pool"}
	})
	sbx := newSandbox(t, c, missingPool, nil)
	// The message names the template and, once the template controller has
	// looked, the missing node pool.
	waitCondition(t, c, sbx, metav1.ConditionFalse, v1.ReasonTemplateNotReady, missingPool.Name, `NodePool "no-such-pool"`)

	noEnv := newTemplate(t, c, nil)
	withEnv := newSandbox(t, c, noEnv, func(s *v1.Sandbox) { s.Spec.Env = []v1.EnvVar{{Name: "DEBUG", Value: "1"}} })
	waitCondition(t, c, withEnv, metav1.ConditionFalse, v1.ReasonEnvVarsInjectionRejected, "spec.env", "Disallowed")

	missing := newSandbox(t, c, &v1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: "no-such-template"}}, nil)
	waitCondition(t, c, missing, metav1.ConditionFalse, v1.ReasonTemplateNotFound)
}

func setState(t *testing.T, c client.Client, sbx *v1.Sandbox, state v1.SandboxState) {
	t.Helper()
	patch := client.MergeFrom(sbx.DeepCopy())
	sbx.Spec.State = state
	if err := c.Patch(context.Background(), sbx, patch); err != nil {
		t.Fatalf("set state %s: %v", state, err)
	}
}

// TestStaleQuotaChargeIsRecounted: quota admission charges a pod create
// before the pod is stored, and a create cut short (its client killed
// mid-request) stays charged until the controller manager's full recount,
// minutes later. A sandbox whose quota so counts two pods that do not
// exist still starts: the controller has the quota counted again.
func TestStaleQuotaChargeIsRecounted(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	ctx := context.Background()
	sbx := newSandbox(t, c, newTemplate(t, c, nil), func(s *v1.Sandbox) { s.Spec.State = v1.SandboxStopped })
	stopped := waitCondition(t, c, sbx, metav1.ConditionFalse, v1.ReasonStopped)
	key := types.NamespacedName{Namespace: stopped.Status.Namespace, Name: "sandbox"}
	// Two phantom pods, as two cut-short creates leave them.
	testcluster.Eventually(t, "quota charged with two pods that do not exist", func() (bool, string) {
		quota := &corev1.ResourceQuota{}
		if err := c.Get(ctx, key, quota); err != nil {
			return false, err.Error()
		}
		if quota.Status.Used == nil {
			return false, "quota not counted yet"
		}
		for name, hard := range quota.Status.Hard {
			quota.Status.Used[name] = hard
		}
		err := c.Status().Update(ctx, quota)
		return err == nil, errString(err)
	})

	setState(t, c, sbx, v1.SandboxRunning)
	waitCondition(t, c, sbx, metav1.ConditionTrue, v1.ReasonPodReady)
	assertIsolated(t, c, sbx)
}

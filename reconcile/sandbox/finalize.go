package sandbox

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/statuspatch"
)

// finalize takes a deleted sandbox's pod down before it lets the Sandbox
// go (v1.FinalizerSandbox). While the pod terminates its namespace still
// takes the kubelet's events, so a node that cannot finish says why in the
// Sandbox's status; a namespace being deleted refuses new events. The
// namespace and everything else in it go by garbage collection once the
// Sandbox is gone, or, when the delete orphans them, by removeLeftBehind.
func (r *Reconciler) finalize(ctx context.Context, sbx *v1.Sandbox) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(sbx, v1.FinalizerSandbox) {
		return ctrl.Result{}, nil
	}
	if err := r.adoptHeld(ctx, sbx); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.deleteUnadopted(ctx, sbx.Name, sbx.UID, sbx.Status.Namespace); err != nil {
		return ctrl.Result{}, err
	}
	pod, err := r.podOfDeleted(ctx, sbx)
	if err != nil {
		return ctrl.Result{}, err
	}
	if pod == nil {
		return ctrl.Result{}, statuspatch.SetFinalizer(ctx, r.Client, sbx, v1.FinalizerSandbox, false)
	}
	if pod.DeletionTimestamp == nil {
		if err := r.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("failed to delete pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		// The watch brings the sandbox back when the pod is gone.
		return ctrl.Result{}, nil
	}
	before, patcher := sbx.DeepCopy(), r.status.For(sbx)
	o := observed{pod: pod, now: time.Now()}
	o.nodeWord = r.lookAtNode(ctx, pod, o.now)
	reason, message := stuckTerminating(o, v1.ReasonDeleting, "deleting pod "+pod.Name+"; the namespace goes once the Sandbox is gone")
	sbx.Status.Phase, sbx.Status.ObservedGeneration = v1.SandboxPhaseDeleting, sbx.Generation
	conditions.MarkFalse(sbx, v1.ReadyCondition, reason, "%s", message)
	conditions.MarkReconciling(sbx, reason, "%s", message)
	if err := r.patchStatus(ctx, patcher, before, sbx); err != nil {
		return ctrl.Result{}, err
	}
	if reason == v1.ReasonTerminationStuck && conditions.GetReason(before, v1.ReadyCondition) != reason {
		r.recorder.Eventf(sbx, nil, corev1.EventTypeWarning, reason, "Delete", "%s", message)
	}
	return ctrl.Result{RequeueAfter: nextLook(o)}, nil
}

// podOfDeleted is the pod of a deleted sandbox, read from the API server
// (a pod the cache has not seen yet must not be left behind), or nil when
// it has none. A sandbox whose status never named its namespace has none
// to wait for: were its pod created by a pass that wrote no status, it
// goes with the namespace.
func (r *Reconciler) podOfDeleted(ctx context.Context, sbx *v1.Sandbox) (*corev1.Pod, error) {
	if sbx.Status.Namespace == "" {
		return nil, nil
	}
	pod := &corev1.Pod{}
	key := types.NamespacedName{Namespace: sbx.Status.Namespace, Name: environment.PodName}
	if err := r.apiReader.Get(ctx, key, pod); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("failed to get pod %s: %w", key, err)
	}
	return pod, nil
}

// adoptHeld relabels the member a deleted sandbox's status names when its
// relabel was still held (relabelQuiet), so that its namespace goes as any
// sandbox's does: its pod's deletion followed (the pod's events reach the
// Sandbox through the namespace's label, which a namespace being deleted
// keeps, while the claim's binding inside may go first), then garbage
// collection. The claim is confirmed past the cache (adoptClaimed): this
// is once per deletion, and off the claim path.
func (r *Reconciler) adoptHeld(ctx context.Context, sbx *v1.Sandbox) error {
	if sbx.Status.Namespace == "" {
		return nil
	}
	ns := &corev1.Namespace{}
	if err := r.Get(ctx, types.NamespacedName{Name: sbx.Status.Namespace}, ns); err != nil || ownsNamespace(ns, sbx) {
		return client.IgnoreNotFound(err)
	}
	_, err := r.adoptClaimed(ctx, sbx, ns)
	return err
}

// deleteUnadopted deletes the members claimed for the sandbox of name and
// uid (any, when uid is empty) that were not relabelled for it, but for
// the one named keep (adoptHeld relabelled it): garbage collection, which
// takes its other namespaces with the Sandbox, does not know they are its,
// and the pool must not have them back, as their owner had access.
func (r *Reconciler) deleteUnadopted(ctx context.Context, name string, uid types.UID, keep string) error {
	claims, err := r.unadoptedClaims(ctx, name)
	if err != nil {
		return err
	}
	for _, c := range claims {
		if c.member.Name != keep && (uid == "" || c.binding.Labels[v1.LabelSandboxUID] == string(uid)) {
			if err := environment.DeleteNamespace(ctx, r.Client, c.member); err != nil {
				return err
			}
		}
	}
	return nil
}

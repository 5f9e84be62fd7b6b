package sandbox

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
)

// slowLook is how long a pod may be on its way (scheduled and not Ready, or
// terminating) before its events are read: an ordinary start or stop
// takes less, and reading events costs a request the fast path does not
// make.
const slowLook = 10 * time.Second

// relookSlow is how often a slow pod's events are read again while it
// stays slow: its status does not change, so no watch event brings the
// sandbox back.
const relookSlow = 15 * time.Second

// slowSince is when the pod started being slow to start or stop, and zero
// when it is not on its way somewhere (Ready, failed, unscheduled,
// crashing, which the pod's status tells by itself).
func slowSince(pod *corev1.Pod) time.Time {
	switch {
	case pod == nil:
		return time.Time{}
	case pod.DeletionTimestamp != nil:
		return pod.DeletionTimestamp.Time
	case pod.Status.Phase == corev1.PodFailed || environment.PodReady(pod) || containerFailing(pod) != "":
		return time.Time{}
	}
	return environment.ScheduledAt(pod)
}

// lookAtNode reads the newest warning about the pod once it has been slow
// for slowLook, and nil before or when there is none. Events that cannot
// be read cost the status its detail, not the pass: the error is logged.
func (r *Reconciler) lookAtNode(ctx context.Context, pod *corev1.Pod, now time.Time) *environment.NodeWord {
	since := slowSince(pod)
	if since.IsZero() || now.Sub(since) < slowLook {
		return nil
	}
	word, err := environment.ReadNodeWord(ctx, r.apiReader, pod)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "reading why a pod is slow")
	}
	return word
}

// stuckTerminating is the reason and message of a pod being deleted: the
// ones given while it takes no longer than v1.TerminationStuckAfter, then
// ReasonTerminationStuck with the node's word.
func stuckTerminating(o observed, reason, message string) (string, string) {
	since := o.pod.DeletionTimestamp.Time
	if o.now.Sub(since) < v1.TerminationStuckAfter {
		return reason, message
	}
	message = fmt.Sprintf("pod %s has been terminating since %s and keeps its node's CPU and memory until it is gone", o.pod.Name, since.UTC().Format(time.RFC3339))
	if o.nodeWord != nil {
		return v1.ReasonTerminationStuck, message + "; " + o.nodeWord.String()
	}
	return v1.ReasonTerminationStuck, message + "; its node has not said why (see the kubelet's log on node " + o.pod.Spec.NodeName + ")"
}

// nextLook is when a sandbox whose pod is on its way should be looked at
// again although nothing it watches changes: when an unschedulable pod
// turns NotTransient, when a slow pod's events are due, when a terminating
// pod turns stuck. Zero when nothing is due.
func nextLook(o observed) time.Duration {
	if o.pod == nil {
		return 0
	}
	if why, since := environment.Unschedulable(o.pod); why != "" {
		if left := since.Add(v1.NotTransient).Sub(o.now); left > 0 {
			return left
		}
		return 0
	}
	since := slowSince(o.pod)
	if since.IsZero() {
		return 0
	}
	// The events are due after slowLook, the verdict after NotTransient
	// (starting) or TerminationStuckAfter (terminating).
	verdict := v1.NotTransient
	if o.pod.DeletionTimestamp != nil {
		verdict = v1.TerminationStuckAfter
	}
	for _, at := range []time.Duration{slowLook, verdict} {
		if left := since.Add(at).Sub(o.now); left > 0 {
			return left
		}
	}
	return relookSlow
}

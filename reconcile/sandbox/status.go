package sandbox

import (
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/problem"
)

// observed is what one reconcile saw of a sandbox's pod.
type observed struct {
	desired v1.SandboxState
	pod     *corev1.Pod
	expired bool
	// idle: the sandbox stops because nobody used it for its idle timeout;
	// wakes: using it through a client starts it again.
	idle, wakes bool
	// nodeWord is the newest warning about a pod slow to start or stop,
	// read only when it is (lookAtNode).
	nodeWord *environment.NodeWord
	now      time.Time
}

// phaseOf summarises the observation, with the Ready reason and message.
func phaseOf(o observed) (phase v1.SandboxPhase, ready bool, reason, message string) {
	switch {
	case o.desired == v1.SandboxStopped && o.pod == nil:
		if o.expired {
			return v1.SandboxPhaseStopped, false, v1.ReasonExpired, "lifetime ended; the pod is gone and the workspace kept"
		}
		if o.idle && o.wakes {
			return v1.SandboxPhaseStopped, false, v1.ReasonIdleTimeout, "stopped after its idle timeout without use; the workspace is kept, and using it through a client starts it again"
		}
		if o.idle {
			return v1.SandboxPhaseStopped, false, v1.ReasonIdleTimeout, "stopped after its idle timeout without use; the workspace is kept, and `agentsandbox start` starts it again (lifecycle.wakeOnConnect is false)"
		}
		return v1.SandboxPhaseStopped, false, v1.ReasonStopped, "stopped; the workspace is kept and state Running starts it again"
	case o.desired == v1.SandboxStopped && o.idle:
		// The reason stays IdleTimeout while the pod goes, stuck or not: it
		// is what keeps the sandbox stopped until a client wakes it.
		message := "stopping after its idle timeout without use: deleting the pod"
		if o.pod.DeletionTimestamp != nil {
			_, message = stuckTerminating(o, v1.ReasonIdleTimeout, message)
		}
		return v1.SandboxPhaseStopping, false, v1.ReasonIdleTimeout, message
	case o.desired == v1.SandboxStopped && o.pod.DeletionTimestamp != nil:
		reason, message := stuckTerminating(o, v1.ReasonStopping, "deleting the pod")
		return v1.SandboxPhaseStopping, false, reason, message
	case o.desired == v1.SandboxStopped:
		return v1.SandboxPhaseStopping, false, v1.ReasonStopping, "deleting the pod"
	case o.pod == nil:
		return v1.SandboxPhaseStarting, false, v1.ReasonPodStarting, "creating the pod"
	case o.pod.DeletionTimestamp != nil:
		reason, message := stuckTerminating(o, v1.ReasonPodStarting, "waiting for the previous pod to terminate")
		return v1.SandboxPhaseStarting, false, reason, message
	case o.pod.Status.Phase == corev1.PodFailed:
		return v1.SandboxPhaseFailed, false, v1.ReasonPodFailed, "pod failed: " + o.pod.Status.Message
	case environment.PodReady(o.pod):
		message := "pod " + o.pod.Name + " is running and ready at " + o.pod.Status.PodIP
		if restarts := restartReport(o.pod); restarts != "" {
			message += "; " + restarts
		}
		return v1.SandboxPhaseRunning, true, v1.ReasonPodReady, message
	default:
		if reason, why := gateRefused(o.pod); why != "" {
			return v1.SandboxPhaseStarting, false, reason, why
		}
		if failing := containerFailing(o.pod); failing != "" {
			return v1.SandboxPhaseStarting, false, v1.ReasonContainerFailing, failing
		}
		reason, message := starting(o)
		return v1.SandboxPhaseStarting, false, reason, message
	}
}

// sandboxContainer is the status of the sandbox's container, nil before the
// kubelet reports one.
func sandboxContainer(pod *corev1.Pod) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == environment.ContainerName {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// containerFailing says why the container does not run, in the kubelet's
// words, or "" while it is merely being created: a crash loop, an OOM kill,
// an image the node cannot get, a security context the runtime refuses.
func containerFailing(pod *corev1.Pod) string {
	c := sandboxContainer(pod)
	if c == nil {
		return ""
	}
	var why string
	if w := c.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
		why = "container " + w.Reason
		if w.Message != "" {
			why += ": " + w.Message
		}
	}
	if t := c.LastTerminationState.Terminated; t != nil {
		if why == "" {
			why = "container restarting"
		}
		why += "; " + lastExit(t)
	}
	return why
}

// gateRefused is the egress gate's word when it ended without finding the
// pod's egress policy enforced or without installing the agent (its
// termination message, which begins with the reason), or "".
func gateRefused(pod *corev1.Pod) (reason, why string) {
	for _, c := range pod.Status.InitContainerStatuses {
		if c.Name != environment.GateName || c.State.Terminated != nil && c.State.Terminated.ExitCode == 0 {
			continue // a gate that passed, on its last try
		}
		for _, t := range []*corev1.ContainerStateTerminated{c.State.Terminated, c.LastTerminationState.Terminated} {
			if t != nil && t.ExitCode != 0 {
				reason = v1.ReasonPolicyNotEnforced
				if strings.HasPrefix(t.Message, v1.ReasonAgentNotInstalled+":") {
					reason = v1.ReasonAgentNotInstalled
				}
				return reason, fmt.Sprintf("the sandbox's code was not started: %s (the gate exited %d; the kubelet retries it)", strings.TrimSpace(t.Message), t.ExitCode)
			}
		}
	}
	return "", ""
}

// gateWaiting tells whether the egress gate runs, and since when.
func gateWaiting(pod *corev1.Pod) (time.Time, bool) {
	for _, c := range pod.Status.InitContainerStatuses {
		if c.Name == environment.GateName && c.State.Running != nil {
			return c.State.Running.StartedAt.Time, true
		}
	}
	return time.Time{}, false
}

// restartReport tells of a running container's earlier deaths, such as an
// OOM kill the kubelet restarted it after, or "" when it never restarted.
func restartReport(pod *corev1.Pod) string {
	c := sandboxContainer(pod)
	if c == nil || c.RestartCount == 0 || c.LastTerminationState.Terminated == nil {
		return ""
	}
	return fmt.Sprintf("the container restarted %d times; %s", c.RestartCount, lastExit(c.LastTerminationState.Terminated))
}

func lastExit(t *corev1.ContainerStateTerminated) string {
	reason := t.Reason
	if reason == "" {
		reason = "exited"
	}
	out := fmt.Sprintf("last exit: %s (exit code %d)", reason, t.ExitCode)
	if reason == "OOMKilled" {
		out += ", killed for exceeding the template's memory limit"
	}
	return out
}

// starting says what a pod on its way to Ready waits for, in the words of
// the scheduler (not placed) or of its node (placed, not started), and
// whether that has lasted NotTransient: then clients stop waiting.
func starting(o observed) (reason, message string) {
	if why, since := environment.Unschedulable(o.pod); why != "" {
		if o.now.Sub(since) < v1.NotTransient {
			return v1.ReasonPodStarting, "pod not scheduled yet: " + why
		}
		return v1.ReasonUnschedulable, fmt.Sprintf("no node can take the pod (the scheduler has said so since %s): %s", since.UTC().Format(time.RFC3339), why)
	}
	if since, waiting := gateWaiting(o.pod); waiting {
		// The node started the pod: what it says of it now (an event from
		// before, say) is not why the sandbox waits.
		return v1.ReasonPodStarting, fmt.Sprintf("the egress gate waits for the pod's egress policy to be enforced (%s so far; it gives up after %s)",
			o.now.Sub(since).Round(time.Second), environment.GateTimeout)
	}
	phase := o.pod.Status.Phase
	if phase == "" {
		phase = corev1.PodPending
	}
	// The node's time to start the sandbox's container runs from when the
	// pod was scheduled, or from when the gate let it start.
	since, what := environment.ScheduledAt(o.pod), "it was scheduled"
	if passed := gatePassedAt(o.pod); passed.After(since) {
		since, what = passed, "the egress gate passed"
	}
	switch {
	case o.nodeWord == nil || o.nodeWord.Last.Before(since):
		return v1.ReasonPodStarting, "pod is " + string(phase) + ", waiting for it to be ready"
	case o.now.Sub(since) < v1.NotTransient:
		return v1.ReasonPodStarting, "pod is " + string(phase) + ": " + o.nodeWord.String()
	}
	return v1.ReasonPodNotStarting, fmt.Sprintf("node %s has not started the pod since %s at %s: %s",
		o.pod.Spec.NodeName, what, since.UTC().Format(time.RFC3339), o.nodeWord)
}

// gatePassedAt is when the egress gate passed, zero while it has not.
func gatePassedAt(pod *corev1.Pod) time.Time {
	for _, c := range pod.Status.InitContainerStatuses {
		if t := c.State.Terminated; c.Name == environment.GateName && t != nil && t.ExitCode == 0 {
			return t.FinishedAt.Time
		}
	}
	return time.Time{}
}

// setStatus records what a pass found.
func setStatus(sbx *v1.Sandbox, o outcome) {
	sbx.Status.ObservedGeneration = sbx.Generation
	if sbx.Status.RequestedAt == nil {
		sbx.Status.RequestedAt = sbx.CreationTimestamp.DeepCopy()
	}
	if !o.resolved {
		if o.problem != nil {
			markProblem(sbx, o.problem)
		}
		return
	}
	conditions.Delete(sbx, v1.StalledCondition)
	sbx.Status.ShutdownAt = o.shutdownAt
	switch {
	case o.deleted:
	case o.err != nil:
		conditions.MarkFalse(sbx, v1.ReadyCondition, o.failedReason, "%v", o.err)
	case o.problem != nil:
		sbx.Status.Phase = v1.SandboxPhasePending
		markProblem(sbx, o.problem)
	case o.waiting != nil:
		w := o.waiting
		conditions.MarkFalse(sbx, v1.ReadyCondition, w.reason, "%s", w.message)
		conditions.MarkReconciling(sbx, w.reason, "%s", w.message)
		sbx.Status.Phase = w.phase
		if w.namespace != "" {
			sbx.Status.Namespace = w.namespace
		}
	default:
		setObserved(sbx, o.namespace, *o.observed)
		o.rule.recordIdle(sbx, o.observed.desired == v1.SandboxStopped, o.observed.now)
	}
}

// markProblem records a problem in the conditions: one the controller
// waits out, or looks at again now and then, is Reconciling; one a watched
// change will end is not.
func markProblem(sbx *v1.Sandbox, p *problem.Problem) {
	p.Mark(sbx)
	switch {
	case p.Stalled && p.Unwatched:
		conditions.Delete(sbx, v1.ReconcilingCondition)
	case !p.Stalled:
		conditions.MarkReconciling(sbx, p.Reason, "%s", p.Message)
	}
}

// setObserved records the observation of the pod and the Ready condition.
func setObserved(sbx *v1.Sandbox, namespace string, o observed) {
	phase, ready, reason, message := phaseOf(o)
	sbx.Status.Phase = phase
	sbx.Status.Namespace = namespace
	sbx.Status.PodName, sbx.Status.PodIP = "", ""
	if o.pod != nil && o.pod.DeletionTimestamp == nil {
		sbx.Status.PodName, sbx.Status.PodIP = o.pod.Name, o.pod.Status.PodIP
	}
	if ready {
		if !conditions.IsTrue(sbx, v1.ReadyCondition) {
			sbx.Status.ReadyAt = &metav1.Time{Time: o.now}
		}
		conditions.MarkTrue(sbx, v1.ReadyCondition, reason, "%s", message)
		conditions.Delete(sbx, v1.ReconcilingCondition)
		return
	}
	conditions.MarkFalse(sbx, v1.ReadyCondition, reason, "%s", message)
	if phase == v1.SandboxPhaseStarting || phase == v1.SandboxPhaseStopping {
		conditions.MarkReconciling(sbx, reason, "%s", message)
	} else {
		conditions.Delete(sbx, v1.ReconcilingCondition)
	}
}

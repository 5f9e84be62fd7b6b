package v1alpha1

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Readiness says how far an object is from doing what it declares. It is
// the one definition of "ready" for every kind: Terraform's waits, the
// GitOps health check and the MCP tools all report it, so a warm pool is
// ready on the same terms wherever someone looks.
// +kubebuilder:object:generate=false
type Readiness struct {
	// Ready: the object does what it declares.
	Ready bool
	// Failed: only a change of the declaration helps (Stalled=True, or a
	// sandbox whose pod failed), or the cluster's (a sandbox no node has
	// taken, or whose node has not started it, for NotTransient).
	Failed bool
	// Message says what the object waits for, why it failed, or, when
	// Ready, the Ready condition's message.
	Message string
}

// Judged is an object with a Readiness: every kind of this API.
// +kubebuilder:object:generate=false
type Judged interface {
	Readiness() Readiness
}

// DefaultWarmPoolReplicas is spec.replicas of a warm pool that sets none
// (the CRD's default, which a test holds this to).
const DefaultWarmPoolReplicas int32 = 1

// DesiredReplicas is the number of Ready members the pool keeps.
func (in *WarmPool) DesiredReplicas() int32 {
	if in.Spec.Replicas == nil {
		return DefaultWarmPoolReplicas
	}
	return *in.Spec.Replicas
}

// Readiness of a node pool: its Ready condition.
func (in *NodePool) Readiness() Readiness {
	return conditionReadiness(in.Generation, in.Status.ObservedGeneration, in.Status.Conditions)
}

// Readiness of a template: its Ready condition.
func (in *SandboxTemplate) Readiness() Readiness {
	return conditionReadiness(in.Generation, in.Status.ObservedGeneration, in.Status.Conditions)
}

// Readiness of a GitSync: its Ready condition (the last revision applied
// and healthy).
func (in *GitSync) Readiness() Readiness {
	return conditionReadiness(in.Generation, in.Status.ObservedGeneration, in.Status.Conditions)
}

// Readiness of a warm pool: Ready, and as many members as it keeps, all of
// them Ready.
func (in *WarmPool) Readiness() Readiness {
	r := conditionReadiness(in.Generation, in.Status.ObservedGeneration, in.Status.Conditions)
	if r.Failed || in.Status.ObservedGeneration < in.Generation {
		return r
	}
	want := in.DesiredReplicas()
	counted := in.Status.ReadyReplicas == want && in.Status.Replicas == want
	return Readiness{Ready: r.Ready && counted, Message: MembersReady(in)}
}

// MembersReady says how many of the members a pool keeps are Ready: "2 of
// 3 members ready".
func MembersReady(pool *WarmPool) string {
	return fmt.Sprintf("%d of %d members ready", pool.Status.ReadyReplicas, pool.DesiredReplicas())
}

// Readiness of a sandbox: Ready when it is to run (or stopped for
// idleness, until a client wakes it), the Stopped phase when it is
// declared stopped; a failed pod fails it, and so does a pod that
// has found no node, or that its node has not started, for NotTransient:
// whoever waits hears the scheduler's or the kubelet's reason then, not at
// the end of a timeout.
func (in *Sandbox) Readiness() Readiness {
	observed := in.Status.ObservedGeneration >= in.Generation
	if in.Spec.State == SandboxStopped {
		return Readiness{Ready: observed && in.Status.Phase == SandboxPhaseStopped, Message: "phase " + string(in.Status.Phase)}
	}
	r := conditionReadiness(in.Generation, in.Status.ObservedGeneration, in.Status.Conditions)
	if !observed {
		return r
	}
	if in.IdleStopped() && in.Status.Phase == SandboxPhaseStopped {
		// Settled as declared: a Running sandbox nobody uses stops, and the
		// next client that uses it starts it. Terraform and a GitSync's
		// health check do not wait for a sandbox to be used.
		return Readiness{Ready: true, Message: r.Message}
	}
	if ready := meta.FindStatusCondition(in.Status.Conditions, ReadyCondition); in.Status.Phase == SandboxPhaseFailed ||
		ready != nil && (ready.Reason == ReasonUnschedulable || ready.Reason == ReasonPodNotStarting || ready.Reason == ReasonPolicyNotEnforced || ready.Reason == ReasonAgentNotInstalled) {
		r.Failed = true
	}
	return r
}

// Usable reports whether the sandbox's pod runs and is Ready, as of the
// status the controller last wrote for the current spec: what a client
// waits for before it runs a command. Readiness is another question,
// whether the sandbox is as declared: a stopped sandbox, or one stopped for
// idleness, is settled but not usable.
func (in *Sandbox) Usable() bool {
	return in.Status.ObservedGeneration == in.Generation && in.Status.Phase == SandboxPhaseRunning &&
		in.Status.PodName != "" && meta.IsStatusConditionTrue(in.Status.Conditions, ReadyCondition)
}

// conditionReadiness reads the Ready and Stalled conditions of a status
// that describes the current generation; before that, they are about an
// older spec.
func conditionReadiness(generation, observedGeneration int64, conditions []metav1.Condition) Readiness {
	if observedGeneration < generation {
		return Readiness{Message: fmt.Sprintf("waiting for the reconciler to see generation %d", generation)}
	}
	if stalled := meta.FindStatusCondition(conditions, StalledCondition); stalled != nil && stalled.Status == metav1.ConditionTrue {
		return Readiness{Failed: true, Message: stalled.Message}
	}
	ready := meta.FindStatusCondition(conditions, ReadyCondition)
	if ready == nil {
		return Readiness{Message: "no Ready condition yet"}
	}
	return Readiness{Ready: ready.Status == metav1.ConditionTrue, Message: ready.Message}
}

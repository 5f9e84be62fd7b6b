package sandbox

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/problem"
)

// What the kubelet of a real node reports about a container that cannot
// run reaches the sandbox's Ready condition in its words; kwok never
// reports such states, so these are the kubelet's shapes written out.
func TestContainerTroubleReachesTheStatus(t *testing.T) {
	oomKilled := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}}
	cases := []struct {
		name      string
		status    corev1.ContainerStatus
		ready     bool
		reason    string
		inMessage []string
	}{{
		name: "crash loop after an OOM kill",
		status: corev1.ContainerStatus{
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 10s restarting failed container"}},
			LastTerminationState: oomKilled,
			RestartCount:         2,
		},
		reason:    v1.ReasonContainerFailing,
		inMessage: []string{"container CrashLoopBackOff: back-off 10s", "last exit: OOMKilled (exit code 137)", "memory limit"},
	}, {
		name: "security context the runtime refuses",
		status: corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason: "CreateContainerConfigError", Message: "container has runAsNonRoot and image will run as root",
		}}},
		reason:    v1.ReasonContainerFailing,
		inMessage: []string{"container CreateContainerConfigError: container has runAsNonRoot"},
	}, {
		name:      "being created",
		status:    corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}},
		reason:    v1.ReasonPodStarting,
		inMessage: []string{"waiting for it to be ready"},
	}, {
		name:      "running again after an OOM kill",
		status:    corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, LastTerminationState: oomKilled, RestartCount: 1},
		ready:     true,
		reason:    v1.ReasonPodReady,
		inMessage: []string{"running and ready", "the container restarted 1 times; last exit: OOMKilled"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.status.Name = environment.ContainerName
			pod := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{tc.status}}}
			pod.Name = environment.PodName
			if tc.ready {
				pod.Status.Phase, pod.Status.PodIP = corev1.PodRunning, "10.244.0.7"
				pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			}
			_, ready, reason, message := phaseOf(observed{desired: v1.SandboxRunning, pod: pod})
			if ready != tc.ready || reason != tc.reason {
				t.Fatalf("ready %v reason %s (%q), want ready %v reason %s", ready, reason, message, tc.ready, tc.reason)
			}
			for _, part := range tc.inMessage {
				if !strings.Contains(message, part) {
					t.Errorf("message %q does not say %q", message, part)
				}
			}
		})
	}
}

// A pod that no node takes, or that its node does not start or cannot
// stop, reaches the status in the scheduler's or the kubelet's words, and
// turns into a reason clients stop waiting on once it has lasted.
func TestSlowPodsReachTheStatus(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) metav1.Time { return metav1.NewTime(now.Add(-ago)) }
	unschedulable := func(ago time.Duration) *corev1.Pod {
		return podWith(corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
			Message: "0/4 nodes are available: 1 Insufficient cpu, 3 node(s) didn't match Pod's node affinity/selector.", LastTransitionTime: at(ago)})
	}
	scheduled := func(ago time.Duration) *corev1.Pod {
		return podWith(corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at(ago)})
	}
	terminating := func(ago time.Duration) *corev1.Pod {
		pod := scheduled(time.Hour)
		deleted := at(ago)
		pod.DeletionTimestamp = &deleted
		return pod
	}
	noHandler := &environment.NodeWord{From: "kubelet", Reason: "FailedCreatePodSandBox",
		Message: `rpc error: code = Unknown desc = failed to get sandbox runtime: no runtime for "nope" is configured`, Last: now.Add(-time.Second)}
	busy := &environment.NodeWord{From: "kubelet", Reason: "FailedKillPod", Message: "error killing pod: failed to \"KillPodSandbox\": remove netns: device or resource busy", Last: now}
	cases := []struct {
		name      string
		o         observed
		phase     v1.SandboxPhase
		reason    string
		inMessage []string
		failed    bool
		next      time.Duration
	}{{
		name: "unschedulable for a moment", o: observed{desired: v1.SandboxRunning, pod: unschedulable(10 * time.Second)},
		phase: v1.SandboxPhaseStarting, reason: v1.ReasonPodStarting, inMessage: []string{"not scheduled yet: 0/4 nodes are available: 1 Insufficient cpu"},
		next: 20 * time.Second,
	}, {
		name: "unschedulable for good", o: observed{desired: v1.SandboxRunning, pod: unschedulable(v1.NotTransient)},
		phase: v1.SandboxPhaseStarting, reason: v1.ReasonUnschedulable, inMessage: []string{"no node can take the pod", "since 2026-12-02T11:59:30Z", "1 Insufficient cpu"},
		failed: true,
	}, {
		name: "scheduled, starting", o: observed{desired: v1.SandboxRunning, pod: scheduled(2 * time.Second)},
		phase: v1.SandboxPhaseStarting, reason: v1.ReasonPodStarting, inMessage: []string{"waiting for it to be ready"},
		next: 8 * time.Second,
	}, {
		name: "the node fails to start it, for a moment", o: observed{desired: v1.SandboxRunning, pod: scheduled(12 * time.Second), nodeWord: noHandler},
		phase: v1.SandboxPhaseStarting, reason: v1.ReasonPodStarting, inMessage: []string{"kubelet says FailedCreatePodSandBox", `no runtime for "nope"`},
		next: 18 * time.Second,
	}, {
		name: "the node fails to start it, for good", o: observed{desired: v1.SandboxRunning, pod: scheduled(time.Minute), nodeWord: noHandler},
		phase: v1.SandboxPhaseStarting, reason: v1.ReasonPodNotStarting, inMessage: []string{"node agentsandbox-node has not started the pod", "FailedCreatePodSandBox"},
		failed: true, next: relookSlow,
	}, {
		name: "a warning from before it was scheduled", o: observed{desired: v1.SandboxRunning, pod: scheduled(time.Second), nodeWord: &environment.NodeWord{From: "default-scheduler", Reason: "FailedScheduling", Last: now.Add(-time.Minute)}},
		phase: v1.SandboxPhaseStarting, reason: v1.ReasonPodStarting, inMessage: []string{"waiting for it to be ready"},
		next: 9 * time.Second,
	}, {
		name: "stopping", o: observed{desired: v1.SandboxStopped, pod: terminating(5 * time.Second)},
		phase: v1.SandboxPhaseStopping, reason: v1.ReasonStopping, inMessage: []string{"deleting the pod"},
		next: 5 * time.Second,
	}, {
		name: "stopping, stuck", o: observed{desired: v1.SandboxStopped, pod: terminating(4 * time.Hour), nodeWord: busy},
		phase: v1.SandboxPhaseStopping, reason: v1.ReasonTerminationStuck, inMessage: []string{"terminating since 2026-12-02T08:00:00Z", "keeps its node's CPU", "kubelet says FailedKillPod", "device or resource busy"},
		next: relookSlow,
	}, {
		name: "starting again behind a stuck pod", o: observed{desired: v1.SandboxRunning, pod: terminating(3 * time.Minute)},
		phase: v1.SandboxPhaseStarting, reason: v1.ReasonTerminationStuck, inMessage: []string{"its node has not said why", "kubelet's log on node agentsandbox-node"},
		next: relookSlow,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.now = now
			phase, ready, reason, message := phaseOf(tc.o)
			if ready || phase != tc.phase || reason != tc.reason {
				t.Fatalf("phase %s ready %v reason %s (%q), want phase %s reason %s", phase, ready, reason, message, tc.phase, tc.reason)
			}
			for _, part := range tc.inMessage {
				if !strings.Contains(message, part) {
					t.Errorf("message %q does not say %q", message, part)
				}
			}
			sbx := &v1.Sandbox{Status: v1.SandboxStatus{Phase: phase, Conditions: []metav1.Condition{{Type: v1.ReadyCondition, Status: metav1.ConditionFalse, Reason: reason, Message: message}}}}
			if got := sbx.Readiness().Failed; got != tc.failed {
				t.Errorf("Readiness().Failed = %v, want %v", got, tc.failed)
			}
			if got := nextLook(tc.o); got != tc.next {
				t.Errorf("next look in %v, want %v", got, tc.next)
			}
		})
	}
}

func podWith(conditions ...corev1.PodCondition) *corev1.Pod {
	pod := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "agentsandbox-node"}, Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: conditions}}
	pod.Name = environment.PodName
	return pod
}

// A gate that found the egress policy unenforced stops the start with its
// own words (PolicyNotEnforced), on its first failure and while the
// kubelet retries it; a gate that passed on a retry says nothing; one that
// could not install the agent says AgentNotInstalled.
func TestGateRefusalReachesTheStatus(t *testing.T) {
	refused := &corev1.ContainerStateTerminated{ExitCode: 1, Message: "PolicyNotEnforced: 10.244.0.1:10250, which the sandbox's NetworkPolicy denies, was still reachable after 30s"}
	cases := []struct {
		name   string
		status corev1.ContainerStatus
		reason string
	}{
		{"refused", corev1.ContainerStatus{State: corev1.ContainerState{Terminated: refused}}, v1.ReasonPolicyNotEnforced},
		{"retried after a refusal", corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, LastTerminationState: corev1.ContainerState{Terminated: refused}}, v1.ReasonPolicyNotEnforced},
		{"backing off after a refusal", corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}, LastTerminationState: corev1.ContainerState{Terminated: refused}}, v1.ReasonPolicyNotEnforced},
		{"passed on a retry", corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, FinishedAt: metav1.Now()}}, LastTerminationState: corev1.ContainerState{Terminated: refused}}, v1.ReasonPodStarting},
		{"waiting", corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}, v1.ReasonPodStarting},
		{"no agent to install", corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1,
			Message: "AgentNotInstalled: open /agentsandbox-agent: no such file or directory"}}}, v1.ReasonAgentNotInstalled},
	}
	// Long after scheduling, with an old warning of the node's: the gate's
	// own 30 s decide, not NotTransient.
	now := time.Now()
	scheduled := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-2 * v1.NotTransient))}
	word := &environment.NodeWord{From: "kubelet", Last: now.Add(-v1.NotTransient), Reason: "MissingClusterDNS", Message: "kubelet does not have ClusterDNS IP configured"}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.status.Name = environment.GateName
			pod := podWith(scheduled)
			pod.Status.InitContainerStatuses = []corev1.ContainerStatus{tc.status}
			_, _, reason, message := phaseOf(observed{desired: v1.SandboxRunning, pod: pod, now: now, nodeWord: word})
			if reason != tc.reason {
				t.Fatalf("reason %s (%q), want %s", reason, message, tc.reason)
			}
			if reason == v1.ReasonPolicyNotEnforced && !strings.Contains(message, "was still reachable after 30s") {
				t.Errorf("message %q does not carry the gate's words", message)
			}
		})
	}
}

// setStatus turns each kind of outcome into its phase and conditions, and
// next into when to look again, without a cluster.
func TestOutcomeReachesTheStatus(t *testing.T) {
	missing := problem.Stall(v1.ReasonTemplateNotFound, "spec.templateRef names SandboxTemplate %q, which does not exist", "t")
	taken := &problem.Problem{Reason: v1.ReasonNamespaceConflict, Message: "namespace taken", Stalled: true, Unwatched: true}
	cases := []struct {
		name        string
		o           outcome
		phase       v1.SandboxPhase
		ready       string // the Ready reason
		reconciling bool
		stalled     bool
		requeue     time.Duration
		terminal    bool
	}{{
		name: "a reference missing", o: outcome{problem: missing},
		ready: v1.ReasonTemplateNotFound, stalled: true, terminal: true,
	}, {
		name: "its namespace taken", o: outcome{resolved: true, problem: taken},
		phase: v1.SandboxPhasePending, ready: v1.ReasonNamespaceConflict, stalled: true, requeue: waitRetry,
	}, {
		name: "waiting for a warm member",
		o: outcome{resolved: true, waiting: &waiting{phase: v1.SandboxPhasePending, reason: v1.ReasonWaitingForMember,
			message: "waiting", retry: waitRetry}},
		phase: v1.SandboxPhasePending, ready: v1.ReasonWaitingForMember, reconciling: true, requeue: waitRetry,
	}, {
		name: "the pod refused", o: outcome{resolved: true, err: errors.New("forbidden"), failedReason: v1.ReasonPodFailed},
		ready: v1.ReasonPodFailed,
	}, {
		name: "running",
		o: outcome{resolved: true, namespace: "sandbox-x", observed: &observed{desired: v1.SandboxRunning, now: time.Now(),
			pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: environment.PodName}, Status: corev1.PodStatus{
				Phase: corev1.PodRunning, PodIP: "10.0.0.9", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			}}}},
		phase: v1.SandboxPhaseRunning, ready: v1.ReasonPodReady,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sbx := &v1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "s", Generation: 3}}
			setStatus(sbx, tc.o)
			if sbx.Status.Phase != tc.phase || conditions.GetReason(sbx, v1.ReadyCondition) != tc.ready {
				t.Errorf("phase %q, Ready reason %q; want %q, %q", sbx.Status.Phase, conditions.GetReason(sbx, v1.ReadyCondition), tc.phase, tc.ready)
			}
			if conditions.Has(sbx, v1.ReconcilingCondition) != tc.reconciling || conditions.Has(sbx, v1.StalledCondition) != tc.stalled {
				t.Errorf("Reconciling %t, Stalled %t; want %t, %t", conditions.Has(sbx, v1.ReconcilingCondition), conditions.Has(sbx, v1.StalledCondition), tc.reconciling, tc.stalled)
			}
			if sbx.Status.ObservedGeneration != 3 {
				t.Errorf("observedGeneration %d, want 3", sbx.Status.ObservedGeneration)
			}
			result, err := tc.o.next(sbx)
			switch {
			case tc.o.err != nil:
				if !errors.Is(err, tc.o.err) || result != (ctrl.Result{}) {
					t.Errorf("next = %+v, %v; want the error alone", result, err)
				}
			case tc.terminal:
				if !errors.Is(err, reconcile.TerminalError(nil)) {
					t.Errorf("next = %+v, %v; want a terminal error", result, err)
				}
			case tc.requeue > 0 && (err != nil || result.RequeueAfter != tc.requeue):
				t.Errorf("next = %+v, %v; want a look again after %s", result, err, tc.requeue)
			}
		})
	}
}

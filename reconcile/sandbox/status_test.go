package sandbox

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
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

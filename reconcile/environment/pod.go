package environment

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// PodReady is the Ready rule: the pod is Running, Ready and has an IP.
func PodReady(pod *corev1.Pod) bool {
	if pod == nil || pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Unschedulable is why the scheduler has not placed the pod, as it said in
// the pod's PodScheduled condition, and since when it has said so; "" when
// it has not said.
func Unschedulable(pod *corev1.Pod) (why string, since time.Time) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
			return c.Message, c.LastTransitionTime.Time
		}
	}
	return "", time.Time{}
}

// ScheduledAt is when the scheduler placed the pod on its node, zero while
// it has not.
func ScheduledAt(pod *corev1.Pod) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// NamespaceSettling tells the refusal of a pod in a namespace so new that
// the controller manager has not completed it yet, and says what the pod
// waits for: the namespace's default ServiceAccount (the ServiceAccount
// admission plugin refuses the pod even though it mounts no token), or the
// first count of its ResourceQuota (quota admission refuses every pod while
// a quota's status is unknown, which under load lasts seconds). The API
// gives neither case a reason of its own, so they are told by their
// messages. Neither is a failure to back off from.
func NamespaceSettling(err error) (waitingFor string, ok bool) {
	if !apierrors.IsForbidden(err) {
		return "", false
	}
	switch msg := err.Error(); {
	case strings.Contains(msg, "error looking up service account"):
		return "the namespace's default ServiceAccount, which the controller manager creates", true
	case strings.Contains(msg, "status unknown for quota"):
		return "the controller manager's first count of the namespace's ResourceQuota", true
	}
	return "", false
}

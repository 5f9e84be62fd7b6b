package environment

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
// it is not complete yet, and says what the pod waits for: the namespace's
// default ServiceAccount (the ServiceAccount admission plugin refuses the
// pod even though it mounts no token), or the first count of its
// ResourceQuota (quota admission refuses every pod while a quota's status
// is unknown, which under load lasts seconds). The API gives neither case
// a reason of its own, so they are told by their messages. Neither is a
// failure to back off from.
func NamespaceSettling(err error) (waitingFor string, ok bool) {
	if !apierrors.IsForbidden(err) {
		return "", false
	}
	switch msg := err.Error(); {
	case MissingDefaultServiceAccount(err):
		return "the namespace's default ServiceAccount", true
	case strings.Contains(msg, "status unknown for quota"):
		return "the controller manager's first count of the namespace's ResourceQuota", true
	}
	return "", false
}

// MissingDefaultServiceAccount tells a pod refused because its namespace
// has no default ServiceAccount yet.
func MissingDefaultServiceAccount(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "error looking up service account")
}

// CreateDefaultServiceAccount gives a new namespace its default
// ServiceAccount, which the API server wants before it admits a pod there,
// rather than leaving it to the controller manager. That controller makes
// them one at a time (a single worker): when namespaces are created faster
// than it keeps up (thousands of sandboxes started at once), every pod
// waits behind it, and each refused create first holds an API server
// request for a second and more of retried lookups. It can also miss a
// namespace deleted and created again under one name for good
// (kubernetes/kubernetes#46652). One the controller manager made first is
// left as it is.
func CreateDefaultServiceAccount(ctx context.Context, c client.Client, namespace string) error {
	err := c.Create(ctx, DefaultServiceAccount(namespace))
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("failed to create the default ServiceAccount of namespace %s: %w", namespace, err)
	}
	return nil
}

// DefaultServiceAccount is the ServiceAccount the controller manager gives
// every namespace, as the reconciler makes it for the namespaces it
// creates. It mounts no token, as the sandbox's pods do not.
func DefaultServiceAccount(namespace string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{
		ObjectMeta:                   metav1.ObjectMeta{Name: "default", Namespace: namespace},
		AutomountServiceAccountToken: ptr.To(false),
	}
}

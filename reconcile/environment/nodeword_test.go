package environment

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The newest warning about this very pod is the node's word: not one about
// the pod of the same name before a stop and start, not a Normal event,
// and a failure before newer advice.
func TestNewestWarning(t *testing.T) {
	pod := &corev1.Pod{}
	pod.UID = "this"
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	event := func(uid types.UID, kind, reason string, last time.Time) corev1.Event {
		return corev1.Event{InvolvedObject: corev1.ObjectReference{UID: uid}, Type: kind, Reason: reason,
			Source: corev1.EventSource{Component: "kubelet"}, LastTimestamp: metav1.NewTime(last)}
	}
	events := []corev1.Event{
		event("this", corev1.EventTypeWarning, "FailedMount", t0),
		event("this", corev1.EventTypeWarning, "FailedCreatePodSandBox", t0.Add(time.Minute)),
		event("this", corev1.EventTypeNormal, "Pulled", t0.Add(2*time.Minute)),
		event("this", corev1.EventTypeWarning, "MissingClusterDNS", t0.Add(2*time.Minute)),
		event("before", corev1.EventTypeWarning, "FailedKillPod", t0.Add(3*time.Minute)),
	}
	if got := NewestWarning(events, pod); got == nil || got.Reason != "FailedCreatePodSandBox" || got.From != "kubelet" {
		t.Errorf("newest warning %+v, want the kubelet's FailedCreatePodSandBox", got)
	}
	if got := NewestWarning(events[2:3], pod); got != nil {
		t.Errorf("newest warning of Normal events only: %+v, want none", got)
	}
}

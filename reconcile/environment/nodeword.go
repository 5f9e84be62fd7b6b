package environment

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NodeWord is the newest warning recorded about a pod: what the kubelet
// said when it could not start or stop it (FailedCreatePodSandBox,
// FailedMount, FailedKillPod, ...). The pod's status has none of it: a pod
// whose runtime handler is missing stays Pending with its container
// "ContainerCreating", and one the node cannot tear down stays
// Terminating, both without a word.
type NodeWord struct {
	// From is who said it (kubelet, default-scheduler).
	From, Reason, Message string
	// Last is when it was last said.
	Last time.Time
}

func (w *NodeWord) String() string {
	return fmt.Sprintf("%s says %s: %s", w.From, w.Reason, w.Message)
}

// ReadNodeWord reads the newest warning about the pod, nil when there is
// none. The events are read from the API server (no cache holds them),
// from the pod's namespace: a sandbox's or a member's own, which holds a
// handful.
func ReadNodeWord(ctx context.Context, api client.Reader, pod *corev1.Pod) (*NodeWord, error) {
	events := &corev1.EventList{}
	if err := api.List(ctx, events, client.InNamespace(pod.Namespace)); err != nil {
		return nil, fmt.Errorf("failed to list the events of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return NewestWarning(events.Items, pod), nil
}

// NewestWarning picks the newest warning about this very pod (a pod of the
// same name before a stop and start has another UID), a failure (Failed*:
// FailedCreatePodSandBox, FailedMount, FailedKillPod, ...) before any other:
// the kubelet repeats advice such as MissingClusterDNS on every sync, and
// it would hide the failure that keeps the pod from starting.
func NewestWarning(events []corev1.Event, pod *corev1.Pod) *NodeWord {
	var newest *NodeWord
	for i := range events {
		ev := &events[i]
		if ev.InvolvedObject.UID != pod.UID || ev.Type != corev1.EventTypeWarning {
			continue
		}
		w := &NodeWord{From: ev.Source.Component, Reason: ev.Reason, Message: ev.Message, Last: lastSeen(ev)}
		if w.From == "" {
			w.From = ev.ReportingController
		}
		if newest == nil || (w.failure() && !newest.failure()) || (w.failure() == newest.failure() && w.Last.After(newest.Last)) {
			newest = w
		}
	}
	return newest
}

// failure tells a warning that something failed from advice.
func (w *NodeWord) failure() bool { return strings.HasPrefix(w.Reason, "Failed") }

// lastSeen is when an event was last recorded, whichever of the event
// APIs' fields recorded it.
func lastSeen(ev *corev1.Event) time.Time {
	switch {
	case ev.Series != nil:
		return ev.Series.LastObservedTime.Time
	case !ev.LastTimestamp.IsZero():
		return ev.LastTimestamp.Time
	}
	return ev.EventTime.Time
}

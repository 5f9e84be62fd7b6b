package nodepool

import (
	"errors"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// want is the expected status of a condition: "" means absent.
type wantConditions struct {
	ready, readyReason, reconciling, stalled string
	messageHas                               []string
}

func TestSetStatus(t *testing.T) {
	tests := []struct {
		name                 string
		o                    outcome
		wantNodes, wantReady int32
		wantObserved         int64
		wantRuntimeClass     string
		want                 wantConditions
	}{{
		name:      "applied, some node Ready",
		o:         outcome{runtimeClass: "gvisor", nodes: &nodeReport{matching: 3, ready: 2}},
		wantNodes: 3, wantReady: 2, wantObserved: 3, wantRuntimeClass: "gvisor",
		want: wantConditions{ready: "True", readyReason: v1.ReasonSucceeded, messageHas: []string{"2 of 3 nodes Ready"}},
	}, {
		name:         "the selector matches nothing",
		o:            outcome{runtimeClass: "gvisor", nodes: &nodeReport{}},
		wantObserved: 3, wantRuntimeClass: "gvisor",
		want: wantConditions{ready: "False", readyReason: v1.ReasonNoReadyNodes,
			messageHas: []string{"matched 0 nodes, none Ready", "cannot schedule"}},
	}, {
		name:      "matching nodes, none Ready",
		o:         outcome{runtimeClass: "gvisor", nodes: &nodeReport{matching: 2}},
		wantNodes: 2, wantObserved: 3, wantRuntimeClass: "gvisor",
		want: wantConditions{ready: "False", readyReason: v1.ReasonNoReadyNodes, messageHas: []string{"matched 2 nodes, none Ready"}},
	}, {
		name: "a node held by another pool stalls",
		o: outcome{runtimeClass: "gvisor", nodes: &nodeReport{matching: 2, ready: 2,
			conflicts: []nodeConflict{{Node: "node-1", Pool: "kata"}}}},
		wantNodes: 2, wantReady: 2, wantObserved: 3, wantRuntimeClass: "gvisor",
		want: wantConditions{ready: "False", readyReason: v1.ReasonNodeConflict, stalled: "True",
			messageHas: []string{"node node-1 belongs to NodePool kata"}},
	}, {
		name:      "a foreign RuntimeClass stalls and is not reported as the pool's; nodes were not looked at",
		o:         outcome{runtimeClassConflict: "RuntimeClass gvisor already exists with no controller"},
		wantNodes: 5, wantReady: 4, wantObserved: 3,
		want: wantConditions{ready: "False", readyReason: v1.ReasonRuntimeClassConflict, stalled: "True",
			messageHas: []string{"RuntimeClass gvisor already exists"}},
	}, {
		name:      "an error retries: Reconciling, no new observedGeneration, counts kept",
		o:         outcome{err: errors.New("failed to list nodes: boom")},
		wantNodes: 5, wantReady: 4, wantObserved: 2, wantRuntimeClass: "gvisor",
		want: wantConditions{ready: "False", readyReason: v1.ReasonReconciliationFailed, reconciling: "True",
			messageHas: []string{"failed to list nodes: boom"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := testPool(v1.NodePoolSpec{})
			// A pool seen before: last status of generation 2, and the
			// Reconciling the start of this run set.
			pool.Status = v1.NodePoolStatus{ObservedGeneration: 2, RuntimeClassName: "gvisor", Nodes: 5, ReadyNodes: 4}
			conditions.MarkReconciling(pool, v1.ReasonProgressing, "reconciling generation 3")

			setStatus(pool, tt.o)

			if pool.Status.Nodes != tt.wantNodes || pool.Status.ReadyNodes != tt.wantReady {
				t.Errorf("nodes/readyNodes = %d/%d, want %d/%d", pool.Status.Nodes, pool.Status.ReadyNodes, tt.wantNodes, tt.wantReady)
			}
			if pool.Status.ObservedGeneration != tt.wantObserved {
				t.Errorf("observedGeneration = %d, want %d", pool.Status.ObservedGeneration, tt.wantObserved)
			}
			if pool.Status.RuntimeClassName != tt.wantRuntimeClass {
				t.Errorf("runtimeClassName = %q, want %q", pool.Status.RuntimeClassName, tt.wantRuntimeClass)
			}
			checkCondition(t, pool, v1.ReadyCondition, tt.want.ready)
			checkCondition(t, pool, v1.ReconcilingCondition, tt.want.reconciling)
			checkCondition(t, pool, v1.StalledCondition, tt.want.stalled)
			if got := conditions.GetReason(pool, v1.ReadyCondition); got != tt.want.readyReason {
				t.Errorf("Ready reason = %q, want %q", got, tt.want.readyReason)
			}
			msg := conditions.GetMessage(pool, v1.ReadyCondition)
			for _, part := range tt.want.messageHas {
				if !strings.Contains(msg, part) {
					t.Errorf("Ready message %q does not contain %q", msg, part)
				}
			}
			for _, c := range pool.Status.Conditions {
				if c.ObservedGeneration != pool.Generation {
					t.Errorf("condition %s observedGeneration = %d, want %d", c.Type, c.ObservedGeneration, pool.Generation)
				}
			}
		})
	}
}

func checkCondition(t *testing.T, pool *v1.NodePool, conditionType, want string) {
	t.Helper()
	c := conditions.Get(pool, conditionType)
	switch {
	case want == "" && c != nil:
		t.Errorf("condition %s = %s (%s), want absent", conditionType, c.Status, c.Reason)
	case want != "" && c == nil:
		t.Errorf("condition %s absent, want %s", conditionType, want)
	case c != nil && string(c.Status) != want:
		t.Errorf("condition %s = %s, want %s", conditionType, c.Status, want)
	}
}

func TestConflictMessage(t *testing.T) {
	var conflicts []nodeConflict
	for _, n := range []string{"n1", "n2", "n3", "n4", "n5", "n6", "n7"} {
		conflicts = append(conflicts, nodeConflict{Node: n, Pool: "kata"})
	}
	msg := conflictMessage(conflicts)
	for _, part := range []string{"node n1 belongs to NodePool kata", "node n5 belongs", "and 2 more", "change either pool's nodeSelector"} {
		if !strings.Contains(msg, part) {
			t.Errorf("message %q does not contain %q", msg, part)
		}
	}
	if strings.Contains(msg, "n6") {
		t.Errorf("message %q names more than %d nodes", msg, maxListed)
	}
}

func TestRuntimeClassConflictMessage(t *testing.T) {
	plain := &metav1.ObjectMeta{Name: "gvisor"}
	if got := runtimeClassConflictMessage(plain); !strings.Contains(got, "RuntimeClass gvisor already exists with no controller") {
		t.Errorf("message = %q", got)
	}
	owned := &metav1.ObjectMeta{Name: "gvisor", OwnerReferences: []metav1.OwnerReference{{
		Kind: "Deployment", Name: "installer", Controller: ptr.To(true),
	}}}
	if got := runtimeClassConflictMessage(owned); !strings.Contains(got, "controller Deployment installer") {
		t.Errorf("message = %q", got)
	}
}

func TestReadyEvent(t *testing.T) {
	ready := &metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: v1.ReasonSucceeded, Message: "ok"}
	notReady := &metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: v1.ReasonNoReadyNodes, Message: "none"}
	conflict := &metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: v1.ReasonNodeConflict, Message: "taken"}
	tests := []struct {
		name          string
		before, after *metav1.Condition
		wantType      string
		wantReason    string
	}{
		{"first Ready", nil, ready, corev1.EventTypeNormal, v1.ReasonSucceeded},
		{"first not Ready", nil, notReady, corev1.EventTypeWarning, v1.ReasonNoReadyNodes},
		{"became not Ready", ready, notReady, corev1.EventTypeWarning, v1.ReasonNoReadyNodes},
		{"became Ready", notReady, ready, corev1.EventTypeNormal, v1.ReasonSucceeded},
		{"still Ready", ready, ready, "", ""},
		{"still not Ready, for another reason", notReady, conflict, "", ""},
		{"no Ready condition", nil, nil, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eventType, reason, _, ok := readyEvent(tt.before, tt.after)
			if ok != (tt.wantType != "") || eventType != tt.wantType || reason != tt.wantReason {
				t.Errorf("readyEvent() = %q %q %v, want %q %q", eventType, reason, ok, tt.wantType, tt.wantReason)
			}
		})
	}
}

func TestStartsGeneration(t *testing.T) {
	tests := []struct {
		name     string
		prepare  func(*v1.NodePool)
		observed int64
		want     bool
	}{
		{"a new pool", func(*v1.NodePool) {}, 0, true},
		{"a new generation of a reconciled pool", func(p *v1.NodePool) {
			p.Generation = 2
			conditions.MarkTrue(p, v1.ReadyCondition, v1.ReasonSucceeded, "ok")
			p.Generation = 3
		}, 2, true},
		{"a new generation while retrying the previous one", func(p *v1.NodePool) {
			p.Generation = 2
			conditions.MarkReconciling(p, v1.ReasonProgressingWithRetry, "retrying")
			p.Generation = 3
		}, 1, true},
		{"a retry of this generation", func(p *v1.NodePool) {
			conditions.MarkReconciling(p, v1.ReasonProgressingWithRetry, "retrying")
		}, 2, false},
		{"the generation is observed", func(*v1.NodePool) {}, 3, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := testPool(v1.NodePoolSpec{})
			tt.prepare(pool)
			pool.Status.ObservedGeneration = tt.observed
			if got := startsGeneration(pool); got != tt.want {
				t.Errorf("startsGeneration() = %v, want %v", got, tt.want)
			}
		})
	}
}

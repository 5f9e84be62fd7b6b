package warmpool

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/problem"
)

func members(ready, unschedulable, starting int) []environment.Member {
	var out []environment.Member
	for range ready {
		out = append(out, environment.Member{Namespace: &corev1.Namespace{}, Complete: true, Ready: true})
	}
	for range unschedulable {
		out = append(out, environment.Member{Namespace: &corev1.Namespace{}, Complete: true, Unschedulable: "0/3 nodes are available"})
	}
	for range starting {
		out = append(out, environment.Member{Namespace: &corev1.Namespace{}, Complete: true})
	}
	return out
}

func TestSetStatus(t *testing.T) {
	for _, tc := range []struct {
		name              string
		o                 outcome
		ready             metav1.ConditionStatus
		reason            string
		says              string
		reconciling       bool
		replicas, readies int32
	}{
		{name: "full", o: outcome{counted: true, want: 2, keep: members(2, 0, 0)},
			ready: metav1.ConditionTrue, reason: v1.ReasonPoolFull, says: "2 of 2 members Ready", replicas: 2, readies: 2},
		{name: "filling", o: outcome{counted: true, want: 3, keep: members(1, 0, 1)},
			ready: metav1.ConditionFalse, reason: v1.ReasonFilling, says: "1 of 3 members Ready", reconciling: true, replicas: 2, readies: 1},
		{name: "unschedulable, with the scheduler's words", o: outcome{counted: true, want: 2, keep: members(0, 2, 0)},
			ready: metav1.ConditionFalse, reason: v1.ReasonMembersUnschedulable, says: "2 cannot be scheduled: 0/3 nodes are available", reconciling: true, replicas: 2},
		{name: "not started by their node, with the kubelet's words", o: outcome{counted: true, want: 2, keep: members(0, 0, 2), notStarting: 2,
			word: "member sandbox-wp-x on node n1: kubelet says FailedCreatePodSandBox: no runtime"},
			ready: metav1.ConditionFalse, reason: v1.ReasonMembersNotStarting, says: "2 not started by their node for 30s: member sandbox-wp-x on node n1: kubelet says FailedCreatePodSandBox", reconciling: true, replicas: 2},
		{name: "unschedulable comes first", o: outcome{counted: true, want: 2, keep: members(0, 1, 1), notStarting: 1, word: "kubelet says FailedMount"},
			ready: metav1.ConditionFalse, reason: v1.ReasonMembersUnschedulable, says: "1 cannot be scheduled: 0/3 nodes are available; 1 not started", reconciling: true, replicas: 2},
		{name: "waiting for claims to pause", o: outcome{counted: true, want: 4, keep: members(1, 0, 0), deferred: time.Second},
			ready: metav1.ConditionFalse, reason: v1.ReasonFilling, says: "topping up when claims pause", reconciling: true, replicas: 1, readies: 1},
		{name: "a refused build, even when full", o: outcome{counted: true, want: 1, keep: members(1, 0, 0), buildErr: errors.New("quota exceeded")},
			ready: metav1.ConditionFalse, reason: v1.ReasonBuildFailed, says: "1 of 1 members Ready; quota exceeded", reconciling: true, replicas: 1, readies: 1},
		{name: "the template's problem", o: outcome{problem: problem.New(v1.ReasonTemplateNotFound, "no such template")},
			ready: metav1.ConditionFalse, reason: v1.ReasonTemplateNotFound, says: "no such template", replicas: 7, readies: 7},
		{name: "failed before counting keeps the counts", o: outcome{templateHash: "h", err: errors.New("list failed")},
			ready: metav1.ConditionTrue, reason: "Before", replicas: 7, readies: 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := &v1.WarmPool{ObjectMeta: metav1.ObjectMeta{Name: "python"}}
			pool.Status.Replicas, pool.Status.ReadyReplicas = 7, 7
			conditions.MarkTrue(pool, v1.ReadyCondition, "Before", "as the last pass left it")
			setStatus(pool, tc.o)
			got := conditions.Get(pool, v1.ReadyCondition)
			if got.Status != tc.ready || got.Reason != tc.reason || !strings.Contains(got.Message, tc.says) {
				t.Errorf("Ready = %s %s %q; want %s %s saying %q", got.Status, got.Reason, got.Message, tc.ready, tc.reason, tc.says)
			}
			if conditions.IsReconciling(pool) != tc.reconciling {
				t.Errorf("Reconciling = %v, want %v", conditions.IsReconciling(pool), tc.reconciling)
			}
			if pool.Status.Replicas != tc.replicas || pool.Status.ReadyReplicas != tc.readies {
				t.Errorf("replicas %d ready %d; want %d, %d", pool.Status.Replicas, pool.Status.ReadyReplicas, tc.replicas, tc.readies)
			}
			if pool.Status.Selector != "agentsandbox.dev/member=available,agentsandbox.dev/warm-pool=python" {
				t.Errorf("selector %q", pool.Status.Selector)
			}
		})
	}
}

func TestNextLook(t *testing.T) {
	failed := errors.New("failed")
	for _, tc := range []struct {
		name    string
		o       outcome
		want    ctrl.Result
		wantErr error
	}{
		{"nothing to wait for", outcome{}, ctrl.Result{}, nil},
		{"a failure backs off", outcome{err: failed, pending: true}, ctrl.Result{}, failed},
		{"a failed build backs off", outcome{buildErr: failed, settling: true}, ctrl.Result{}, failed},
		{"a namespace settling", outcome{settling: true, deferred: time.Minute}, ctrl.Result{RequeueAfter: time.Second}, nil},
		{"claims to pause", outcome{deferred: 300 * time.Millisecond, pending: true}, ctrl.Result{RequeueAfter: 300 * time.Millisecond}, nil},
		{"builds not seen yet", outcome{pending: true}, ctrl.Result{RequeueAfter: expectationTTL}, nil},
		{"a member placed and not started", outcome{verdictIn: 12 * time.Second}, ctrl.Result{RequeueAfter: 12 * time.Second}, nil},
		{"whichever comes first", outcome{pending: true, verdictIn: time.Minute}, ctrl.Result{RequeueAfter: expectationTTL}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.o.next()
			if got != tc.want || !errors.Is(err, tc.wantErr) {
				t.Errorf("next() = %+v, %v; want %+v, %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

package sandbox

import (
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

func TestIdleRuleOf(t *testing.T) {
	minutes := func(m int) *metav1.Duration { return &metav1.Duration{Duration: time.Duration(m) * time.Minute} }
	tests := []struct {
		name     string
		template *v1.Lifecycle
		own      *metav1.Duration
		want     idleRule
	}{
		{name: "no timeout anywhere", want: idleRule{wake: true}},
		{name: "the template's", template: &v1.Lifecycle{IdleTimeout: minutes(15)}, want: idleRule{timeout: 15 * time.Minute, wake: true}},
		{name: "a shorter own one", template: &v1.Lifecycle{IdleTimeout: minutes(15)}, own: minutes(5), want: idleRule{timeout: 5 * time.Minute, wake: true}},
		{name: "a longer own one is held to the template's", template: &v1.Lifecycle{IdleTimeout: minutes(15)}, own: minutes(60), want: idleRule{timeout: 15 * time.Minute, wake: true}},
		{name: "its own where the template has none", own: minutes(5), want: idleRule{timeout: 5 * time.Minute, wake: true}},
		{name: "no waking, deletion after a stop", template: &v1.Lifecycle{IdleTimeout: minutes(15), WakeOnConnect: ptr.To(false), DeleteAfterStopped: minutes(60)},
			want: idleRule{timeout: 15 * time.Minute, deleteAfterStopped: time.Hour}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tpl := &v1.SandboxTemplate{Spec: v1.SandboxTemplateSpec{Lifecycle: tt.template}}
			sbx := &v1.Sandbox{Spec: v1.SandboxSpec{IdleTimeout: tt.own}}
			if got := idleRuleOf(sbx, tpl); got != tt.want {
				t.Errorf("idleRuleOf = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestIdleStop(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(-ago)} }
	rule := idleRule{timeout: 10 * time.Minute, wake: true}
	running := func(ready time.Duration, annotation string) *v1.Sandbox {
		sbx := &v1.Sandbox{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: *at(time.Hour)}}
		sbx.Status.Phase, sbx.Status.ReadyAt = v1.SandboxPhaseRunning, at(ready)
		if annotation != "" {
			sbx.Annotations = map[string]string{v1.AnnotationLastActivity: annotation}
		}
		conditions.MarkTrue(sbx, v1.ReadyCondition, v1.ReasonPodReady, "ready")
		return sbx
	}
	idleStopped := func(stoppedAgo time.Duration, annotation string) *v1.Sandbox {
		sbx := running(time.Hour, annotation)
		sbx.Status.Phase, sbx.Status.StoppedAt = v1.SandboxPhaseStopped, at(stoppedAgo)
		conditions.MarkFalse(sbx, v1.ReadyCondition, v1.ReasonIdleTimeout, "stopped")
		return sbx
	}
	starting := running(time.Hour, "")
	starting.Status.Phase = v1.SandboxPhaseStarting
	tests := []struct {
		name        string
		sbx         *v1.Sandbox
		rule        idleRule
		stop, woken bool
	}{
		{name: "ready a minute ago", sbx: running(time.Minute, ""), rule: rule},
		{name: "ready long ago, never used", sbx: running(time.Hour, ""), rule: rule, stop: true},
		{name: "used a minute ago", sbx: running(time.Hour, now.Add(-time.Minute).Format(time.RFC3339)), rule: rule},
		{name: "used eleven minutes ago", sbx: running(time.Hour, now.Add(-11*time.Minute).Format(time.RFC3339)), rule: rule, stop: true},
		{name: "a record far in the future is ignored", sbx: running(time.Hour, now.Add(time.Hour).Format(time.RFC3339)), rule: rule, stop: true},
		{name: "a record a little ahead counts", sbx: running(time.Hour, now.Add(30*time.Second).Format(time.RFC3339)), rule: rule},
		{name: "a record that does not parse is ignored", sbx: running(time.Hour, "yesterday"), rule: rule, stop: true},
		{name: "no timeout", sbx: running(time.Hour, ""), rule: idleRule{wake: true}},
		{name: "starting for long is not idle", sbx: starting, rule: rule},
		{name: "idle-stopped stays stopped", sbx: idleStopped(time.Minute, now.Add(-20*time.Minute).Format(time.RFC3339)), rule: rule, stop: true},
		{name: "used after the idle stop: woken", sbx: idleStopped(time.Minute, now.Format(time.RFC3339)), rule: rule, woken: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stop, woken := tt.rule.idleStop(tt.sbx, now)
			if stop != tt.stop || woken != tt.woken {
				t.Errorf("idleStop = stop %v, woken %v; want %v, %v", stop, woken, tt.stop, tt.woken)
			}
		})
	}
}

func TestRecordIdle(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	rule := idleRule{timeout: 10 * time.Minute, wake: true, deleteAfterStopped: time.Hour}
	sbx := &v1.Sandbox{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}
	sbx.Status.Phase, sbx.Status.ReadyAt = v1.SandboxPhaseRunning, &metav1.Time{Time: now.Add(-time.Minute)}
	rule.recordIdle(sbx, false, now)
	if !sbx.Status.LastActivityAt.Equal(sbx.Status.ReadyAt) || sbx.Status.Idle == nil || sbx.Status.Idle.StopAt == nil ||
		!sbx.Status.Idle.StopAt.Time.Equal(now.Add(9*time.Minute)) || sbx.Status.StoppedAt != nil || sbx.Status.DeleteAt != nil {
		t.Errorf("running: %+v", sbx.Status)
	}
	if left := untilIdleStop(sbx, now); left != 9*time.Minute {
		t.Errorf("untilIdleStop = %s, want 9m", left)
	}
	sbx.Status.Phase = v1.SandboxPhaseStopped
	rule.recordIdle(sbx, true, now)
	if sbx.Status.Idle.StopAt != nil || !sbx.Status.StoppedAt.Time.Equal(now) || !sbx.Status.DeleteAt.Time.Equal(now.Add(time.Hour)) {
		t.Errorf("stopped: %+v", sbx.Status)
	}
	// The stop time is kept by later passes, so the deletion does not move.
	rule.recordIdle(sbx, true, now.Add(time.Minute))
	if !sbx.Status.StoppedAt.Time.Equal(now) {
		t.Errorf("a later pass moved stoppedAt to %v", sbx.Status.StoppedAt)
	}
	if left, due := rule.deletion(sbx, v1.SandboxStopped, now.Add(time.Hour)); !due || left > 0 {
		t.Errorf("deletion an hour after the stop: left %s, due %v", left, due)
	}
	if _, due := rule.deletion(sbx, v1.SandboxRunning, now.Add(2*time.Hour)); due {
		t.Error("a sandbox to run again is due for deletion")
	}
}

package sandbox

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// lifetime is when a sandbox's lifetime ends and what happens then. The
// sandbox's own shutdownTime or ttl wins over the template's default.
type lifetime struct {
	end    *metav1.Time
	policy v1.ShutdownPolicy
}

func lifetimeOf(sbx *v1.Sandbox, tpl *v1.SandboxTemplate) lifetime {
	lt := lifetime{policy: v1.ShutdownPolicyStop}
	var def *v1.Lifecycle
	if tpl != nil {
		def = tpl.Spec.Lifecycle
	}
	if def != nil && def.ShutdownPolicy != "" {
		lt.policy = def.ShutdownPolicy
	}
	if sbx.Spec.ShutdownPolicy != "" {
		lt.policy = sbx.Spec.ShutdownPolicy
	}
	switch {
	case sbx.Spec.ShutdownTime != nil:
		lt.end = sbx.Spec.ShutdownTime.DeepCopy()
	case sbx.Spec.TTL != nil:
		lt.end = &metav1.Time{Time: sbx.CreationTimestamp.Add(sbx.Spec.TTL.Duration)}
	case def != nil && def.TTL != nil:
		lt.end = &metav1.Time{Time: sbx.CreationTimestamp.Add(def.TTL.Duration)}
	}
	return lt
}

// expired reports whether the lifetime has ended at now, and otherwise how
// long until it does (zero without an end).
func (lt lifetime) expired(now time.Time) (bool, time.Duration) {
	if lt.end == nil {
		return false, 0
	}
	left := lt.end.Sub(now)
	return left <= 0, left
}

// idleRule is what the sandbox's lifecycle says of idleness: when an
// unused sandbox stops, whether a client may wake it, and when a stopped
// sandbox is deleted.
type idleRule struct {
	// timeout is zero when the sandbox never stops for idleness.
	timeout time.Duration
	wake    bool
	// deleteAfterStopped is zero when a stopped sandbox is kept.
	deleteAfterStopped time.Duration
}

// idleRuleOf is the template's rule, with the sandbox's idleTimeout where
// it is shorter: an owner may make their sandbox stop sooner, not keep it
// longer than the platform team allows.
func idleRuleOf(sbx *v1.Sandbox, tpl *v1.SandboxTemplate) idleRule {
	var def *v1.Lifecycle
	if tpl != nil {
		def = tpl.Spec.Lifecycle
	}
	rule := idleRule{wake: def.WakesOnConnect()}
	if def != nil && def.IdleTimeout != nil {
		rule.timeout = def.IdleTimeout.Duration
	}
	if own := sbx.Spec.IdleTimeout; own != nil && own.Duration > 0 && (rule.timeout == 0 || own.Duration < rule.timeout) {
		rule.timeout = own.Duration
	}
	if def != nil && def.DeleteAfterStopped != nil {
		rule.deleteAfterStopped = def.DeleteAfterStopped.Duration
	}
	return rule
}

// clockSkew is how far in the future a client's activity record may be
// and still count: a client's clock may run a little ahead of the
// reconciler's, but a record far ahead would keep a sandbox from ever
// stopping.
const clockSkew = time.Minute

// reportedActivity is the clients' record of the sandbox's last use
// (v1.AnnotationLastActivity), nil when there is none, it does not parse,
// or it lies further in the future than clockSkew.
func reportedActivity(sbx *v1.Sandbox, now time.Time) *metav1.Time {
	at, err := time.Parse(time.RFC3339Nano, sbx.Annotations[v1.AnnotationLastActivity])
	if err != nil || at.After(now.Add(clockSkew)) {
		return nil
	}
	return &metav1.Time{Time: at}
}

// lastActivity is the latest use of the sandbox known: the clients'
// record, its claim, and the last time it became Ready (so a sandbox's
// clock starts when it is claimed or started, and again when it is woken
// or restarted).
func lastActivity(sbx *v1.Sandbox, now time.Time) *metav1.Time {
	latest := sbx.CreationTimestamp.DeepCopy()
	for _, t := range []*metav1.Time{reportedActivity(sbx, now), sbx.Status.ClaimedAt, sbx.Status.ReadyAt} {
		if t != nil && t.After(latest.Time) {
			latest = t.DeepCopy()
		}
	}
	return latest
}

// idleStop decides whether a sandbox whose spec says Running stops for
// idleness at now. A Running sandbox stops once its last activity is a
// timeout old. One stopped (or stopping) for idleness stays stopped until
// a client records activity after the stop (its wake); a sandbox that is
// starting is never idle, however long the start takes. woken reports the
// wake.
func (rule idleRule) idleStop(sbx *v1.Sandbox, now time.Time) (stop, woken bool) {
	if rule.timeout <= 0 {
		return false, false
	}
	if sbx.IdleStopped() {
		reported := reportedActivity(sbx, now)
		woken = sbx.Status.StoppedAt != nil && reported != nil && reported.After(sbx.Status.StoppedAt.Time)
		return !woken, woken
	}
	if sbx.Status.Phase != v1.SandboxPhaseRunning {
		return false, false
	}
	return !now.Before(lastActivity(sbx, now).Add(rule.timeout)), false
}

// recordIdle sets the status fields of idleness and stopping from the
// pass's outcome: the last activity, the idle stop that applies and when
// it comes, and when a stopped sandbox stopped and will be deleted. It runs
// after setStatus, so a pass that makes the sandbox Ready counts that as
// activity in the same status write.
func (rule idleRule) recordIdle(sbx *v1.Sandbox, stopping bool, now time.Time) {
	sbx.Status.LastActivityAt = lastActivity(sbx, now)
	sbx.Status.Idle = nil
	if rule.timeout > 0 {
		sbx.Status.Idle = &v1.IdleStatus{Timeout: metav1.Duration{Duration: rule.timeout}, WakeOnConnect: rule.wake}
		if sbx.Status.Phase == v1.SandboxPhaseRunning {
			sbx.Status.Idle.StopAt = &metav1.Time{Time: sbx.Status.LastActivityAt.Add(rule.timeout)}
		}
	}
	switch {
	case !stopping:
		sbx.Status.StoppedAt = nil
	case sbx.Status.StoppedAt == nil:
		sbx.Status.StoppedAt = &metav1.Time{Time: now}
	}
	sbx.Status.DeleteAt = nil
	if sbx.Status.StoppedAt != nil && rule.deleteAfterStopped > 0 {
		sbx.Status.DeleteAt = &metav1.Time{Time: sbx.Status.StoppedAt.Add(rule.deleteAfterStopped)}
	}
}

// untilIdleStop is how long until a Running sandbox stops for idleness
// (zero when it never does, or is not Running).
func untilIdleStop(sbx *v1.Sandbox, now time.Time) time.Duration {
	if sbx.Status.Idle == nil || sbx.Status.Idle.StopAt == nil {
		return 0
	}
	return max(sbx.Status.Idle.StopAt.Sub(now), time.Second)
}

// deletion says whether a sandbox that stays stopped is due for deletion
// (lifecycle.deleteAfterStopped after status.stoppedAt), and otherwise how
// long until it is (zero when it never is).
func (rule idleRule) deletion(sbx *v1.Sandbox, desired v1.SandboxState, now time.Time) (time.Duration, bool) {
	if rule.deleteAfterStopped <= 0 || desired != v1.SandboxStopped || sbx.Status.StoppedAt == nil {
		return 0, false
	}
	left := sbx.Status.StoppedAt.Add(rule.deleteAfterStopped).Sub(now)
	return left, left <= 0
}

// applyLifecycle applies the lifetime and the idle rule: it returns the
// state the sandbox is to be in now, whether its lifetime ended and
// whether it stops for idleness, and sets when it next needs a look. A
// sandbox whose lifetime (with shutdownPolicy Delete) or time stopped
// (lifecycle.deleteAfterStopped) is over is deleted, and o says so.
func (r *Reconciler) applyLifecycle(ctx context.Context, sbx *v1.Sandbox, lt lifetime, o *outcome) (desired v1.SandboxState, expired, idle bool) {
	now := time.Now()
	expired, left := lt.expired(now)
	if expired && lt.policy == v1.ShutdownPolicyDelete {
		r.recorder.Eventf(sbx, nil, corev1.EventTypeNormal, v1.ReasonExpired, "Delete", "lifetime ended at %s; deleting the sandbox", lt.end.UTC().Format(time.RFC3339))
		o.deleted, o.err = true, client.IgnoreNotFound(r.Delete(ctx, sbx))
		return "", expired, false
	}
	desired = sbx.Spec.State
	if expired {
		desired = v1.SandboxStopped
	}
	if desired == v1.SandboxRunning {
		var woken bool
		idle, woken = o.rule.idleStop(sbx, now)
		r.noteIdleTransition(sbx, o.rule, idle, woken, now)
	}
	if idle {
		desired = v1.SandboxStopped
	}
	untilDeleted, due := o.rule.deletion(sbx, desired, now)
	if due {
		r.recorder.Eventf(sbx, nil, corev1.EventTypeNormal, v1.ReasonDeletedAfterStopped, "Delete", "stopped since %s, longer than lifecycle.deleteAfterStopped (%s); deleting the sandbox",
			sbx.Status.StoppedAt.UTC().Format(time.RFC3339), o.rule.deleteAfterStopped)
		o.deleted, o.err = true, client.IgnoreNotFound(r.Delete(ctx, sbx))
		return desired, expired, idle
	}
	o.left = sooner(left, untilDeleted)
	return desired, expired, idle
}

// noteIdleTransition tells of a sandbox that stops for idleness now (an
// event, the idle-stop counter) and remembers when one was woken, for the
// wake latency observed when it is Ready again.
func (r *Reconciler) noteIdleTransition(sbx *v1.Sandbox, rule idleRule, idle, woken bool, now time.Time) {
	switch {
	case idle && !sbx.IdleStopped():
		idleStops.Inc()
		r.recorder.Eventf(sbx, nil, corev1.EventTypeNormal, v1.ReasonIdleTimeout, "Stop", "no use through a client since %s (idle timeout %s); stopping the sandbox, its workspace kept",
			lastActivity(sbx, now).UTC().Format(time.RFC3339), rule.timeout)
	case woken:
		r.memory.woken(sbx.UID, reportedActivity(sbx, now).Time)
		r.recorder.Eventf(sbx, nil, corev1.EventTypeNormal, v1.ReasonWoken, "Start", "used again after stopping for idleness (last changed by %s); starting the sandbox", sbx.Annotations[v1.AnnotationChangedBy])
	}
}

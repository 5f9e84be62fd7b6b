package warmpool

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/problem"
)

// outcome is what one pass found and did: the input of the pool's status
// and of when to look again.
type outcome struct {
	// problem keeps the pool from being filled at all (its template).
	problem *problem.Problem
	// templateHash is the content hash of the template members are built
	// from; empty when the template was not read.
	templateHash string
	// counted says keep holds the pool's members; a pass that failed
	// before it knew them leaves the counts as they were.
	counted bool
	want    int
	// keep are the members the pool keeps.
	keep    []environment.Member
	deleted deletions
	// deferred is how long the rest of the top-up waits for claims to
	// pause; zero when nothing waits.
	deferred time.Duration
	// settling: a build was refused because its namespace was too new, and
	// is tried again in a moment.
	settling bool
	// pending: builds the cache does not show complete yet, which the
	// watch brings back (or expectationTTL gives up on).
	pending bool
	// buildErr is the first build that failed; the others went on.
	buildErr error
	// notStarting counts the members whose pods their node has not
	// started for NotTransient since they were placed, and word is the
	// node's reason for one of them.
	notStarting int
	word        string
	// verdictIn is how soon a member placed and not yet started has been
	// so for NotTransient; zero when none is on its way.
	verdictIn time.Duration
	// takenIn is how soon a claimed member not relabelled yet has been so
	// for abandonedClaim; zero when none is.
	takenIn time.Duration
	// err is a failure before the pool's members were known.
	err error
}

// setStatus writes the outcome into the pool's status: Ready when as many
// members as the pool keeps are Ready; otherwise why not, the scheduler's
// reason for the oldest unschedulable member and a refused build included.
// A pool short because it waits for claims to pause says so.
func setStatus(pool *v1.WarmPool, o outcome) {
	pool.Status.ObservedGeneration = pool.Generation
	pool.Status.Selector = labels.SelectorFromSet(labels.Set{v1.LabelWarmPool: pool.Name, v1.LabelMember: v1.MemberAvailable}).String()
	if o.problem != nil {
		o.problem.Mark(pool)
		return
	}
	if o.templateHash != "" {
		pool.Status.TemplateHash = o.templateHash
	}
	if !o.counted {
		return
	}
	ready, unschedulable, why := 0, 0, ""
	for _, m := range o.keep {
		switch {
		case m.Ready:
			ready++
		case m.Unschedulable != "":
			if unschedulable++; why == "" {
				why = m.Unschedulable
			}
		}
	}
	pool.Status.Replicas, pool.Status.ReadyReplicas = int32(len(o.keep)), int32(ready)
	if ready >= o.want && o.buildErr == nil {
		conditions.MarkTrue(pool, v1.ReadyCondition, v1.ReasonPoolFull, "%d of %d members Ready", ready, o.want)
		conditions.Delete(pool, v1.ReconcilingCondition)
		return
	}
	reason, msg := v1.ReasonFilling, fmt.Sprintf("%d of %d members Ready", ready, o.want)
	if unschedulable > 0 {
		reason = v1.ReasonMembersUnschedulable
		msg += fmt.Sprintf("; %d cannot be scheduled: %s", unschedulable, why)
	}
	if o.notStarting > 0 {
		if reason == v1.ReasonFilling {
			reason = v1.ReasonMembersNotStarting
		}
		msg += fmt.Sprintf("; %d not started by their node for %s: %s", o.notStarting, v1.NotTransient, o.word)
	}
	if o.deferred > 0 {
		msg += "; topping up when claims pause"
	}
	if o.buildErr != nil {
		reason, msg = v1.ReasonBuildFailed, fmt.Sprintf("%s; %v", msg, o.buildErr)
	}
	conditions.MarkFalse(pool, v1.ReadyCondition, reason, "%s", msg)
	conditions.MarkReconciling(pool, reason, "%s", msg)
}

// next is the one decision of when to look at the pool again. A failure
// goes back to the workqueue's backoff; a build refused for a namespace
// too new comes back in a second; a top-up held back for claims comes back
// when they should have paused; builds not yet seen complete come back
// after expectationTTL, in case the watch never shows them; a member
// placed and not yet started comes back when it has been so for
// NotTransient (its pod's status may never change to bring it back).
func (o outcome) next() (ctrl.Result, error) {
	var after time.Duration
	switch {
	case o.err != nil:
		return ctrl.Result{}, o.err
	case o.buildErr != nil:
		return ctrl.Result{}, o.buildErr
	case o.settling:
		after = time.Second
	case o.deferred > 0:
		after = o.deferred
	case o.pending:
		after = expectationTTL
	}
	for _, in := range []time.Duration{o.verdictIn, o.takenIn} {
		if in > 0 && (after == 0 || in < after) {
			after = in
		}
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

// notStarted finds the kept members whose pods were placed on a node
// NotTransient ago or more and have not started, and reads the node's
// word on the oldest; it also says how soon the next member on its way
// turns NotTransient. Reading events costs a request, made only when a
// member is that late.
func (r *Reconciler) notStarted(ctx context.Context, o *outcome, now time.Time) {
	var oldest *corev1.Pod
	for _, m := range o.keep {
		if m.Ready || m.Pod == nil || m.Pod.DeletionTimestamp != nil || m.Pod.Status.Phase == corev1.PodFailed {
			continue
		}
		scheduled := environment.ScheduledAt(m.Pod)
		if scheduled.IsZero() {
			continue
		}
		if left := scheduled.Add(v1.NotTransient).Sub(now); left > 0 {
			if o.verdictIn == 0 || left < o.verdictIn {
				o.verdictIn = left
			}
			continue
		}
		o.notStarting++
		if oldest == nil || scheduled.Before(environment.ScheduledAt(oldest)) {
			oldest = m.Pod
		}
	}
	if oldest == nil {
		return
	}
	o.word = "node " + oldest.Spec.NodeName + " has not said why"
	word, err := environment.ReadNodeWord(ctx, r.apiReader, oldest)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "reading why a member does not start")
	}
	if word != nil {
		o.word = "member " + oldest.Namespace + " on node " + oldest.Spec.NodeName + ": " + word.String()
	}
}

// deletions counts the members a pass deleted, by why.
type deletions map[dropReason]int

// recordDeletions emits one event for the members a pass deleted.
func (r *Reconciler) recordDeletions(pool *v1.WarmPool, d deletions, want int) {
	var why []string
	total := 0
	for _, reason := range []struct {
		dropReason
		says string
	}{
		{rolled, "built from an earlier template"},
		{egressMoved, "given an earlier address of the egress gateway or of a Service"},
		{beyondReplicas, fmt.Sprintf("beyond replicas %d", want)},
	} {
		if n := d[reason.dropReason]; n > 0 {
			why = append(why, fmt.Sprintf("%d %s", n, reason.says))
			total += n
		}
	}
	if len(why) > 0 {
		r.recorder.Eventf(pool, nil, corev1.EventTypeNormal, v1.ReasonMembersDeleted, "Delete",
			"deleted %d members: %s", total, strings.Join(why, ", "))
	}
}

// recordReadyTransition emits an event when the pool runs into a problem
// (its template, members that cannot be scheduled, refused builds) or out
// of one. A pool going from full to filling and back as it is claimed from
// and topped up is its everyday work, and emits none.
func (r *Reconciler) recordReadyTransition(pool *v1.WarmPool, before *metav1.Condition) {
	after := conditions.Get(pool, v1.ReadyCondition)
	if after == nil || (before != nil && before.Reason == after.Reason) {
		return
	}
	switch {
	case troubled(after.Reason):
		r.recorder.Eventf(pool, nil, corev1.EventTypeWarning, after.Reason, "Reconcile", "%s", after.Message)
	case before != nil && troubled(before.Reason):
		r.recorder.Eventf(pool, nil, corev1.EventTypeNormal, after.Reason, "Reconcile", "%s; recovered from %s", after.Message, before.Reason)
	}
}

// troubled tells the reasons of a pool that cannot fill as declared.
func troubled(reason string) bool {
	return reason == v1.ReasonTemplateNotReady || reason == v1.ReasonTemplateNotFound || reason == v1.ReasonMembersUnschedulable ||
		reason == v1.ReasonMembersNotStarting || reason == v1.ReasonBuildFailed
}

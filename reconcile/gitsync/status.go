package gitsync

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/ssa"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/applier"
	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/source"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/problem"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/statuspatch"
)

// outcome is what one sync found and did.
type outcome struct {
	changes *ssa.ChangeSet
	// problem is why the sync stopped; nil when the revision is applied
	// and healthy.
	problem *problem.Problem
	// handled is the sync request this sync acted on, nil for none: a
	// request that arrives during the sync (a status patch returns the
	// newest annotations) is not, and starts the next sync.
	handled *string
	start   time.Time
}

// syncWithin runs one sync within spec.timeout, and words its problem for
// the status: whether the timeout ended it, and what the cluster keeps.
func (r *Reconciler) syncWithin(ctx context.Context, gs *v1.GitSync, patcher *statuspatch.Patcher) outcome {
	timeout := gs.Spec.TimeoutOrDefault()
	syncCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	o := outcome{handled: requestOf(gs), start: time.Now()}
	o.changes, o.problem = r.sync(syncCtx, gs, patcher)
	if p := o.problem; p != nil {
		if errors.Is(syncCtx.Err(), context.DeadlineExceeded) {
			p.Message += fmt.Sprintf(" (spec.timeout %s exceeded)", timeout)
		}
		if gs.Status.LastAppliedRevision != "" && p.Reason != v1.ReasonHealthCheckFailed {
			p.Message += "; the cluster keeps revision " + gs.Status.LastAppliedRevision
		}
	}
	return o
}

// setStatus records a sync's outcome in the conditions. Only this final
// status says the request was handled, not the progress written during
// the sync.
func setStatus(gs *v1.GitSync, o outcome) {
	if o.handled != nil {
		gs.Status.LastHandledReconcileAt = *o.handled
	}
	conditions.Delete(gs, v1.ReconcilingCondition)
	if o.problem != nil {
		o.problem.Mark(gs)
		return
	}
	conditions.MarkTrue(gs, v1.ReadyCondition, v1.ReasonReconciliationSucceeded, "applied revision %s", gs.Status.LastAppliedRevision)
	conditions.Delete(gs, v1.StalledCondition)
}

// report records a sync in the sync metric, and in an event when the
// outcome is news: a first failure or a new message, changes applied, or
// back in sync. wasReady and previousMessage are the Ready condition
// before the sync marked it in progress.
func (r *Reconciler) report(gs *v1.GitSync, o outcome, wasReady bool, previousMessage string) {
	if p := o.problem; p != nil {
		observeSync(gs.Name, p.Reason, o.start)
		if wasReady || previousMessage != p.Message {
			r.recorder.Eventf(gs, nil, corev1.EventTypeWarning, p.Reason, "Sync", "%s", p.Message)
		}
		return
	}
	observeSync(gs.Name, "success", o.start)
	switch summary := summarize(o.changes); {
	case summary != "":
		r.recorder.Eventf(gs, nil, corev1.EventTypeNormal, v1.ReasonReconciliationSucceeded, "Sync", "revision %s: %s", gs.Status.LastAppliedRevision, summary)
	case !wasReady:
		r.recorder.Eventf(gs, nil, corev1.EventTypeNormal, v1.ReasonReconciliationSucceeded, "Sync", "revision %s applied; the cluster is in sync", gs.Status.LastAppliedRevision)
	}
}

// suspendedMessage starts Ready's message while a GitSync is suspended.
const suspendedMessage = "suspended (spec.suspend: true): nothing is synced until resumed"

// setSuspended records a suspended GitSync: the request is handled (by
// doing nothing), and Ready's message says it is suspended, keeping its
// status and reason, which describe the last sync, and that sync's message
// after it.
func setSuspended(gs *v1.GitSync) {
	if handled := requestOf(gs); handled != nil {
		gs.Status.LastHandledReconcileAt = *handled
	}
	ready := conditions.Get(gs, v1.ReadyCondition)
	switch {
	case ready == nil:
		conditions.MarkUnknown(gs, v1.ReadyCondition, v1.ReasonSuspended, "%s", suspendedMessage)
	case !strings.HasPrefix(ready.Message, suspendedMessage):
		ready.Message = suspendedMessage + "; the last sync: " + ready.Message
		conditions.Set(gs, ready)
	}
}

// requestOf is the sync request on gs now, nil for none.
func requestOf(gs *v1.GitSync) *string {
	if v, ok := gs.Annotations[v1.AnnotationReconcileRequestedAt]; ok {
		return &v
	}
	return nil
}

// summarize lists what a sync changed, "" when nothing.
func summarize(cs *ssa.ChangeSet) string {
	if cs == nil {
		return ""
	}
	var parts []string
	for _, e := range cs.Entries {
		if e.Action == ssa.CreatedAction || e.Action == ssa.ConfiguredAction || e.Action == ssa.DeletedAction {
			parts = append(parts, e.Subject+" "+string(e.Action))
		}
	}
	// An event is for people: a large first sync lists a few and counts
	// the rest.
	const shown = 10
	if len(parts) > shown {
		return fmt.Sprintf("%s and %d more", strings.Join(parts[:shown], ", "), len(parts)-shown)
	}
	return strings.Join(parts, ", ")
}

// recordAdoptions records a warning naming the objects the sync took over:
// made outside Git (with kubectl, say) or applied by another GitSync,
// they are from now on changed and pruned by this one, which their
// makers should hear about.
func (r *Reconciler) recordAdoptions(gs *v1.GitSync, rev source.Revision, planned []applier.Change) {
	var adopted []string
	for _, c := range planned {
		if c.Adopted && c.ResourceVersion != "" {
			adopted = append(adopted, fmt.Sprintf("%s %q (%s)", c.Declaration.Object.GetKind(), c.Declaration.Object.GetName(), c.Declaration.Where()))
		}
	}
	if len(adopted) == 0 {
		return
	}
	const shown = 10
	list := strings.Join(adopted[:min(shown, len(adopted))], ", ")
	if len(adopted) > shown {
		list += fmt.Sprintf(" and %d more", len(adopted)-shown)
	}
	r.recorder.Eventf(gs, nil, corev1.EventTypeWarning, v1.ReasonAdopted, "Sync",
		"revision %s adopted %s: created outside this GitSync (with kubectl, say, or by another GitSync), now managed and pruned from Git", rev, list)
}

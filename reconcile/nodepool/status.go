package nodepool

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fluxcd/pkg/runtime/conditions"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/problem"
)

// maxListed bounds how many conflicting nodes a message names.
const maxListed = 5

// outcome is what one reconcile of a pool found: the input of its status.
type outcome struct {
	// runtimeClass is the name of the RuntimeClass applied, empty if it
	// was not (then the status keeps the last name, unless there is a
	// conflict).
	runtimeClass string
	// runtimeClassConflict describes a foreign RuntimeClass of the pool's
	// name, empty if there is none.
	runtimeClassConflict string
	// nodes is nil when the nodes could not be listed, so the last counts
	// stay.
	nodes *nodeReport
	// err is a failure that a retry may fix.
	err error
}

// setStatus writes the outcome into the pool's status, kstatus style: Ready
// summarises, Reconciling stays True while a retry is pending, and Stalled
// marks what no retry can fix. observedGeneration moves only once the
// generation has been fully handled, so a pending retry reads as in
// progress.
func setStatus(pool *v1.NodePool, o outcome) {
	switch {
	case o.runtimeClass != "":
		pool.Status.RuntimeClassName = o.runtimeClass
	case o.runtimeClassConflict != "":
		pool.Status.RuntimeClassName = ""
	}
	if o.nodes != nil {
		pool.Status.Nodes, pool.Status.ReadyNodes = o.nodes.matching, o.nodes.ready
	}
	if o.err != nil {
		conditions.MarkFalse(pool, v1.ReadyCondition, v1.ReasonReconciliationFailed, "%s", o.err)
		conditions.MarkReconciling(pool, v1.ReasonProgressingWithRetry, "retrying after: %s", o.err)
		return
	}
	pool.Status.ObservedGeneration = pool.Generation
	switch {
	case o.runtimeClassConflict != "":
		problem.Stall(v1.ReasonRuntimeClassConflict, "%s", o.runtimeClassConflict).Mark(pool)
	case o.nodes != nil && len(o.nodes.conflicts) > 0:
		problem.Stall(v1.ReasonNodeConflict, "%s", conflictMessage(o.nodes.conflicts)).Mark(pool)
	case o.nodes == nil || o.nodes.ready == 0:
		// Waiting for nodes is neither progress nor a spec problem: node
		// events reconcile the pool again when one becomes Ready.
		conditions.Delete(pool, v1.ReconcilingCondition)
		conditions.Delete(pool, v1.StalledCondition)
		conditions.MarkFalse(pool, v1.ReadyCondition, v1.ReasonNoReadyNodes,
			"node selector matched %d nodes, none Ready: sandboxes on this pool cannot schedule", pool.Status.Nodes)
	default:
		conditions.Delete(pool, v1.ReconcilingCondition)
		conditions.Delete(pool, v1.StalledCondition)
		conditions.MarkTrue(pool, v1.ReadyCondition, v1.ReasonSucceeded,
			"RuntimeClass %s applied, %d of %d nodes Ready", o.runtimeClass, o.nodes.ready, o.nodes.matching)
	}
}

// startsGeneration reports whether this run is the first on the pool's
// generation: the status describes an older one and does not say yet that
// this one is being reconciled. A retry of the same generation is not a
// start, so it does not rewrite Reconciling back and forth.
func startsGeneration(pool *v1.NodePool) bool {
	return pool.Status.ObservedGeneration != pool.Generation &&
		(!conditions.IsReconciling(pool) ||
			conditions.GetObservedGeneration(pool, v1.ReconcilingCondition) != pool.Generation)
}

// runtimeClassConflictMessage says whose RuntimeClass is in the way.
func runtimeClassConflictMessage(rc metav1.Object) string {
	owner := "no controller"
	if ref := metav1.GetControllerOf(rc); ref != nil {
		owner = fmt.Sprintf("controller %s %s", ref.Kind, ref.Name)
	}
	return fmt.Sprintf("RuntimeClass %s already exists with %s: delete it or rename the NodePool", rc.GetName(), owner)
}

// conflictMessage names the nodes another pool holds, and that pool.
func conflictMessage(conflicts []nodeConflict) string {
	parts := make([]string, 0, min(len(conflicts), maxListed))
	for _, c := range conflicts[:min(len(conflicts), maxListed)] {
		parts = append(parts, fmt.Sprintf("node %s belongs to NodePool %s", c.Node, c.Pool))
	}
	msg := strings.Join(parts, ", ")
	if extra := len(conflicts) - maxListed; extra > 0 {
		msg += fmt.Sprintf(" and %d more", extra)
	}
	return msg + ": a node can be in one pool only; change either pool's nodeSelector"
}

// readyEvent returns the event for a change of the Ready condition's status,
// and false when it did not change: events mark transitions, not reconciles.
func readyEvent(before, after *metav1.Condition) (eventType, reason, message string, ok bool) {
	if after == nil || (before != nil && before.Status == after.Status) {
		return "", "", "", false
	}
	if after.Status == metav1.ConditionTrue {
		return corev1.EventTypeNormal, after.Reason, after.Message, true
	}
	return corev1.EventTypeWarning, after.Reason, after.Message, true
}

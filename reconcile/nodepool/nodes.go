package nodepool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// taintKey identifies a taint: a node holds at most one taint per key and
// effect.
type taintKey struct {
	Key    string             `json:"key"`
	Effect corev1.TaintEffect `json:"effect"`
}

// nodeConflict is a node the pool selects that another pool already holds.
type nodeConflict struct {
	Node, Pool string
}

// nodeReport is what reconciling the nodes observed, for the status.
type nodeReport struct {
	matching, ready int32
	conflicts       []nodeConflict
}

// selects reports whether the pool's selector matches a node's labels. An
// empty selector (refused by the CRD) selects nothing rather than every node.
func selects(pool *v1.NodePool, nodeLabels map[string]string) bool {
	return len(pool.Spec.NodeSelector) > 0 &&
		labels.SelectorFromSet(pool.Spec.NodeSelector).Matches(labels.Set(nodeLabels))
}

// nodeTaints are the taints the pool keeps on its nodes.
func nodeTaints(pool *v1.NodePool) []corev1.Taint {
	out := make([]corev1.Taint, 0, len(pool.Spec.Taints))
	for _, t := range pool.Spec.Taints {
		out = append(out, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(effect(t))})
	}
	return out
}

// nodeReady reports the node's Ready condition, the one the scheduler
// relies on.
func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// join makes node a member of pool: the pool label, the pool's taints, and
// the record of the taints it owns. Owned taints the spec no longer has are
// removed; a taint someone else already set identically stays theirs. It
// reports whether the node changed.
func join(node *corev1.Node, pool *v1.NodePool) bool {
	before := node.DeepCopy()
	owned := ownedTaints(node)
	want := nodeTaints(pool)
	wanted := make(map[taintKey]bool, len(want))
	for _, t := range want {
		wanted[keyOf(t)] = true
	}
	// Drop the taints this pool set that its spec no longer declares.
	taints := slices.DeleteFunc(slices.Clone(node.Spec.Taints), func(t corev1.Taint) bool {
		return owned[keyOf(t)] && !wanted[keyOf(t)]
	})
	nowOwned := map[taintKey]bool{}
	for _, w := range want {
		i := slices.IndexFunc(taints, func(t corev1.Taint) bool { return keyOf(t) == keyOf(w) })
		switch {
		case i < 0:
			taints = append(taints, w)
			nowOwned[keyOf(w)] = true
		case taints[i].Value != w.Value:
			taints[i].Value = w.Value
			nowOwned[keyOf(w)] = true
		case owned[keyOf(w)]:
			nowOwned[keyOf(w)] = true
		}
	}
	node.Spec.Taints = taints
	setOwnedTaints(node, nowOwned)
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	node.Labels[v1.LabelNodePool] = pool.Name
	return changed(before, node)
}

// leave removes everything a pool put on node: the label, the taints it owns
// and their record. It reports whether the node changed.
func leave(node *corev1.Node) bool {
	before := node.DeepCopy()
	owned := ownedTaints(node)
	node.Spec.Taints = slices.DeleteFunc(slices.Clone(node.Spec.Taints), func(t corev1.Taint) bool {
		return owned[keyOf(t)]
	})
	if len(node.Spec.Taints) == 0 {
		node.Spec.Taints = nil
	}
	setOwnedTaints(node, nil)
	delete(node.Labels, v1.LabelNodePool)
	return changed(before, node)
}

func keyOf(t corev1.Taint) taintKey { return taintKey{Key: t.Key, Effect: t.Effect} }

// changed compares only what join and leave write, so nil and empty maps or
// lists do not count as a change.
func changed(before, after *corev1.Node) bool {
	return !equality.Semantic.DeepEqual(before.Labels, after.Labels) ||
		!equality.Semantic.DeepEqual(before.Annotations, after.Annotations) ||
		!equality.Semantic.DeepEqual(before.Spec.Taints, after.Spec.Taints)
}

// ownedTaints reads the record of v1.AnnotationOwnedTaints. A record that does not
// parse (edited by hand) owns nothing: leaving a taint behind is safer than
// removing one the pool did not set.
func ownedTaints(node *corev1.Node) map[taintKey]bool {
	var keys []taintKey
	_ = json.Unmarshal([]byte(node.Annotations[v1.AnnotationOwnedTaints]), &keys)
	owned := make(map[taintKey]bool, len(keys))
	for _, k := range keys {
		owned[k] = true
	}
	return owned
}

// setOwnedTaints writes the record in a stable order (so an unchanged set is
// not a change), or removes it when the pool owns no taint.
func setOwnedTaints(node *corev1.Node, owned map[taintKey]bool) {
	if len(owned) == 0 {
		delete(node.Annotations, v1.AnnotationOwnedTaints)
		return
	}
	keys := make([]taintKey, 0, len(owned))
	for k := range owned {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Key != keys[j].Key {
			return keys[i].Key < keys[j].Key
		}
		return keys[i].Effect < keys[j].Effect
	})
	b, _ := json.Marshal(keys) // a slice of string pairs always marshals
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[v1.AnnotationOwnedTaints] = string(b)
}

// nodeChangedPredicate lets through the node events that can change a
// pool's work or status: creation, deletion, and updates of the labels, the
// taints, the ownership record or the Ready status. Heartbeats, which
// update every node every few seconds, are dropped.
func nodeChangedPredicate() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*corev1.Node)
		updated, okNew := e.ObjectNew.(*corev1.Node)
		return !okOld || !okNew || changed(old, updated) || nodeReady(old) != nodeReady(updated)
	}}
}

// errNodeTaken means another pool labelled a node between the cached read and
// the write: admit reports which, as a conflict.
var errNodeTaken = errors.New("node was taken by another pool")

// reconcileNodes makes every node the pool selects a member, unless another
// pool holds it, and releases the members it no longer selects. A failure on
// one node does not stop the others.
func (r *Reconciler) reconcileNodes(ctx context.Context, pool *v1.NodePool) (*nodeReport, error) {
	nodes, err := r.listNodes(ctx)
	if err != nil {
		return nil, err
	}
	report := &nodeReport{}
	var errs []error
	for i := range nodes {
		node := &nodes[i]
		holder := node.Labels[v1.LabelNodePool]
		if !selects(pool, node.Labels) {
			if holder == pool.Name {
				errs = append(errs, r.release(ctx, pool, node))
			}
			continue
		}
		report.matching++
		if nodeReady(node) {
			report.ready++
		}
		if holder != "" && holder != pool.Name {
			held, err := r.poolExists(ctx, holder)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if held {
				report.conflicts = append(report.conflicts, nodeConflict{Node: node.Name, Pool: holder})
				continue
			}
			// The label names a pool that no longer exists (it was
			// removed without its finalizer running): take the node.
		}
		takenBy, err := r.admit(ctx, pool, node, holder)
		if takenBy != "" {
			// Another pool's pass, running at the same time, labelled it
			// first.
			report.conflicts = append(report.conflicts, nodeConflict{Node: node.Name, Pool: takenBy})
			continue
		}
		errs = append(errs, err)
	}
	return report, errors.Join(errs...)
}

// releaseNodes takes the pool's label and taints off every node that has
// them, before the pool is deleted.
func (r *Reconciler) releaseNodes(ctx context.Context, pool *v1.NodePool) error {
	nodes, err := r.listNodes(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for i := range nodes {
		if nodes[i].Labels[v1.LabelNodePool] == pool.Name {
			errs = append(errs, r.release(ctx, pool, &nodes[i]))
		}
	}
	return errors.Join(errs...)
}

// listNodes lists every node from the cache, sorted by name so conflicts are
// reported in a stable order. Listing all nodes, rather than by selector,
// lets one pass find both the selected nodes and the ones that left.
func (r *Reconciler) listNodes(ctx context.Context) ([]corev1.Node, error) {
	list := &corev1.NodeList{}
	if err := r.List(ctx, list); err != nil {
		return nil, fmt.Errorf("failed to list nodes: %w", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items, nil
}

// poolExists reports whether a NodePool of that name exists.
func (r *Reconciler) poolExists(ctx context.Context, name string) (bool, error) {
	err := r.Get(ctx, client.ObjectKey{Name: name}, &v1.NodePool{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("failed to get NodePool %s: %w", name, err)
	}
	return true, nil
}

// admit joins node to the pool if the cached copy shows it is not a member
// yet. holder is the pool label the decision was made on: if the node is
// found labelled differently when written, another pool got there first,
// and admit returns its name (takenBy).
func (r *Reconciler) admit(ctx context.Context, pool *v1.NodePool, cached *corev1.Node, holder string) (takenBy string, err error) {
	if !join(cached.DeepCopy(), pool) {
		return "", nil
	}
	changed, err := r.patchNode(ctx, cached.Name, func(node *corev1.Node) (bool, error) {
		if got := node.Labels[v1.LabelNodePool]; got != holder && got != pool.Name {
			takenBy = got
			return false, fmt.Errorf("failed to label node %s: %w", node.Name, errNodeTaken)
		}
		return join(node, pool), nil
	})
	if err == nil && changed && holder != pool.Name {
		r.recorder.Eventf(pool, cached, corev1.EventTypeNormal, "NodeLabelled", "LabelNode",
			"node %s joined the pool: labelled %s=%s, %d taints", cached.Name, v1.LabelNodePool, pool.Name, len(pool.Spec.Taints))
	}
	return takenBy, err
}

// release makes node leave the pool if the cached copy shows it is still a
// member.
func (r *Reconciler) release(ctx context.Context, pool *v1.NodePool, cached *corev1.Node) error {
	if !leave(cached.DeepCopy()) {
		return nil
	}
	changed, err := r.patchNode(ctx, cached.Name, func(node *corev1.Node) (bool, error) {
		if node.Labels[v1.LabelNodePool] != pool.Name {
			return false, nil // released already, or never ours
		}
		return leave(node), nil
	})
	if err == nil && changed {
		r.recorder.Eventf(pool, cached, corev1.EventTypeNormal, "NodeUnlabelled", "UnlabelNode",
			"node %s left the pool: label %s and the pool's taints removed", cached.Name, v1.LabelNodePool)
	}
	return err
}

// patchNode reads the node from the API server, lets mutate change it and
// writes it back with a merge patch locked on the resourceVersion, retrying
// on conflict. Node.spec.taints is an atomic list, shared with the node
// lifecycle controller and administrators: the lock makes sure the whole
// list written is the one just read. A node deleted meanwhile needs nothing.
func (r *Reconciler) patchNode(ctx context.Context, name string, mutate func(*corev1.Node) (bool, error)) (bool, error) {
	var changed bool
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node := &corev1.Node{}
		if err := r.apiReader.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			return err
		}
		orig := node.DeepCopy()
		var err error
		if changed, err = mutate(node); err != nil || !changed {
			return err
		}
		return r.Patch(ctx, node, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case errors.Is(err, errNodeTaken):
		return false, err
	case err != nil:
		return false, fmt.Errorf("failed to patch node %s: %w", name, err)
	}
	return changed, nil
}

package sandbox

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/index"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/problem"
)

// A sandbox's namespace is its only if the reconciler created it for that
// Sandbox, or claimed a warm member for it: the namespace's controller
// reference carries the Sandbox's UID (a claimed member's once it is
// relabelled; until then its owner's binding names the Sandbox's UID). Only the reconciler and cluster
// administrators can write a namespace's owner references, and a namespace
// is created with a plain create that fails when the name is taken, so a
// Sandbox never adopts a namespace that exists: not an administrator's, not
// a warm member it did not claim, not one an earlier Sandbox of the same
// name left behind. Everything inside the namespace was created there by
// the reconciler, since a new namespace is empty and the owner's role
// creates nothing but exec, attach and port-forward sessions.

// ownsNamespace tells whether ns is the sandbox's: controlled by this
// Sandbox's UID. Namespaces created before the UID label existed are
// recognised by the owner reference alone; the label is added on the next
// pass.
func ownsNamespace(ns *corev1.Namespace, sbx *v1.Sandbox) bool {
	if !metav1.IsControlledBy(ns, sbx) {
		return false
	}
	uid, labelled := ns.Labels[v1.LabelSandboxUID]
	return !labelled || uid == string(sbx.UID)
}

// namespaceSeen is what ensureNamespace found of the sandbox's namespace,
// which decides whether applyEnvironment compares it with the cache.
type namespaceSeen int

const (
	// namespaceCached: the cache shows the namespace as the sandbox's, and
	// is compared with the blueprint.
	namespaceCached namespaceSeen = iota
	// namespaceCreated: this pass created it as it should be; its objects
	// are all still to be made.
	namespaceCreated
	// namespaceAhead: the API server has it as the sandbox's but the cache
	// does not yet (a relabel just written, by this pass or the one
	// before): compared with the cache it would be written again for
	// nothing, so it is left until the cache has caught up.
	namespaceAhead
)

// ensureNamespace makes sure the sandbox's namespace exists and is the
// sandbox's own, creating it when it is missing, or completing the claim
// of a member whose relabel did not land (adoptClaimed), and says what it
// found; a non-nil taken says why the sandbox cannot use the name, and
// nothing in that namespace was changed. Only an answer that the namespace
// is the sandbox's is taken from the cache: it may lag behind a claim or a
// deletion, so anything else is asked of the API server, which is rare and
// off the claim path.
func (r *Reconciler) ensureNamespace(ctx context.Context, sbx *v1.Sandbox, bp environment.Blueprint) (seen namespaceSeen, taken *problem.Problem, err error) {
	key := types.NamespacedName{Name: bp.Namespace()}
	ns := &corev1.Namespace{}
	switch err = r.Get(ctx, key, ns); {
	case err == nil && ownsNamespace(ns, sbx):
		r.memory.forgetClaim(sbx.Name)
		return namespaceCached, nil, nil
	case err == nil && r.memory.relabelAhead(sbx, ns.Name, time.Now()):
		return namespaceAhead, nil, nil
	case err == nil:
		err = r.apiReader.Get(ctx, key, ns)
	case !apierrors.IsNotFound(err):
		return namespaceCached, nil, fmt.Errorf("failed to get namespace %s: %w", bp.Namespace(), err)
	}
	if apierrors.IsNotFound(err) {
		if err = r.Create(ctx, bp.NamespaceObject()); err == nil {
			return namespaceCreated, nil, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return namespaceCached, nil, fmt.Errorf("failed to create namespace %s: %w", bp.Namespace(), err)
		}
		err = r.apiReader.Get(ctx, key, ns)
	}
	if err != nil {
		return namespaceCached, nil, fmt.Errorf("failed to get namespace %s: %w", bp.Namespace(), err)
	}
	if ownsNamespace(ns, sbx) {
		return namespaceAhead, nil, nil
	}
	if adopted, err := r.adoptClaimed(ctx, sbx, ns); err != nil || adopted {
		return namespaceAhead, nil, err
	}
	return namespaceCached, r.namespaceTaken(ctx, sbx, ns), nil
}

// namespaceTaken explains a namespace of the sandbox's name that is not the
// sandbox's. An environment an earlier Sandbox of the same name left behind
// is deleted (that Sandbox is gone, so nobody is entitled to it); anything
// else is a conflict the sandbox waits on, touching nothing.
func (r *Reconciler) namespaceTaken(ctx context.Context, sbx *v1.Sandbox, ns *corev1.Namespace) *problem.Problem {
	if ns.DeletionTimestamp == nil && leftBehind(ns, sbx) {
		if err := environment.DeleteNamespace(ctx, r.Client, ns); err != nil {
			return problem.New(v1.ReasonNamespaceTerminating,
				"namespace %s was left by an earlier sandbox named %s and could not be deleted yet: %v", ns.Name, sbx.Name, err)
		}
		ns.DeletionTimestamp = &metav1.Time{}
	}
	if ns.DeletionTimestamp != nil {
		return problem.New(v1.ReasonNamespaceTerminating,
			"namespace %s is still being deleted; the sandbox starts in a new namespace once it is gone", ns.Name)
	}
	conflict := problem.Stall(v1.ReasonNamespaceConflict,
		"namespace %s exists and does not belong to this sandbox; nothing in it was changed. Delete the namespace or choose another sandbox name", ns.Name)
	conflict.Unwatched = true
	return conflict
}

// leftBehind tells the environment of an earlier Sandbox of the same name:
// labelled by the reconciler for that name and not controlled by this
// Sandbox. Sandbox names are unique, so that earlier Sandbox is gone.
func leftBehind(ns *corev1.Namespace, sbx *v1.Sandbox) bool {
	return ns.Labels[v1.LabelManagedBy] == v1.ManagedByValue && ns.Labels[v1.LabelSandbox] == sbx.Name &&
		!metav1.IsControlledBy(ns, sbx)
}

// removeLeftBehind deletes the orphaned environments of a Sandbox that is
// gone, and the members claimed for it that were not relabelled yet. Garbage collection deletes those that still have their owner
// reference (a normal delete); a delete with propagationPolicy Orphan
// strips the reference instead and would leave the former owner inside a
// live namespace, and the next Sandbox of that name next to it. The label
// survives the orphaning.
func (r *Reconciler) removeLeftBehind(ctx context.Context, name string) error {
	// The cache may not have seen a Sandbox created just now; a deletion is
	// rare enough to ask the API server.
	if err := r.apiReader.Get(ctx, types.NamespacedName{Name: name}, &v1.Sandbox{}); !apierrors.IsNotFound(err) {
		return client.IgnoreNotFound(err)
	}
	if err := r.deleteUnadopted(ctx, name, "", ""); err != nil {
		return err
	}
	list := &corev1.NamespaceList{}
	if err := r.List(ctx, list, client.MatchingFields{index.NamespaceSandbox: name}); err != nil {
		return fmt.Errorf("failed to list namespaces of sandbox %s: %w", name, err)
	}
	for i := range list.Items {
		ns := &list.Items[i]
		if ns.Labels[v1.LabelManagedBy] == v1.ManagedByValue && ns.DeletionTimestamp == nil && metav1.GetControllerOf(ns) == nil {
			if err := environment.DeleteNamespace(ctx, r.Client, ns); err != nil {
				return err
			}
		}
	}
	return nil
}

// sandboxOfNamespace maps a namespace to the sandbox it was made or claimed
// for: its label survives an orphaning delete, which strips the owner
// reference, so a namespace left behind still reaches the controller.
func sandboxOfNamespace(_ context.Context, ns client.Object) []reconcile.Request {
	name, ok := ns.GetLabels()[v1.LabelSandbox]
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: name}}}
}

package environment

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/index"
)

// MemberObjects are the objects of a new warm pool member: the environment
// a Sandbox of the pool would get (egress is what its template's egress
// rules resolve to), with the pod started (behind the egress
// gate of gateImage), labelled with the pool's UID and entered by nobody
// until a claim binds an owner. The namespace comes first, then its default
// ServiceAccount (CreateDefaultServiceAccount says why), and the pod last.
func MemberObjects(pool *v1.WarmPool, namespace string, tpl *v1.SandboxTemplate, nodePool *v1.NodePool, egress Egress, blocked []netip.Prefix, gateImage string) []client.Object {
	bp := ForMember(pool, namespace, tpl, nodePool).WithEgress(egress).WithEgressGate(gateImage)
	objs := []client.Object{bp.NamespaceObject(), DefaultServiceAccount(namespace)}
	return append(append(objs, bp.Isolation(blocked)...), bp.Pod())
}

// ForMember is the environment of a new member of pool in namespace: labelled
// as available, with the template's hash and the pool's UID, and entered
// by nobody. It has no controller: a claimed member must outlive its pool
// until relabelled (v1alpha1.LabelWarmPoolUID).
func ForMember(pool *v1.WarmPool, namespace string, tpl *v1.SandboxTemplate, nodePool *v1.NodePool) Blueprint {
	l := managedLabels()
	l[v1.LabelTemplate] = tpl.Name
	l[v1.LabelWarmPool] = pool.Name
	l[v1.LabelWarmPoolUID] = string(pool.UID)
	l[v1.LabelMember] = v1.MemberAvailable
	l[v1.LabelTemplateHash] = tpl.Status.ContentHash
	return Blueprint{namespace: namespace, labels: l, template: tpl, nodePool: nodePool, env: tpl.Spec.Env}
}

// MemberOf tells whether ns was built by pool: labelled with its UID, or,
// built before members carried that label, controlled by it.
func MemberOf(ns *corev1.Namespace, pool *v1.WarmPool) bool {
	uid := ns.Labels[v1.LabelWarmPoolUID]
	return uid != "" && uid == string(pool.UID) || metav1.IsControlledBy(ns, pool)
}

// ClaimBinding is the owner's RoleBinding whose create claims member for
// sbx at now: it grants the owner access in the same write, and a create
// fails when the member has one already, so of two claims (or a claim and
// the pool's trim) one wins. Its labels name the pool, the claim and the
// sandbox, by name and UID, so the claim is found before the namespace is
// relabelled (ClaimedNamespace) and after a crash in between.
func ClaimBinding(member *corev1.Namespace, sbx *v1.Sandbox, now time.Time) *rbacv1.RoleBinding {
	l := takeLabels(member, v1.MemberClaimed)
	l[v1.LabelSandbox], l[v1.LabelSandboxUID] = sbx.Name, string(sbx.UID)
	b := ownerBinding(member.Name, l, ownerSubject(sbx.Spec.Owner))
	b.Annotations = map[string]string{v1.AnnotationClaimedAt: now.UTC().Format(time.RFC3339Nano)}
	return b
}

// TrimBinding is the binding, with no subject, whose create takes member
// for its pool to delete: a member is deleted only after the pool won it
// from any claim (ClaimBinding).
func TrimBinding(member *corev1.Namespace) *rbacv1.RoleBinding {
	return ownerBinding(member.Name, takeLabels(member, v1.MemberTrimmed))
}

// takeLabels are the labels of a binding that takes member: its pool's,
// and who took it.
func takeLabels(member *corev1.Namespace, by string) map[string]string {
	l := managedLabels()
	l[v1.LabelWarmPool], l[v1.LabelMember] = member.Labels[v1.LabelWarmPool], by
	return l
}

// TakenBefore tells a failed create of a member's binding (ClaimBinding,
// TrimBinding) that found the member taken already, gone, or being
// deleted: a member that is not to be had, rather than a failure.
func TakenBefore(err error) bool {
	return apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) ||
		apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}

// ClaimedAt is when the claim that wrote obj (a ClaimBinding or a
// ClaimedNamespace) took the member; zero when it carries no claim time.
func ClaimedAt(obj metav1.Object) time.Time {
	at, _ := time.Parse(time.RFC3339Nano, obj.GetAnnotations()[v1.AnnotationClaimedAt])
	return at
}

// ClaimedNamespace is member's namespace as a claim by sbx at now leaves
// it once the sandbox is Ready: labelled as the sandbox's own namespace is
// (ForSandbox), marked claimed, annotated with its owner and the claim
// time, and controlled by the Sandbox instead of the pool, so that it goes
// with the Sandbox.
func ClaimedNamespace(member *corev1.Namespace, sbx *v1.Sandbox, now time.Time) *corev1.Namespace {
	claimed := member.DeepCopy()
	if claimed.Labels == nil {
		claimed.Labels = map[string]string{}
	}
	claimed.Labels[v1.LabelMember] = v1.MemberClaimed
	claimed.Labels[v1.LabelSandbox] = sbx.Name
	claimed.Labels[v1.LabelSandboxUID] = string(sbx.UID)
	claimed.Labels[v1.LabelOwner] = OwnerLabel(sbx.Spec.Owner)
	if claimed.Annotations == nil {
		claimed.Annotations = map[string]string{}
	}
	claimed.Annotations[v1.AnnotationOwner] = sbx.Spec.Owner
	claimed.Annotations[v1.AnnotationClaimedAt] = now.UTC().Format(time.RFC3339Nano)
	claimed.OwnerReferences = []metav1.OwnerReference{ControllerRef(v1.KindSandbox, sbx)}
	return claimed
}

// Member is an unclaimed member of a warm pool as the cache shows it. The
// namespace is the cache's own object, not a copy: read it, and DeepCopy
// it before changing it.
type Member struct {
	Namespace *corev1.Namespace
	// Complete is false while the member's pod does not exist (its build
	// was cut short, or the cache has not shown it yet).
	Complete bool
	Ready    bool
	// Unschedulable is why the scheduler cannot place the member's pod,
	// when it said so.
	Unschedulable string
	// Pod is the member's pod, nil while Complete is false; the cache's
	// own object, as Namespace is.
	Pod *corev1.Pod
}

// Taken is a member a claim or the pool's trim took (its binding) whose
// namespace is not relabelled or deleted yet.
type Taken struct {
	Namespace *corev1.Namespace
	Binding   *rbacv1.RoleBinding
}

// Members lists the pool's unclaimed members that are not being deleted,
// and those taken but still labelled available, for the pool's own passes;
// a claim looks at members one at a time instead. A pass looks at every
// member of pools of hundreds, so the cache is read without copying,
// through indexes: the pool's unclaimed members (AvailableNamespaces),
// then each one's binding and pod (Inspect). None of it grows with the
// sandboxes claimed from the pool before.
func Members(ctx context.Context, c client.Reader, pool *v1.WarmPool) ([]Member, []Taken, error) {
	namespaces, err := AvailableNamespaces(ctx, c, pool)
	if err != nil {
		return nil, nil, err
	}
	members := make([]Member, 0, len(namespaces))
	var taken []Taken
	for _, ns := range namespaces {
		m, binding, err := Inspect(ctx, c, pool, ns)
		switch {
		case err != nil:
			return nil, nil, err
		case binding != nil:
			taken = append(taken, Taken{Namespace: ns, Binding: binding})
		default:
			members = append(members, m)
		}
	}
	// Oldest first: a pool trims the newest, and claims spread from there.
	sort.Slice(members, func(i, j int) bool {
		return members[i].Namespace.CreationTimestamp.Before(&members[j].Namespace.CreationTimestamp)
	})
	return members, taken, nil
}

// AvailableNamespaces lists the namespaces of the pool's members labelled
// available that are not being deleted, from the cache's own objects
// (LabelledMembers): some may be taken already, which Inspect tells.
func AvailableNamespaces(ctx context.Context, c client.Reader, pool *v1.WarmPool) ([]*corev1.Namespace, error) {
	labelled, err := LabelledMembers(ctx, c, pool.Name)
	if err != nil {
		return nil, err
	}
	namespaces := labelled[:0]
	for _, ns := range labelled {
		if ns.DeletionTimestamp == nil && MemberOf(ns, pool) {
			namespaces = append(namespaces, ns)
		}
	}
	return namespaces, nil
}

// LabelledMembers are the namespaces labelled as available members of a
// pool of this name (index.NamespaceWarmPool), being deleted or not, built
// by that pool or by an earlier one of the name (MemberOf tells): the
// cache's own objects, not copies.
func LabelledMembers(ctx context.Context, c client.Reader, pool string) ([]*corev1.Namespace, error) {
	list := &corev1.NamespaceList{}
	if err := c.List(ctx, list, client.UnsafeDisableDeepCopy, client.MatchingFields{index.NamespaceWarmPool: pool}); err != nil {
		return nil, fmt.Errorf("failed to list members of WarmPool %s: %w", pool, err)
	}
	namespaces := make([]*corev1.Namespace, len(list.Items))
	for i := range list.Items {
		namespaces[i] = &list.Items[i]
	}
	return namespaces, nil
}

// Inspect looks up, in the cache, the binding and pod of the pool's member
// in ns (index.BindingOfMember, index.PodOfMember). A member a claim or
// the pool's trim took has a binding, which it returns; any other is
// returned as a Member.
func Inspect(ctx context.Context, c client.Reader, pool *v1.WarmPool, ns *corev1.Namespace) (Member, *rbacv1.RoleBinding, error) {
	bindings := &rbacv1.RoleBindingList{}
	if err := c.List(ctx, bindings, client.UnsafeDisableDeepCopy, client.MatchingFields{index.BindingOfMember: ns.Name}); err != nil {
		return Member{}, nil, fmt.Errorf("failed to list the bindings of WarmPool %s's member %s: %w", pool.Name, ns.Name, err)
	}
	if b := named(bindings.Items, OwnerBindingName); b != nil {
		return Member{}, b, nil
	}
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.UnsafeDisableDeepCopy, client.MatchingFields{index.PodOfMember: ns.Name}); err != nil {
		return Member{}, nil, fmt.Errorf("failed to list the pods of WarmPool %s's member %s: %w", pool.Name, ns.Name, err)
	}
	m := Member{Namespace: ns}
	if pod := named(pods.Items, PodName); pod != nil {
		m.Complete, m.Ready, m.Pod = true, PodReady(pod), pod
		m.Unschedulable, _ = Unschedulable(pod)
	}
	return m, nil, nil
}

// named is the item of items called name, nil when there is none.
func named[T any, PT interface {
	*T
	GetName() string
}](items []T, name string) PT {
	for i := range items {
		if item := PT(&items[i]); item.GetName() == name {
			return item
		}
	}
	return nil
}

// DeleteNamespace deletes a sandbox's or member's namespace, and with it
// everything in it, provided it is still the namespace that was looked at
// (its UID): a namespace of the same name made since is someone else's.
func DeleteNamespace(ctx context.Context, c client.Writer, ns *corev1.Namespace) error {
	uid := ns.UID
	err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name}}, client.Preconditions{UID: &uid})
	if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("failed to delete namespace %s: %w", ns.Name, err)
	}
	return nil
}

// Package index defines the cache field indexes the controllers share. A
// field can be indexed once per manager, and several controllers look up
// the same relation (the warm pools of a template, say), so they are all
// registered here, once.
package index

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/kubescheme"
)

// Index names. Each is the path of the reference it indexes
// (v1alpha1.References), on the kind it indexes.
const (
	SandboxTemplate  = "spec.templateRef.name" // on Sandbox
	SandboxWarmPool  = "spec.warmPoolRef.name" // on Sandbox
	WarmPoolTemplate = "spec.templateRef.name" // on WarmPool
	TemplateNodePool = "spec.nodePoolRef.name" // on SandboxTemplate
)

// NamespaceSandbox indexes namespaces by the Sandbox they are labelled for
// (v1alpha1.LabelSandbox): every pass of a sandbox looks for the
// namespaces it holds, among as many as there are sandboxes and members.
const NamespaceSandbox = "metadata.labels.sandbox" // on Namespace

// BindingSandbox indexes RoleBindings by the Sandbox they are labelled
// for: a claim's binding (environment.ClaimBinding) names the member it
// took before the member's namespace does.
const BindingSandbox = "metadata.labels.sandbox" // on RoleBinding

// NamespaceWarmPool indexes a warm pool's unclaimed members' namespaces
// (labelled v1alpha1.MemberAvailable, taken ones among them until their
// relabel) by the pool they are labelled for: every pass of a pool looks
// at its members, and a label selector on the cache would go through
// every namespace of the cluster each time. A claimed member leaves the
// index with its relabel, held until claims pause, so a pass's look at
// its pool grows with the claims of the last seconds at most, not with
// every sandbox claimed from it before. (A claim reads its pool's
// members' names from the sandbox controller's own record of them, not
// from this index: see reconcile/sandbox's availableMembers.)
const NamespaceWarmPool = "metadata.labels.warm-pool,member=available" // on Namespace

// BindingOfMember and PodOfMember index the bindings and pods labelled for
// a warm pool (its members', and the sandboxes' that claimed them, which
// keep the label) by their namespace: a claim looks up those of each
// unclaimed member, and the informers keep no index by namespace
// (reconcile.CacheOptions).
const (
	BindingOfMember = "metadata.namespace,labels.warm-pool" // on RoleBinding
	PodOfMember     = "metadata.namespace,labels.warm-pool" // on Pod
)

var (
	mu         sync.Mutex
	registered = map[ctrl.Manager]bool{}
)

// Register adds every index to mgr's cache; later calls for the same
// manager do nothing.
func Register(mgr ctrl.Manager) error {
	mu.Lock()
	defer mu.Unlock()
	if registered[mgr] {
		return nil
	}
	for _, ref := range v1.References {
		obj, err := kubescheme.Scheme.New(v1.GroupVersion.WithKind(ref.From))
		if err != nil {
			return err
		}
		err = mgr.GetFieldIndexer().IndexField(context.Background(), obj.(client.Object), ref.Field, func(o client.Object) []string {
			if named := ref.Get(o); named != nil {
				return []string{named.Name}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("failed to index %s by %s: %w", ref.From, ref.Field, err)
		}
	}
	for _, l := range []struct {
		obj   client.Object
		field string
		key   func(client.Object) (string, bool)
	}{
		{&corev1.Namespace{}, NamespaceSandbox, labelled(v1.LabelSandbox)},
		{&rbacv1.RoleBinding{}, BindingSandbox, labelled(v1.LabelSandbox)},
		{&corev1.Namespace{}, NamespaceWarmPool, availableMember},
		{&rbacv1.RoleBinding{}, BindingOfMember, memberNamespace},
		{&corev1.Pod{}, PodOfMember, memberNamespace},
	} {
		err := mgr.GetFieldIndexer().IndexField(context.Background(), l.obj, l.field, func(o client.Object) []string {
			if key, ok := l.key(o); ok {
				return []string{key}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("failed to index %T by %s: %w", l.obj, l.field, err)
		}
	}
	registered[mgr] = true
	return nil
}

// labelled keys an object by the value of its label.
func labelled(label string) func(client.Object) (string, bool) {
	return func(o client.Object) (string, bool) {
		value, ok := o.GetLabels()[label]
		return value, ok
	}
}

// availableMember keys a namespace labelled as an unclaimed member by its
// pool.
func availableMember(o client.Object) (string, bool) {
	if o.GetLabels()[v1.LabelMember] != v1.MemberAvailable {
		return "", false
	}
	return labelled(v1.LabelWarmPool)(o)
}

// memberNamespace keys an object labelled for a warm pool by its
// namespace.
func memberNamespace(o client.Object) (string, bool) {
	if _, ok := o.GetLabels()[v1.LabelWarmPool]; !ok {
		return "", false
	}
	return o.GetNamespace(), true
}

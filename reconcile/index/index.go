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

// NamespaceWarmPool, BindingWarmPool and PodWarmPool index a warm pool's
// members' namespaces, bindings and pods (and those of the sandboxes that
// claimed them) by the pool they are labelled for
// (v1alpha1.LabelWarmPool): every claim and every pass of a pool looks at
// its members, and a label selector on the cache would go through every
// namespace, binding and pod of the cluster each time.
const (
	NamespaceWarmPool = "metadata.labels.warm-pool" // on Namespace
	BindingWarmPool   = "metadata.labels.warm-pool" // on RoleBinding
	PodWarmPool       = "metadata.labels.warm-pool" // on Pod
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
		obj          client.Object
		field, label string
	}{
		{&corev1.Namespace{}, NamespaceSandbox, v1.LabelSandbox},
		{&rbacv1.RoleBinding{}, BindingSandbox, v1.LabelSandbox},
		{&corev1.Namespace{}, NamespaceWarmPool, v1.LabelWarmPool},
		{&rbacv1.RoleBinding{}, BindingWarmPool, v1.LabelWarmPool},
		{&corev1.Pod{}, PodWarmPool, v1.LabelWarmPool},
	} {
		err := mgr.GetFieldIndexer().IndexField(context.Background(), l.obj, l.field, func(o client.Object) []string {
			if value, ok := o.GetLabels()[l.label]; ok {
				return []string{value}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("failed to index %T by its label %s: %w", l.obj, l.label, err)
		}
	}
	registered[mgr] = true
	return nil
}

// Package index defines the cache field indexes the controllers share. A
// field can be indexed once per manager, and several controllers look up
// the same relation (the warm pools of a template, say), so they are all
// registered here, once.
package index

import (
	"context"
	"fmt"
	"sync"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// Index names. Each is the path of the reference it indexes, on the kind it
// indexes.
const (
	SandboxTemplate  = "spec.templateRef.name" // on Sandbox
	SandboxWarmPool  = "spec.warmPoolRef.name" // on Sandbox
	WarmPoolTemplate = "spec.templateRef.name" // on WarmPool
	TemplateNodePool = "spec.nodePoolRef.name" // on SandboxTemplate
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
	indexes := []struct {
		obj   client.Object
		field string
		ref   func(client.Object) *v1.LocalObjectReference
	}{
		{&v1.Sandbox{}, SandboxTemplate, func(o client.Object) *v1.LocalObjectReference { return o.(*v1.Sandbox).Spec.TemplateRef }},
		{&v1.Sandbox{}, SandboxWarmPool, func(o client.Object) *v1.LocalObjectReference { return o.(*v1.Sandbox).Spec.WarmPoolRef }},
		{&v1.WarmPool{}, WarmPoolTemplate, func(o client.Object) *v1.LocalObjectReference { return &o.(*v1.WarmPool).Spec.TemplateRef }},
		{&v1.SandboxTemplate{}, TemplateNodePool, func(o client.Object) *v1.LocalObjectReference { return o.(*v1.SandboxTemplate).Spec.NodePoolRef }},
	}
	for _, ix := range indexes {
		err := mgr.GetFieldIndexer().IndexField(context.Background(), ix.obj, ix.field, func(o client.Object) []string {
			if ref := ix.ref(o); ref != nil {
				return []string{ref.Name}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("failed to index %T by %s: %w", ix.obj, ix.field, err)
		}
	}
	registered[mgr] = true
	return nil
}

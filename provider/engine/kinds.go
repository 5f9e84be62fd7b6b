// Package engine is the Terraform machinery every agentsandbox.dev type
// shares. A type's schema comes from its CRD, so it cannot drift from the
// API; writes are server-side applies; waits read the kind's Readiness. The
// thin files of resources/ and datasources/ say which kind each Terraform
// type is, how it waits and how it is documented, and the provider
// registers them.
package engine

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/config"
	"github.com/agentsandbox/terraform-provider-agentsandbox/provider/crdschema"
)

// Kind is one agentsandbox.dev kind as a Terraform type: the CRD gives its
// schema, the Kind what the CRD cannot say.
type Kind struct {
	// TypeName follows "agentsandbox_".
	TypeName string
	// CRDKind names the CRD.
	CRDKind string
	// Noun names one object in messages: "warm pool".
	Noun string
	// schema is loaded from the CRD on first use.
	schema *crdschema.Kind
}

// The kinds, one per CRD.
var (
	NodePool = &Kind{TypeName: "node_pool", CRDKind: v1.KindNodePool, Noun: "node pool"}
	Template = &Kind{TypeName: "template", CRDKind: v1.KindSandboxTemplate, Noun: "sandbox template"}
	WarmPool = &Kind{TypeName: "warm_pool", CRDKind: v1.KindWarmPool, Noun: "warm pool"}
	Sandbox  = &Kind{TypeName: "sandbox", CRDKind: v1.KindSandbox, Noun: "sandbox"}
	GitSync  = &Kind{TypeName: "git_sync", CRDKind: v1.KindGitSync, Noun: "Git sync"}
)

// Kinds are every kind, in dependency order.
var Kinds = []*Kind{NodePool, Template, WarmPool, Sandbox, GitSync}

// GVK is the kind's group, version and kind.
func (k *Kind) GVK() schema.GroupVersionKind { return v1.GroupVersion.WithKind(k.CRDKind) }

var loadSchemas = sync.OnceValue(func() error {
	crds, err := config.CRDs()
	if err != nil {
		return err
	}
	byKind := map[string]*crdschema.Kind{}
	all := make([]*crdschema.Kind, 0, len(crds))
	for _, c := range crds {
		k, err := crdschema.Load(c)
		if err != nil {
			return err
		}
		byKind[k.GVK.Kind] = k
		all = append(all, k)
	}
	crdschema.SnakeCaseDescriptions(all...)
	for _, k := range Kinds {
		if k.schema = byKind[k.CRDKind]; k.schema == nil {
			return fmt.Errorf("no CRD of kind %s", k.CRDKind)
		}
	}
	return nil
})

// loaded returns the kind with its schema loaded from the CRD.
func (k *Kind) loaded() (*Kind, error) {
	if err := loadSchemas(); err != nil {
		return nil, err
	}
	return k, nil
}

package provider

import (
	"fmt"
	"sync"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/config"
	"github.com/agentsandbox/terraform-provider-agentsandbox/provider/crdschema"
)

// kind is one agentsandbox.dev kind as a Terraform type: the CRD gives its
// schema, this table what the CRD cannot say.
type kind struct {
	// typeName follows "agentsandbox_".
	typeName string
	// crdKind names the CRD.
	crdKind string
	// noun names one object in messages: "warm pool".
	noun string
	// serverDefaulted are spec attributes an admission step sets when they
	// are left unset.
	serverDefaulted map[string]bool
	// readyDoc says what ready means for the kind (v1alpha1.Readiness), in
	// the resource's documentation.
	readyDoc string
	// waitOptIn makes wait_for_ready false unless set: for kinds whose
	// readiness depends on things outside the cluster.
	waitOptIn bool
	// schema is loaded from the CRD on first use.
	schema *crdschema.Kind
}

// kinds are the provider's resource types, in dependency order.
var kinds = []*kind{
	{typeName: "node_pool", crdKind: v1.KindNodePool, noun: "node pool",
		readyDoc: "Ready condition True: the RuntimeClass exists and a selected node is Ready"},
	{typeName: "template", crdKind: v1.KindSandboxTemplate, noun: "sandbox template",
		readyDoc: "Ready condition True: the template is valid and its node pool exists"},
	{typeName: "warm_pool", crdKind: v1.KindWarmPool, noun: "warm pool",
		readyDoc: "Ready condition True, and status.replicas and status.ready_replicas equal spec.replicas"},
	// The admission policy of config/admission sets owner to the creator.
	{typeName: "sandbox", crdKind: v1.KindSandbox, noun: "sandbox", serverDefaulted: map[string]bool{"owner": true},
		readyDoc: "Ready condition True, or phase Stopped when spec.state is Stopped"},
	// A Git sync is Ready once a revision is fetched, applied and healthy:
	// that takes a reachable server and credentials, which a configuration
	// often creates later, so waiting is asked for.
	{typeName: "git_sync", crdKind: v1.KindGitSync, noun: "Git sync", waitOptIn: true,
		readyDoc: "Ready condition True: the revision is applied and what it declares is healthy"},
}

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
	for _, k := range kinds {
		if k.schema = byKind[k.crdKind]; k.schema == nil {
			return fmt.Errorf("no CRD of kind %s", k.crdKind)
		}
	}
	return nil
})

// kindOf returns the table entry of a Terraform type, its schema loaded.
func kindOf(typeName string) (*kind, error) {
	if err := loadSchemas(); err != nil {
		return nil, err
	}
	for _, k := range kinds {
		if k.typeName == typeName {
			return k, nil
		}
	}
	return nil, fmt.Errorf("no kind %s", typeName)
}

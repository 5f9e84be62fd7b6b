package resources

import (
	"github.com/hashicorp/terraform-plugin-framework/resource"

	"github.com/agentsandbox/terraform-provider-agentsandbox/provider/engine"
)

// NodePool is agentsandbox_node_pool: a runtime class and the nodes that
// run it.
func NodePool() resource.Resource {
	return engine.Resource(engine.NodePool, engine.Waits{
		ReadyDoc: "Ready condition True: the RuntimeClass exists and a selected node is Ready",
	})
}

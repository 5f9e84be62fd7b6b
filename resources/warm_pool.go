package resources

import (
	"github.com/hashicorp/terraform-plugin-framework/resource"

	"github.com/agentsandbox/terraform-provider-agentsandbox/provider/engine"
)

// WarmPool is agentsandbox_warm_pool: sandboxes kept ready to be claimed.
func WarmPool() resource.Resource {
	return engine.Resource(engine.WarmPool, engine.Waits{
		ReadyDoc: "Ready condition True, and status.replicas and status.ready_replicas equal spec.replicas",
	})
}

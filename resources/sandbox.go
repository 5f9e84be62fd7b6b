package resources

import (
	"github.com/hashicorp/terraform-plugin-framework/resource"

	"github.com/agentsandbox/terraform-provider-agentsandbox/provider/engine"
)

// Sandbox is agentsandbox_sandbox: one sandbox, from a template or a warm
// pool.
func Sandbox() resource.Resource {
	return engine.Resource(engine.Sandbox, engine.Waits{
		ReadyDoc: "Ready condition True, or phase Stopped when spec.state is Stopped",
		// The admission policy of config/admission sets owner to the
		// creator.
		ServerDefaulted: map[string]bool{"owner": true},
	})
}

package resources

import (
	"github.com/hashicorp/terraform-plugin-framework/resource"

	"github.com/agentsandbox/terraform-provider-agentsandbox/provider/engine"
)

// Template is agentsandbox_template: what a sandbox is made from.
func Template() resource.Resource {
	return engine.Resource(engine.Template, engine.Waits{
		ReadyDoc: "Ready condition True: the template is valid and its node pool exists",
	})
}

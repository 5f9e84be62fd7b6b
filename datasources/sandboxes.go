package datasources

import (
	"github.com/hashicorp/terraform-plugin-framework/datasource"

	"github.com/agentsandbox/terraform-provider-agentsandbox/provider/engine"
)

// Sandboxes is data.agentsandbox_sandboxes: the sandboxes of an owner, a
// template, a warm pool or a state.
func Sandboxes() datasource.DataSource { return engine.SandboxList() }

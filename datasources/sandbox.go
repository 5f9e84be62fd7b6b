package datasources

import (
	"github.com/hashicorp/terraform-plugin-framework/datasource"

	"github.com/agentsandbox/terraform-provider-agentsandbox/provider/engine"
)

// Sandbox is data.agentsandbox_sandbox: a sandbox made elsewhere (another
// configuration, a GitSync, kubectl), read by name.
func Sandbox() datasource.DataSource { return engine.DataSource(engine.Sandbox) }

package datasources

import (
	"github.com/hashicorp/terraform-plugin-framework/datasource"

	"github.com/agentsandbox/terraform-provider-agentsandbox/provider/engine"
)

// Template is data.agentsandbox_template: a template declared elsewhere (another
// configuration, a GitSync, kubectl), read by name.
func Template() datasource.DataSource { return engine.DataSource(engine.Template) }

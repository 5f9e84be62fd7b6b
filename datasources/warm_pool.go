package datasources

import (
	"github.com/hashicorp/terraform-plugin-framework/datasource"

	"github.com/agentsandbox/terraform-provider-agentsandbox/provider/engine"
)

// WarmPool is data.agentsandbox_warm_pool: a warm pool declared elsewhere (another
// configuration, a GitSync, kubectl), read by name.
func WarmPool() datasource.DataSource { return engine.DataSource(engine.WarmPool) }

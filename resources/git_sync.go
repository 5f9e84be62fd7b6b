package resources

import (
	"github.com/hashicorp/terraform-plugin-framework/resource"

	"github.com/agentsandbox/terraform-provider-agentsandbox/provider/engine"
)

// GitSync is agentsandbox_git_sync: declarations kept in sync from a Git
// repository.
func GitSync() resource.Resource {
	return engine.Resource(engine.GitSync, engine.Waits{
		ReadyDoc: "Ready condition True: the revision is applied and what it declares is healthy",
		// A Git sync is Ready once a revision is fetched, applied and
		// healthy: that takes a reachable server and credentials, which a
		// configuration often creates later, so waiting is asked for.
		OptIn: true,
	})
}

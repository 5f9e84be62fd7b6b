package resources

import (
	"github.com/hashicorp/terraform-plugin-framework/ephemeral"

	"github.com/agentsandbox/terraform-provider-agentsandbox/provider/engine"
)

// EphemeralSandbox is the ephemeral agentsandbox_sandbox: a sandbox for the
// length of one run, deleted when the run ends.
func EphemeralSandbox() ephemeral.EphemeralResource { return engine.EphemeralSandbox() }

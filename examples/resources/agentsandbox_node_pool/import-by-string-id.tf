# Terraform >= 1.5 and OpenTofu: import by name in the configuration, then plan and apply.
import {
  to = agentsandbox_node_pool.gvisor
  id = "gvisor"
}

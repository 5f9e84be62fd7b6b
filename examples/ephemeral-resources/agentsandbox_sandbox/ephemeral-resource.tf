# A throwaway sandbox for the length of one run (OpenTofu >= 1.11,
# Terraform >= 1.10): claimed from the warm pool when the run needs it,
# deleted when the run ends. Nothing is written to state.
ephemeral "agentsandbox_sandbox" "ci" {
  warm_pool = "python"
  ttl       = "30m"
}

# Ephemeral values flow only into other ephemeral contexts, such as a
# provider configuration or a write-only attribute.
locals {
  sandbox_namespace = ephemeral.agentsandbox_sandbox.ci.namespace
}

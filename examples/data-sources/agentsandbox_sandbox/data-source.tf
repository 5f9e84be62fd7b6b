# Where a sandbox runs and how it was launched.
data "agentsandbox_sandbox" "alice_scratch" {
  name = "alice-scratch"
}

output "alice_namespace" {
  value = data.agentsandbox_sandbox.alice_scratch.status.namespace
}

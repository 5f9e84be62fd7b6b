# Alice's running sandboxes of the python template, whether claimed from a
# warm pool of it or started from it directly.
data "agentsandbox_sandboxes" "alice" {
  owner    = "alice@example.com"
  template = "python"
  state    = "Running"
}

output "alice_sandboxes" {
  value = [for s in data.agentsandbox_sandboxes.alice.sandboxes : s.name]
}

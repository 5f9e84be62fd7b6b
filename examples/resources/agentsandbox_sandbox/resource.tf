# One sandbox claimed from the warm pool for a developer, stopped (workspace
# kept) after two hours. Same declaration as examples/gitops/sandbox.yaml.
resource "agentsandbox_sandbox" "alice_scratch" {
  name = "alice-scratch"
  spec = {
    warm_pool_ref   = { name = "python" }
    owner           = "alice@example.com"
    ttl             = "2h"
    shutdown_policy = "Stop"
  }
}

# Three Python sandboxes kept started, so a claim is served at once.
# Same declaration as examples/gitops/warm-pool.yaml.
resource "agentsandbox_warm_pool" "python" {
  name = "python"
  spec = {
    template_ref    = { name = "python" }
    replicas        = 3
    update_strategy = { type = "OnReplenish" }
  }
}

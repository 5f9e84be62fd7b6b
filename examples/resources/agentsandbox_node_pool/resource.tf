# Untrusted code runs under gVisor (runsc) on the nodes of the "gvisor" group,
# which nothing else may use. Same declaration as examples/gitops/node-pool.yaml.
resource "agentsandbox_node_pool" "gvisor" {
  name = "gvisor"
  spec = {
    runtime_handler = "runsc"
    node_selector   = { "agentsandbox.dev/node-group" = "gvisor" }
    taints = [{
      key    = "agentsandbox.dev/runtime"
      value  = "gvisor"
      effect = "NoSchedule"
    }]
    overhead = { cpu = "100m", memory = "64Mi" }
  }
}

# How many pre-started sandboxes are ready to be claimed.
data "agentsandbox_warm_pool" "python" {
  name = "python"
}

output "python_ready" {
  value = "${data.agentsandbox_warm_pool.python.status.ready_replicas}/${data.agentsandbox_warm_pool.python.spec.replicas}"
}

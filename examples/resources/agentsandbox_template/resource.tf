# The blueprint of a Python sandbox: a persistent workspace, egress to the
# public internet on 443 only, no cluster-internal or metadata addresses.
# The image is the Debian python3 image hack/node.sh builds for the local
# real node (no registry needed); on your cluster, name your registry's.
# Same declaration as examples/gitops/template.yaml.
resource "agentsandbox_template" "python" {
  name = "python"
  spec = {
    image   = "localhost/agentsandbox/python:3.11"
    command = ["sleep", "infinity"]
    env     = [{ name = "PIP_DISABLE_PIP_VERSION_CHECK", value = "1" }]
    ports   = [{ name = "jupyter", container_port = 8888 }]
    resources = {
      requests = { cpu = "200m", memory = "256Mi" }
      limits   = { cpu = "2", memory = "2Gi" }
    }
    workspace     = { persistent = true, size = "5Gi" }
    node_pool_ref = { name = "gvisor" }
    network = {
      # Names resolve through the cluster's resolver (off by default): with
      # the internet open on 443, DNS adds no way out.
      cluster_dns = true
      egress = [{
        cidr   = "0.0.0.0/0"
        except = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"]
        ports  = [{ port = 443 }]
      }]
    }
    # Stopped (workspace kept) after 30 minutes without use; the next exec,
    # ssh or attach starts it again. Deleted after three days stopped.
    lifecycle = { ttl = "8h", shutdown_policy = "Stop", idle_timeout = "30m", delete_after_stopped = "72h" }
  }
}

# The "agent inside" template of template.yaml, with Terraform or OpenTofu:
# the sandbox reaches the model only through the egress gateway's endpoint,
# which adds the key from a Secret the agent cannot read, and PyPI by name.
resource "agentsandbox_template" "agent" {
  name = "agent"
  spec = {
    image   = "localhost/agentsandbox/python:3.11"
    command = ["sleep", "infinity"]
    env = [
      { name = "OPENAI_BASE_URL", value = "$(AGENTSANDBOX_ENDPOINT_OPENAI)/v1" },
      { name = "OPENAI_API_KEY", value = "brokered-by-the-egress-gateway" },
    ]
    resources = {
      requests = { cpu = "200m", memory = "256Mi" }
      limits   = { cpu = "2", memory = "2Gi" }
    }
    workspace = { persistent = true, size = "5Gi" }
    network = {
      cluster_dns = false
      egress      = [{ hosts = ["pypi.org", "files.pythonhosted.org"], ports = [{ port = 443 }] }]
      endpoints = [{
        name = "openai"
        url  = "https://api.openai.com"
        credential = {
          secret_ref = { namespace = "agentsandbox-system", name = "openai", key = "api-key" }
          header     = "Authorization"
          prefix     = "Bearer "
        }
      }]
    }
    lifecycle = { ttl = "8h", idle_timeout = "30m" }
  }
}

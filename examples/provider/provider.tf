# Point the provider at a cluster the way the kubernetes and helm providers
# do. It does not contact the cluster until a resource needs it, so the
# cluster may be created in the same apply.
provider "agentsandbox" {
  config_path    = "~/.kube/config"
  config_context = "platform-prod"
}

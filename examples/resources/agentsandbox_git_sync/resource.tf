# Keeps the cluster in step with the declarations under clusters/dev of a
# platform repository, pulled every five minutes with a token from the
# Secret "platform-git" in the reconciler's namespace.
resource "agentsandbox_git_sync" "platform" {
  name = "platform"
  spec = {
    url        = "https://git.example.com/platform/sandboxes.git"
    ref        = { branch = "main" }
    path       = "./clusters/dev"
    interval   = "5m"
    secret_ref = { name = "platform-git" }
  }
}

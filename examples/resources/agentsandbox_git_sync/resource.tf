# Keeps the cluster in step with the declarations under clusters/dev of a
# platform repository, pulled every five minutes (30 seconds after a failed
# sync) with a token from the Secret "platform-git" in the reconciler's
# namespace, and applied as the ServiceAccount "platform-sync" there: the
# repository can change only what that account's RBAC allows.
resource "agentsandbox_git_sync" "platform" {
  name = "platform"
  spec = {
    url                  = "https://git.example.com/platform/sandboxes.git"
    ref                  = { branch = "main" }
    path                 = "./clusters/dev"
    interval             = "5m"
    retry_interval       = "30s"
    secret_ref           = { name = "platform-git" }
    service_account_name = "platform-sync"
  }
}

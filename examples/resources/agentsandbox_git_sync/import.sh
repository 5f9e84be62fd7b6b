# Import by name.
terraform import agentsandbox_git_sync.platform platform

# Import by name.
terraform import agentsandbox_warm_pool.python python

# Import by name.
terraform import agentsandbox_node_pool.gvisor gvisor

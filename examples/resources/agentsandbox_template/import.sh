# Import by name.
terraform import agentsandbox_template.python python

# Import by name.
terraform import agentsandbox_sandbox.alice_scratch alice-scratch

# Read a template the platform team declares elsewhere, e.g. to show its
# image in another configuration.
data "agentsandbox_template" "python" {
  name = "python"
}

output "python_image" {
  value = data.agentsandbox_template.python.spec.image
}

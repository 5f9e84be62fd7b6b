#!/usr/bin/env bash
# `make docs`: generates docs/ with tfplugindocs (pinned) from the provider's
# schema, examples/ and templates/. HashiCorp Terraform cannot be built here,
# so the schema comes from OpenTofu (`tofu providers schema -json`) with the
# freshly built provider installed through a dev override.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
tools/build.sh tofu tfplugindocs
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

go build -o "${work}/bin/terraform-provider-agentsandbox" .
cat >"${work}/tofurc" <<HCL
provider_installation {
  dev_overrides {
    "registry.opentofu.org/agentsandbox/agentsandbox" = "${work}/bin"
  }
}
HCL
mkdir -p "${work}/config"
cat >"${work}/config/main.tf" <<'HCL'
terraform {
  required_providers {
    agentsandbox = { source = "agentsandbox/agentsandbox" }
  }
}
HCL
TF_CLI_CONFIG_FILE="${work}/tofurc" "$(tools/build.sh --print-bin tofu)/tofu" -chdir="${work}/config" \
	providers schema -json >"${work}/schema.json" 2>"${work}/tofu.log" || { cat "${work}/tofu.log" >&2; exit 1; }
# tfplugindocs looks the provider up by its short name.
sed -i 's#"registry.opentofu.org/agentsandbox/agentsandbox"#"agentsandbox"#' "${work}/schema.json"

"$(tools/build.sh --print-bin tfplugindocs)/tfplugindocs" generate \
	--provider-name agentsandbox --rendered-provider-name "Agent Sandbox" \
	--providers-schema "${work}/schema.json" \
	--examples-dir examples --website-source-dir templates --rendered-website-dir docs

#!/usr/bin/env bash
# `make install-provider`: builds the provider into a filesystem mirror under
# the cache and writes a CLI configuration that installs it from there, so a
# plain `tofu init` or `terraform init` works before the provider is
# published (README, "Install on a cluster"; docs/guides/terraform.md).
#
# The mirror holds the same binary under both registries' host names:
# `source = "agentsandbox/agentsandbox"` means registry.terraform.io/… to
# Terraform and registry.opentofu.org/… to OpenTofu. Every other provider
# still comes from its registry. PROVIDER_VERSION (default 0.1.0) is the
# version the mirror offers.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${AGENTSANDBOX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agentsandbox}"
version="${PROVIDER_VERSION:-0.1.0}"
if [[ ! "${version}" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
	echo "PROVIDER_VERSION=${version}: a version such as 0.1.0 (the mirror's directory and the lock file use it)" >&2
	exit 2
fi
mirror="${cache}/providers"
platform="$(go env GOOS)_$(go env GOARCH)"
hosts=(registry.terraform.io registry.opentofu.org)

binary="terraform-provider-agentsandbox_v${version}"
first=""
for host in "${hosts[@]}"; do
	dir="${mirror}/${host}/agentsandbox/agentsandbox/${version}/${platform}"
	mkdir -p "${dir}"
	if [[ -z "${first}" ]]; then
		# -trimpath: the same sources give the same binary, so reinstalling
		# an unchanged provider keeps the checksum a lock file recorded.
		(cd "${root}" && go build -trimpath -o "${dir}/${binary}" \
			-ldflags "-X github.com/agentsandbox/terraform-provider-agentsandbox/internal/version.Version=v${version}" .)
		first="${dir}/${binary}"
	else
		cp "${first}" "${dir}/${binary}"
	fi
done

sources="$(printf '"%s/agentsandbox/agentsandbox", ' "${hosts[@]}")"
sources="${sources%, }"
cat >"${mirror}/cli.tfrc" <<HCL
# Written by make install-provider: install agentsandbox/agentsandbox from
# the local mirror, every other provider from its registry.
provider_installation {
  filesystem_mirror {
    path    = "${mirror}"
    include = [${sources}]
  }
  direct {
    exclude = [${sources}]
  }
}
HCL
printf '==> provider %s installed in %s\n' "${version}" "${mirror}" >&2
printf '==> export TF_CLI_CONFIG_FILE=%s, then tofu init (or terraform init)\n' "${mirror}/cli.tfrc" >&2

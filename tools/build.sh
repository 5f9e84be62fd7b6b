#!/usr/bin/env bash
# Builds the pinned tools the local cluster, the code generators and the
# Terraform tests need, once per version, into a cache outside the repository:
#
#   $AGENTSANDBOX_CACHE/<tool>-<version>/   (default ~/.cache/agentsandbox)
#
# Nothing is downloaded but Go modules: the kube binaries, etcd, kwok and
# OpenTofu are all compiled from their published modules. A tool whose
# directory already holds its binaries is skipped, so repeat runs cost
# nothing. Usage: tools/build.sh [tool...]   (default: all)
#
# Prints nothing but progress on stderr; `tools/build.sh --print-bin TOOL`
# prints the directory holding TOOL's binaries.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "${here}/versions.env"
cache="${AGENTSANDBOX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agentsandbox}"

log() { printf '==> %s\n' "$*" >&2; }

tool_version() {
	case "$1" in
	kube) echo "${KUBE_VERSION}" ;;
	etcd) echo "${ETCD_VERSION}" ;;
	kwok) echo "${KWOK_VERSION}" ;;
	tofu) echo "${OPENTOFU_VERSION}" ;;
	controller-gen) echo "${CONTROLLER_GEN_VERSION}" ;;
	tfplugindocs) echo "${TFPLUGINDOCS_VERSION}" ;;
	*)
		echo "unknown tool $1 (want kube, etcd, kwok, tofu, controller-gen, tfplugindocs)" >&2
		return 1
		;;
	esac
}

tool_dir() { echo "${cache}/$1-$(tool_version "$1")"; }

# module_copy downloads MODULE@VERSION through the module proxy and prints a
# writable copy of its source tree (the module cache is read-only).
module_copy() {
	local dir src
	src="$(cd / && GOFLAGS=-mod=mod go mod download -json "$1@$2" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
	dir="$(mktemp -d "${cache}/.src-XXXXXX")"
	cp -r "${src}/." "${dir}/"
	chmod -R u+w "${dir}"
	echo "${dir}"
}

build_kube() {
	local out="$1" src minor
	src="$(module_copy k8s.io/kubernetes "${KUBE_VERSION}")"
	# The module zip cannot resolve ./staging replacements; point every
	# staging module at its published release of the same version instead.
	minor="v0.${KUBE_VERSION#v1.}"
	sed -i -E "s#^(\s*)(k8s\.io/[a-z0-9-]+) => \./staging/src/k8s\.io/[a-z0-9-]+#\1\2 => \2 ${minor}#" "${src}/go.mod"
	rm -f "${src}/go.work" "${src}/go.work.sum"
	rm -rf "${src}/vendor"
	local pkg=k8s.io/component-base/version
	local ldflags="-s -w -X ${pkg}.gitVersion=${KUBE_VERSION} -X ${pkg}.gitMajor=1"
	ldflags+=" -X ${pkg}.gitMinor=$(echo "${KUBE_VERSION}" | cut -d. -f2) -X ${pkg}.gitTreeState=clean"
	ldflags+=" -X ${pkg}.buildDate=1970-01-01T00:00:00Z -X ${pkg}.gitCommit=0000000000000000000000000000000000000000"
	(cd "${src}" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "${ldflags}" -o "${out}/" \
		./cmd/kube-apiserver ./cmd/kube-controller-manager ./cmd/kube-scheduler ./cmd/kubectl)
	rm -rf "${src}"
}

build_etcd() {
	grep -q "go.etcd.io/etcd/server/v3 ${ETCD_VERSION}\$" "${here}/etcd/go.mod" || {
		echo "tools/etcd/go.mod does not require etcd ${ETCD_VERSION}; update it with go get" >&2
		return 1
	}
	(cd "${here}/etcd" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$1/etcd" .)
}

build_kwok() {
	GOBIN="$1" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" \
		"sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}" "sigs.k8s.io/kwok/cmd/kwokctl@${KWOK_VERSION}"
}

build_tofu() {
	local src
	src="$(module_copy github.com/opentofu/opentofu "${OPENTOFU_VERSION}")"
	(cd "${src}" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath \
		-ldflags "-s -w -X github.com/opentofu/opentofu/version.dev=no" -o "$1/tofu" ./cmd/tofu)
	rm -rf "${src}"
}

build_controller-gen() {
	GOBIN="$1" go install "sigs.k8s.io/controller-tools/cmd/controller-gen@${CONTROLLER_GEN_VERSION}"
}

build_tfplugindocs() {
	GOBIN="$1" go install "github.com/hashicorp/terraform-plugin-docs/cmd/tfplugindocs@${TFPLUGINDOCS_VERSION}"
}

ensure() {
	local tool="$1" dir tmp start
	dir="$(tool_dir "${tool}")"
	[[ -f "${dir}/.complete" ]] && return 0
	mkdir -p "${cache}"
	tmp="$(mktemp -d "${cache}/.build-${tool}-XXXXXX")"
	start=${SECONDS}
	log "building ${tool} $(tool_version "${tool}") into ${dir} (first run only)"
	"build_${tool}" "${tmp}"
	touch "${tmp}/.complete"
	rm -rf "${dir}"
	mv "${tmp}" "${dir}"
	log "built ${tool} in $((SECONDS - start))s"
}

if [[ "${1:-}" == "--print-bin" ]]; then
	tool_dir "$2"
	exit 0
fi

tools=("$@")
[[ ${#tools[@]} -gt 0 ]] || tools=(etcd kwok controller-gen kube tofu tfplugindocs)
for t in "${tools[@]}"; do ensure "$t"; done

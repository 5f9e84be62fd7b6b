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
	gotestsum) echo "${GOTESTSUM_VERSION}" ;;
	golangci-lint) echo "${GOLANGCI_LINT_VERSION}" ;;
	terraform) echo "${TERRAFORM_VERSION}" ;;
	containerd) echo "${CONTAINERD_VERSION}" ;;
	gvisor) echo "${GVISOR_VERSION}" ;;
	kube-router) echo "${KUBE_ROUTER_VERSION}" ;;
	kube-proxy) echo "${KUBE_VERSION}" ;;
	*)
		echo "unknown tool $1 (want kube, etcd, kwok, tofu, controller-gen, tfplugindocs, gotestsum, golangci-lint, terraform, containerd, gvisor, kube-router, kube-proxy)" >&2
		return 1
		;;
	esac
}

tool_dir() { echo "${cache}/$1-$(tool_version "$1")"; }

# tool_binaries lists what a tool's directory must hold. A directory built
# before a binary joined the list is rebuilt, so adding one (kubelet joined
# kube for the real node) needs no version bump.
tool_binaries() {
	case "$1" in
	kube) echo kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet ;;
	kwok) echo kwok kwokctl ;;
	containerd) echo containerd containerd-shim-runc-v2 ctr ;;
	gvisor) echo runsc containerd-shim-runsc-v1 ;;
	*) echo "$1" ;;
	esac
}

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
	build_kube_commands "$1" kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet
}

# build_kube-proxy builds the real node's service proxy: a tool of its own,
# so that a cache built before the real node needed it keeps its kube.
build_kube-proxy() {
	build_kube_commands "$1" kube-proxy
}

# build_kube_commands OUT COMMAND... builds commands of k8s.io/kubernetes
# at ${KUBE_VERSION} into OUT.
build_kube_commands() {
	local out="$1" src minor cmd
	shift
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
	local pkgs=()
	for cmd in "$@"; do pkgs+=("./cmd/${cmd}"); done
	(cd "${src}" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "${ldflags}" -o "${out}/" "${pkgs[@]}")
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

build_gotestsum() {
	GOBIN="$1" go install "gotest.tools/gotestsum@${GOTESTSUM_VERSION}"
}

build_golangci-lint() {
	GOBIN="$1" go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@${GOLANGCI_LINT_VERSION}"
}

build_terraform() {
	GOBIN="$1" go install "github.com/hashicorp/terraform@${TERRAFORM_VERSION}"
}

build_containerd() {
	local src
	src="$(module_copy github.com/containerd/containerd/v2 "${CONTAINERD_VERSION}")"
	(cd "${src}" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -tags "no_btrfs no_devmapper no_zfs" \
		-ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=${CONTAINERD_VERSION}" -o "$1/" \
		./cmd/containerd ./cmd/containerd-shim-runc-v2 ./cmd/ctr)
	rm -rf "${src}"
}

# build_gvisor builds runsc and gVisor's containerd shim. The shim raises its
# own OOM protection to -999, which needs CAP_SYS_RESOURCE; where root lacks
# it (these VMs do) the shim cannot start, so it is built to keep the score
# it inherits. That only changes which process the kernel's OOM killer picks
# first on a full node, nothing about the sandbox's isolation.
build_gvisor() {
	local src manager=pkg/shim/v1/manager.go
	src="$(module_copy gvisor.dev/gvisor "${GVISOR_VERSION}")"
	sed -i 's/^\toomScoreMax = -999$/\toomScoreMax = 0/' "${src}/${manager}"
	grep -q '^	oomScoreMax = 0$' "${src}/${manager}" || {
		echo "gVisor ${GVISOR_VERSION}: ${manager} no longer sets oomScoreMax = -999; review the shim patch" >&2
		return 1
	}
	(cd "${src}" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$1/" ./runsc)
	(cd "${src}" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" \
		-o "$1/containerd-shim-runsc-v1" ./shim)
	rm -rf "${src}"
}

build_kube-router() {
	local src
	src="$(module_copy github.com/cloudnativelabs/kube-router/v2 "${KUBE_ROUTER_VERSION}")"
	(cd "${src}" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" \
		-o "$1/kube-router" ./cmd/kube-router)
	rm -rf "${src}"
}

# complete tells whether a tool's directory holds everything it should.
complete() {
	local dir="$1" bin
	[[ -f "${dir}/.complete" ]] || return 1
	for bin in $(tool_binaries "$2"); do
		[[ -x "${dir}/${bin}" ]] || return 1
	done
}

ensure() {
	local tool="$1" dir tmp start
	dir="$(tool_dir "${tool}")"
	complete "${dir}" "${tool}" && return 0
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
[[ ${#tools[@]} -gt 0 ]] || tools=(etcd kwok controller-gen kube tofu tfplugindocs gotestsum golangci-lint terraform containerd gvisor kube-router kube-proxy)
for t in "${tools[@]}"; do ensure "$t"; done

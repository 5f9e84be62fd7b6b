# shellcheck shell=bash
# The node's images, built on this machine, never pulled, and imported
# into its containerd: python3 and pause from Debian packages, and the
# sandbox gate's from this checkout.

# build_images makes the node's images from Debian packages, once per
# recipe (images_dir names it): a minbase root file system with python3
# (mmdebstrap, through the machine's Debian mirror), and the pause
# container of hack/pause. Both are packed by hack/ociimage into archives
# containerd imports.
build_images() {
	[[ -f "${images_dir}/.complete" ]] && return 0
	local tmp start=${SECONDS}
	log "building the images ${python_image} and ${pause_image} from Debian ${debian_suite} (first run only)"
	mkdir -p "${cache}"
	tmp="$(mktemp -d "${cache}/.images-XXXXXX")"
	(cd "${root}" && CGO_ENABLED=0 go build -o "${tmp}/ociimage" ./hack/ociimage &&
		CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${tmp}/pause-root/pause" ./hack/pause)
	mmdebstrap --quiet --mode=root --variant=minbase --include=python3 \
		--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' \
		"${debian_suite}" "${tmp}/python-rootfs.tar" "${debian_mirror}"
	"${tmp}/ociimage" -rootfs "${tmp}/python-rootfs.tar" -tag "${python_image}" -out "${tmp}/python.tar"
	tar -C "${tmp}/pause-root" -cf "${tmp}/pause-rootfs.tar" pause
	"${tmp}/ociimage" -rootfs "${tmp}/pause-rootfs.tar" -tag "${pause_image}" -entrypoint /pause -out "${tmp}/pause.tar"
	rm -rf "${tmp}/pause-root" "${tmp}"/*-rootfs.tar "${tmp}/ociimage"
	touch "${tmp}/.complete"
	rm -rf "${images_dir}"
	mv "${tmp}" "${images_dir}"
	log "built the images in $((SECONDS - start))s"
}

# build_gate_image packs cmd/sandbox-gate, as this checkout has it, into
# the image every sandbox pod starts with (${gate_image}), with the sandbox
# agent and the egress gateway, as the Dockerfile's image has them: static
# binaries alone, built and imported at each up, of a running node too (a
# few seconds), so the node never runs an older gate, agent or gateway
# than the reconciler and the tests expect.
build_gate_image() {
	rm -rf "${dir}/gate"
	mkdir -p "${dir}/gate/root"
	(cd "${root}" && CGO_ENABLED=0 go build -o "${dir}/gate/ociimage" ./hack/ociimage &&
		CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${dir}/gate/root/sandbox-gate" ./cmd/sandbox-gate &&
		CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${dir}/gate/root/agentsandbox-agent" ./cmd/agentsandbox-agent &&
		CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${dir}/gate/root/agentsandbox-gateway" ./cmd/agentsandbox-gateway)
	tar -C "${dir}/gate/root" -cf "${dir}/gate/rootfs.tar" sandbox-gate agentsandbox-agent agentsandbox-gateway
	"${dir}/gate/ociimage" -rootfs "${dir}/gate/rootfs.tar" -tag "${gate_image}" -entrypoint /sandbox-gate -out "${dir}/gate/gate.tar"
}

import_images() {
	local image out
	for image in "$@"; do
		# ctr warns on every call that cgroup v1 is deprecated: keep its
		# output for when the import fails.
		out="$(ctr images import "${image}" 2>&1)" || { echo "${out}" >&2; return 1; }
	done
}

# shellcheck shell=bash
# The node's paths and constants, and the helpers the other parts of
# hack/node.sh use to run its tools. hack/node.sh sources this first, with
# root set to the checkout. Every constant of the node is here, once.

cache="${AGENTSANDBOX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agentsandbox}"
dir="${cache}/node"
# realnode_const NAME is the constant NAME of realnode/realnode.go, which
# keeps the node's names, addresses and limits once, for hack/node.sh and
# the tests that run sandboxes on the node.
realnode_const() {
	local value
	value="$(sed -n -E "s/^\t$1 += \"?([^\"]*)\"?\$/\1/p" "${root}/realnode/realnode.go")"
	[[ -n "${value}" ]] || {
		echo "realnode/realnode.go has no constant $1" >&2
		exit 1
	}
	echo "${value}"
}
node="$(realnode_const NodeName)"
bridge="$(realnode_const Bridge)"
node_ip="$(realnode_const NodeIP)"
pod_cidr="$(realnode_const PodCIDR)"
group_label="$(realnode_const GroupLabel)"
real_group="$(realnode_const Group)"
real_taint="$(realnode_const TaintKey)"
storage_class_name="$(realnode_const StorageClass)"
small_volume_mib="$(realnode_const SmallVolume)"
small_volume_mib="${small_volume_mib%Mi}"
pod_pids_limit="$(realnode_const PodPidsLimit)"
# The images examples and tests name; built here, never pulled.
python_image="$(realnode_const PythonImage)"
pause_image=localhost/agentsandbox/pause:1
# The sandbox pods' egress gate, with the agent and the egress gateway,
# built at each up.
gate_image="$(realnode_const GateImage)"
debian_suite=bookworm
debian_mirror="${AGENTSANDBOX_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
packages=(runc containernetworking-plugins iptables ipset nftables mmdebstrap iproute2 openssl e2fsprogs)
# The sysctls up and the kubelet change, recorded by save_host
# (teardown.sh) and restored by down.
saved_sysctls=(net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables vm.overcommit_memory kernel.panic kernel.panic_on_oops)
# build_images' recipe (images.sh) makes the images once into this
# directory. Change the last number when the recipe changes, so the images
# are rebuilt.
images_dir="${cache}/images-${debian_suite}-python3-1"
# How many local volumes the node offers (volumes.sh).
volumes=32

log() { printf '==> %s\n' "$*" >&2; }
bindir() { "${root}/tools/build.sh" --print-bin "$1"; }
bin() { echo "$(bindir "$1")/$2"; }
kubectl() { "$(bin kube kubectl)" --kubeconfig "$("${root}/hack/cluster.sh" kubeconfig)" "$@"; }
ctr() { "$(bin containerd ctr)" --address "${dir}/run/containerd.sock" --namespace k8s.io "$@"; }

#!/usr/bin/env bash
# A real node in the local cluster: kubelet, containerd v2 with runc and
# gVisor (runsc), Debian's CNI plugins on a bridge of its own, and
# NetworkPolicy enforced by kube-router. It joins the kwok cluster of
# hack/cluster.sh beside the fake nodes, so that sandboxes made by the
# project's controllers really run and their isolation can be tested.
#
#   hack/node.sh check          exit 0 when this machine can run the node,
#                               else print what is missing
#   hack/node.sh up [--demo]    start (or reuse) the node; idempotent, and
#                               recovers from a crashed run
#   hack/node.sh down           stop it and leave the machine as it was
#   hack/node.sh status         exit 0 when the node is Ready
#
# Roles. By default the node is for tests: labelled
# agentsandbox.dev/node-group=real and tainted agentsandbox.dev/real-node so
# that only node pools naming it land there, with local volumes in the
# StorageClass agentsandbox-node-local. With --demo it takes the place of
# the kwok "gvisor" group the examples' node pool selects (the kwok gvisor
# nodes are removed) and its volumes serve the default StorageClass.
#
# Networking. Pods get addresses in 10.244.0.0/24 on the bridge asbr0
# (10.244.0.1, the node's address) and a default route to it, so that what
# stops them is NetworkPolicy, not a missing route; nothing a pod sends may
# leave through the machine's own uplink (a FORWARD rule drops it), and
# nothing is masqueraded. Traffic only ever goes to addresses on this machine.
#
# Everything lives under $AGENTSANDBOX_CACHE/node; the pinned binaries come
# from tools/build.sh and the images from Debian packages (see build_images).
# Runs as root. What it changes on the machine (sysctls, a bridge, iptables
# chains and rules, nft tables, ipsets, mounts, network namespaces, cgroups)
# is recorded first and undone by down.
set -euo pipefail
# The node joins the default local cluster, whatever other cluster
# (hack/cluster.sh, AGENTSANDBOX_CLUSTER) the caller drives.
unset AGENTSANDBOX_CLUSTER

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${AGENTSANDBOX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agentsandbox}"
dir="${cache}/node"
# realnode_const NAME is the constant NAME of realnode/realnode.go, which
# keeps the node's names, addresses and limits once, for this script and
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

log() { printf '==> %s\n' "$*" >&2; }
bindir() { "${root}/tools/build.sh" --print-bin "$1"; }
bin() { echo "$(bindir "$1")/$2"; }
kubectl() { "$(bin kube kubectl)" --kubeconfig "$("${root}/hack/cluster.sh" kubeconfig)" "$@"; }
ctr() { "$(bin containerd ctr)" --address "${dir}/run/containerd.sock" --namespace k8s.io "$@"; }

# missing prints, one per line, what keeps this machine from running the
# node. Packages are not listed: up installs them.
missing() {
	[[ "$(uname -s)" == Linux ]] || { echo "Linux (this is $(uname -s))"; return; }
	[[ ${EUID} -eq 0 ]] || echo "root (kubelet, containerd and the network setup need it)"
	command -v apt-get >/dev/null || echo "apt-get (to install: ${packages[*]})"
	[[ -d /sys/fs/cgroup/memory || -f /sys/fs/cgroup/cgroup.controllers ]] || echo "a cgroup file system at /sys/fs/cgroup"
	[[ ${EUID} -eq 0 ]] || return 0
	# The commands come with the packages up installs; the kernel's support
	# is checked once they are there.
	if ! command -v ip >/dev/null; then
		:
	elif ip link add asbr-check type bridge 2>/dev/null; then
		ip link del asbr-check
	else
		echo "bridge devices (CONFIG_BRIDGE)"
	fi
	if ! command -v ipset >/dev/null; then
		:
	elif ipset create asbr-check hash:ip 2>/dev/null; then
		ipset destroy asbr-check
	else
		echo "ipset hash:ip (CONFIG_IP_SET_HASH_IP), which kube-router needs"
	fi
	[[ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]] || echo "bridge netfilter (CONFIG_BRIDGE_NETFILTER)"
	[[ -e /dev/loop-control ]] || echo "loop devices (CONFIG_BLK_DEV_LOOP), for workspaces of a fixed size"
}

check() {
	local gaps gap
	gaps="$(missing)"
	[[ -z "${gaps}" ]] && return 0
	echo "this machine cannot run the real node; it lacks:" >&2
	while IFS= read -r gap; do echo "  - ${gap}"; done <<<"${gaps}" >&2
	return 1
}

install_packages() {
	local p need=()
	for p in "${packages[@]}"; do
		dpkg -s "${p}" >/dev/null 2>&1 || need+=("${p}")
	done
	[[ ${#need[@]} -eq 0 ]] && return 0
	log "apt-get install ${need[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
}

# build_images makes the node's images from Debian packages, once per
# recipe: a minbase root file system with python3 (mmdebstrap, through the
# machine's Debian mirror), and the pause container of hack/pause. Both are
# packed by hack/ociimage into archives containerd imports.
# Change the last number when the recipe changes, so the images are rebuilt.
images_dir="${cache}/images-${debian_suite}-python3-1"
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

# save_host records what up changes on the machine, once: a crashed run's
# record is kept, so down restores the state from before the first up.
saved_sysctls=(net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables vm.overcommit_memory kernel.panic kernel.panic_on_oops)
save_host() {
	mkdir -p "${dir}"
	[[ -f "${dir}/host.sysctl" ]] && return 0
	local k
	for k in "${saved_sysctls[@]}"; do echo "${k}=$(sysctl -n "${k}")"; done >"${dir}/host.sysctl.tmp"
	ipset list -n 2>/dev/null | sort >"${dir}/host.ipsets"
	# The shims keep their sockets and runc its state under /run/containerd.
	[[ -e /run/containerd ]] && touch "${dir}/host.run-containerd"
	# Tables first: listing iptables chains creates the tables it lists.
	nft list tables >"${dir}/host.nft"
	chains >"${dir}/host.chains"
	find /var/run/netns -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | sort >"${dir}/host.netns" || true
	mv "${dir}/host.sysctl.tmp" "${dir}/host.sysctl"
}

# chains lists the iptables chains of the machine, as "command table chain".
chains() {
	local cmd table
	for cmd in iptables ip6tables; do
		for table in filter nat mangle raw; do
			"${cmd}" -t "${table}" -S 2>/dev/null | awk -v p="${cmd} ${table}" '/^-N / {print p, $2}'
		done
	done
}

# remove_chains removes the chains the kubelet, kube-router and the CNI
# plugins made (KUBE-*, CNI-*) that were not there before up, and the
# rules that jump to them.
remove_chains() {
	local ours cmd table chain rule
	ours="$(chains | grep -E ' (KUBE-|CNI-)[^ ]*$' | grep -vxF -f "${dir}/host.chains" || true)"
	[[ -n "${ours}" ]] || return 0
	while read -r cmd table chain; do
		"${cmd}" -t "${table}" -S | { grep -E -- "-j ${chain}( |\$)" || true; } | sed 's/^-A /-D /' |
			while read -r rule; do eval "${cmd} -t ${table} ${rule}" || true; done
		"${cmd}" -t "${table}" -F "${chain}" || true
	done <<<"${ours}"
	while read -r cmd table chain; do
		"${cmd}" -t "${table}" -X "${chain}" || true
	done <<<"${ours}"
}

# uplink is the interface of the machine's default route: pods must never
# send through it.
uplink() { ip -o route show default | awk '{for (i = 1; i < NF; i++) if ($i == "dev") {print $(i + 1); exit}}'; }

guard_rule() { echo "FORWARD -s ${pod_cidr} -o $1 -m comment --comment agentsandbox-node-no-uplink -j DROP"; }
no_ipv6_rule() { echo "$1 -i ${bridge} -m comment --comment agentsandbox-node-no-ipv6 -j DROP"; }

network_up() {
	if ! ip link show "${bridge}" >/dev/null 2>&1; then
		ip link add "${bridge}" type bridge
		ip addr add "${node_ip}/24" dev "${bridge}"
	fi
	ipv6 closed
	ip link set "${bridge}" up
	local out
	out="$(uplink)"
	if [[ -n "${out}" ]]; then
		echo "${out}" >"${dir}/uplink"
		# shellcheck disable=SC2046 # the rule is a list of words
		iptables -C $(guard_rule "${out}") 2>/dev/null || iptables -I $(guard_rule "${out}")
	fi
	sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1
}

# ipv6 closed: no IPv6 on the node's pod network, at three layers: the
# bridge has no address (so no link-local one to reach the node by), every
# pod's network namespace has IPv6 off (the CNI's tuning plugin, see
# cni_config), and any IPv6 packet from the bridge, to another pod (bridged,
# which bridge netfilter hands to ip6tables) or to the node, is dropped.
# NetworkPolicy here (kube-router) is IPv4 only: a dual-stack cluster needs
# a CNI that enforces it for both families.
#
# ipv6 open undoes all three for the pods started after it, as the node was
# before: for the test that proves the isolation check finds it.
ipv6() {
	local chain
	case "$1" in
	closed)
		sysctl -qw "net.ipv6.conf.${bridge}.disable_ipv6=1" net.bridge.bridge-nf-call-ip6tables=1
		for chain in INPUT FORWARD; do
			# shellcheck disable=SC2046 # the rule is a list of words
			ip6tables -C $(no_ipv6_rule "${chain}") 2>/dev/null || ip6tables -I $(no_ipv6_rule "${chain}")
		done
		;;
	open)
		sysctl -qw "net.ipv6.conf.${bridge}.disable_ipv6=0"
		for chain in INPUT FORWARD; do
			# shellcheck disable=SC2046 # the rule is a list of words
			while ip6tables -D $(no_ipv6_rule "${chain}") 2>/dev/null; do :; done
		done
		;;
	esac
	cni_config "$1"
}

# cni_config writes the pods' network configuration: a bridge, host-local
# addresses, and, unless IPv6 is open, the tuning plugin turning IPv6 off.
cni_config() {
	local tuning=''
	if [[ "$1" == closed ]]; then
		tuning=',
    {"type": "tuning", "sysctl": {
      "net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1", "net.ipv6.conf.lo.disable_ipv6": "1"
    }}'
	fi
	mkdir -p "${dir}/cni"
	cat >"${dir}/cni/10-agentsandbox.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "agentsandbox-node",
  "plugins": [
    {
      "type": "bridge", "bridge": "${bridge}", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": {
        "type": "host-local", "dataDir": "${dir}/cni/ipam",
        "ranges": [[{"subnet": "${pod_cidr}", "gateway": "${node_ip}"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}${tuning}
  ]
}
JSON
}

running() { [[ -f "${dir}/pids/$1" ]] && kill -0 "$(cat "${dir}/pids/$1")" 2>/dev/null; }

# The node's mounts are its own. containerd, the kubelet and everything they
# start (shims, runsc, pods) run in a mount namespace of the node's, made by
# a holder process (unshare, propagation slave: it sees the machine's
# mounts, and the machine and every other mount namespace on it never see
# the node's). A network namespace's bind mount in /run/netns, a pod's
# volume or an overlay root is then never copied into a mount namespace
# that other software on the machine makes while a pod runs, where it would
# keep its file busy and its pod Terminating for good (the kubelet's
# "remove netns: ... device or resource busy"). When the holder and the
# node's processes are gone, the namespace goes with every mount in it.
mount_namespace_up() {
	running mount-namespace || start mount-namespace unshare --mount --propagation slave sleep infinity
	local ns i
	ns="/proc/$(cat "${dir}/pids/mount-namespace")/ns/mnt"
	for i in $(seq 1 50); do
		running mount-namespace || { tail -5 "${dir}/logs/mount-namespace.log" >&2; return 1; }
		# The holder has unshared once its namespace is not this shell's.
		if [[ "$(readlink "${ns}")" != "$(readlink /proc/self/ns/mnt)" ]]; then
			in_node=(nsenter "--mount=${ns}" --)
			return 0
		fi
		sleep 0.1
	done
	echo "the node's mount namespace holder did not unshare in 5s" >&2
	return 1
}

# in_node is the prefix that runs a command in the node's mount namespace
# (nsenter execs it, so the PID start records is the command's); set by
# mount_namespace_up.
in_node=()

start() {
	local name="$1"
	shift
	running "${name}" && return 0
	mkdir -p "${dir}/pids" "${dir}/logs"
	nohup "$@" >>"${dir}/logs/${name}.log" 2>&1 &
	echo $! >"${dir}/pids/${name}"
}

# containerd_up starts containerd with two runtimes: runc (Debian's, built
# with libseccomp, so RuntimeDefault seccomp is enforced) and runsc.
# restrict_oom_score_adj: root here may lack CAP_SYS_RESOURCE, and then
# nothing can be given a negative OOM score (see tools/build.sh, gvisor).
containerd_up() {
	mkdir -p "${dir}/run" "${dir}/containerd"
	cat >"${dir}/runsc.toml" <<TOML
binary_name = "$(bin gvisor runsc)"
root = "${dir}/runsc"
TOML
	cat >"${dir}/containerd.toml" <<TOML
version = 3
root = "${dir}/containerd/root"
state = "${dir}/containerd/state"
[grpc]
  address = "${dir}/run/containerd.sock"
[ttrpc]
  address = "${dir}/run/containerd.sock.ttrpc"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "${pause_image}"
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runsc]
      runtime_type = "io.containerd.runsc.v1"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runsc.options]
        TypeUrl = "io.containerd.runsc.v1.options"
        ConfigPath = "${dir}/runsc.toml"
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "${dir}/cni"
TOML
	# The shims are found on PATH.
	PATH="$(bindir containerd):$(bindir gvisor):${PATH}" \
		start containerd "${in_node[@]}" "$(bin containerd containerd)" --config "${dir}/containerd.toml"
	local i
	for i in $(seq 1 100); do
		[[ -S "${dir}/run/containerd.sock" ]] && ctr version >/dev/null 2>&1 && break
		running containerd || { tail -20 "${dir}/logs/containerd.log" >&2; return 1; }
		sleep 0.2
	done
	import_images "${images_dir}/pause.tar" "${images_dir}/python.tar"
}

import_images() {
	local image out
	for image in "$@"; do
		# ctr warns on every call that cgroup v1 is deprecated: keep its
		# output for when the import fails.
		out="$(ctr images import "${image}" 2>&1)" || { echo "${out}" >&2; return 1; }
	done
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

# kubelet_credentials gives the kubelet a node identity of its own
# (system:node:NAME), signed by the cluster's CA: the Node authorizer and
# NodeRestriction then limit it to its own node and pods.
kubelet_credentials() {
	local pki="${cache}/kwok/clusters/agentsandbox/pki" server
	server="$(kubectl config view --raw -o jsonpath='{.clusters[0].cluster.server}')"
	mkdir -p "${dir}/pki"
	if ! openssl x509 -checkend 3600 -noout -in "${dir}/pki/kubelet-client.crt" >/dev/null 2>&1 ||
		! openssl verify -CAfile "${pki}/ca.crt" "${dir}/pki/kubelet-client.crt" >/dev/null 2>&1; then
		openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -sha256 \
			-keyout "${dir}/pki/kubelet-client.key" -subj "/O=system:nodes/CN=system:node:${node}" \
			-out "${dir}/pki/kubelet-client.csr" 2>/dev/null
		openssl x509 -req -in "${dir}/pki/kubelet-client.csr" -CA "${pki}/ca.crt" -CAkey "${pki}/ca.key" \
			-CAcreateserial -days 30 -sha256 -out "${dir}/pki/kubelet-client.crt" 2>/dev/null
	fi
	cp "${pki}/ca.crt" "${dir}/pki/ca.crt"
	cat >"${dir}/kubelet.kubeconfig" <<YAML
apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "${server}", certificate-authority: "${dir}/pki/ca.crt"}}]
users: [{name: kubelet, user: {client-certificate: "${dir}/pki/kubelet-client.crt", client-key: "${dir}/pki/kubelet-client.key"}}]
contexts: [{name: kubelet, context: {cluster: local, user: kubelet}}]
current-context: kubelet
YAML
}

kubelet_up() {
	local group="${real_group}" taint_key="${real_taint}" taint_value=true
	if [[ "${role}" == demo ]]; then
		group=gvisor taint_key=agentsandbox.dev/runtime taint_value=gvisor
	fi
	# Anonymous requests are refused; the API server authenticates with the
	# cluster's client certificate, and what it may do is asked of the API
	# server (webhook), as on any production node.
	cat >"${dir}/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: ${node_ip}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: ${dir}/pki/ca.crt}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://${dir}/run/containerd.sock
imageServiceEndpoint: unix://${dir}/run/containerd.sock
podLogsDir: ${dir}/pod-logs
resolvConf: ""
serializeImagePulls: false
registerWithTaints: [{key: ${taint_key}, value: "${taint_value}", effect: NoSchedule}]
evictionHard: {memory.available: 100Mi, nodefs.available: 2%, imagefs.available: 2%}
# Every pod gets at most this many processes and threads (its cgroup's
# pids.max), so a fork bomb in one sandbox exhausts its own limit, not the
# node's. Under gVisor the sentry's threads and its stub processes count.
podPidsLimit: ${pod_pids_limit}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
YAML
	PATH="$(bindir containerd):${PATH}" start kubelet "${in_node[@]}" "$(bin kube kubelet)" \
		--config "${dir}/kubelet.yaml" --kubeconfig "${dir}/kubelet.kubeconfig" \
		--root-dir "${dir}/kubelet" --cert-dir "${dir}/pki" \
		--hostname-override "${node}" --node-ip "${node_ip}" --node-labels "${group_label}=${group}"
	local i
	for i in $(seq 1 120); do
		kubectl get node "${node}" >/dev/null 2>&1 && break
		running kubelet || { tail -20 "${dir}/logs/kubelet.log" >&2; return 1; }
		sleep 0.5
	done
	# kube-router reads the node's pod range; nothing allocates one here.
	kubectl patch node "${node}" --type merge \
		-p "{\"spec\":{\"podCIDR\":\"${pod_cidr}\",\"podCIDRs\":[\"${pod_cidr}\"]}}" >/dev/null
	kubectl wait --for condition=Ready --timeout 120s "node/${node}" >/dev/null
}

# kube-router enforces NetworkPolicy with iptables and ipsets, and does
# nothing else here (no routing, no service proxy, no CNI).
#
# Its firewall lets any pod reach, whatever the policy, the service range
# and the node's own addresses on the NodePort range (for the service
# proxy it would otherwise be): a listener of the machine's on port 30080,
# or on an address in 10.96.0.0/12, was open to a default-deny sandbox.
# With no service proxy here there are no services to exempt, and both
# exemptions cannot be turned off, so they name what nothing uses: the
# documentation address 192.0.2.0/32 and ports 1 and 2.
kube_router_up() {
	start kube-router "$(bin kube-router kube-router)" --kubeconfig "$("${root}/hack/cluster.sh" kubeconfig)" \
		--run-firewall=true --run-router=false --run-service-proxy=false --enable-cni=false \
		--service-cluster-ip-range=192.0.2.0/32 --service-node-port-range=1-2 \
		--enable-pod-egress=false --hostname-override "${node}" --health-port=0 --metrics-port=0
	local i
	for i in $(seq 1 100); do
		iptables -S KUBE-ROUTER-FORWARD >/dev/null 2>&1 && return 0
		running kube-router || { tail -20 "${dir}/logs/kube-router.log" >&2; return 1; }
		sleep 0.3
	done
	echo "kube-router did not install its rules in 30s; see ${dir}/logs/kube-router.log" >&2
	return 1
}

# kube-proxy is the node's service proxy, in nftables mode: sandboxes reach
# the egress gateway at its Service's cluster IP, as on any cluster. Its
# rules live in a table of their own, and an nftables accept in one table
# does not override a drop in another, so nothing it installs can let a
# connection past kube-router's policy; and a policy sees a connection to a
# Service after the translation, with the pod's address, as enforcers do.
# NodePorts it opens only on an address the node does not have; its health
# and metrics only on loopback, which pods do not reach; and it keeps the
# OOM score it inherits (root here may not lower it, see tools/build.sh).
kube_proxy_up() {
	start kube-proxy "$(bin kube-proxy kube-proxy)" --kubeconfig "$("${root}/hack/cluster.sh" kubeconfig)" \
		--proxy-mode=nftables --hostname-override "${node}" --cluster-cidr "${pod_cidr}" \
		--nodeport-addresses=192.0.2.1/32 --conntrack-max-per-core=0 --oom-score-adj=0 \
		--healthz-bind-address=127.0.0.1:10256 --metrics-bind-address=127.0.0.1:10249
	local i
	for i in $(seq 1 100); do
		nft list table ip kube-proxy >/dev/null 2>&1 && return 0
		running kube-proxy || { tail -20 "${dir}/logs/kube-proxy.log" >&2; return 1; }
		sleep 0.3
	done
	echo "kube-proxy did not install its rules in 30s; see ${dir}/logs/kube-proxy.log" >&2
	return 1
}

# Local volumes on the node's disk: a workspace written before a stop is
# there after the start, on a new pod. The kubelet gives them the pod's
# fsGroup. A volume whose claim is deleted (its sandbox deleted) is wiped
# and offered again by the recycler, which up starts beside the kubelet.
#
# Each volume is a file system of its own, of its declared capacity: an
# ext4 image on the node's disk, loop-mounted in the node's mount
# namespace. A workspace declared 64Mi is then full (ENOSPC) at 64 MiB
# instead of filling the machine's disk, as a plain directory would let it.
# A claim binds the smallest volume that fits it, so the sizes follow what
# the tests (64Mi, 1Gi) and the demo's examples (5Gi) ask for; images are
# sparse, and without a journal, so an empty one costs next to nothing.
volumes=32
volume_mib() {
	local i="$1"
	if [[ "${role}" == demo ]]; then
		if ((i < 24)); then echo 5120; else echo 1024; fi
	elif ((i < 8)); then echo "${small_volume_mib}"; else echo 1024; fi
}
storage_class() { if [[ "${role}" == demo ]]; then echo standard; else echo "${storage_class_name}"; fi; }
volumes_up() {
	local class i
	class="$(storage_class)"
	enter_node
	if [[ "${role}" == demo ]]; then
		# The default class's kwok volumes could bind a claim the real node
		# cannot mount.
		local available
		available="$(kubectl get pv -l agentsandbox.dev/local-volume -o jsonpath='{range .items[?(@.status.phase=="Available")]}{.metadata.name}{" "}{end}')"
		# shellcheck disable=SC2086 # a list of names
		[[ -z "${available}" ]] || kubectl delete pv --wait=false ${available} >/dev/null
	else
		kubectl apply --server-side -f - >/dev/null <<YAML
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: ${class}}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Retain
YAML
	fi
	mkdir -p "${dir}/volumes"
	for ((i = 0; i < volumes; i++)); do
		# A volume mounted already (up again on a running node) may hold a
		# workspace: it is left as it is.
		"${in_node[@]}" mountpoint -q "${dir}/volumes/node-${i}" 2>/dev/null || volume_make "node-${i}" "$(volume_mib "${i}")"
	done
	for ((i = 0; i < volumes; i++)); do
		volume_manifest "node-${i}" "${class}" "$(volume_mib "${i}")"
	done | kubectl apply --server-side -f - >/dev/null
	echo "${class}" >"${dir}/volumes/class"
	echo "${role}" >"${dir}/volumes/role"
}

# enter_node sets in_node from the running holder, for a command (up on a
# running node, the recycler) that did not start it.
enter_node() {
	[[ ${#in_node[@]} -gt 0 ]] || ! running mount-namespace ||
		in_node=(nsenter "--mount=/proc/$(cat "${dir}/pids/mount-namespace")/ns/mnt" --)
}

# volume_make makes the volume NAME afresh, a file system of MIB MiB, and
# mounts it where its PersistentVolume points, in the node's mount
# namespace (the loop device goes when the mount does).
volume_make() {
	local name="$1" mib="$2" image="${dir}/volumes/$1.img" mnt="${dir}/volumes/$1"
	"${in_node[@]}" umount "${mnt}" 2>/dev/null || true
	rm -rf "${image}" "${mnt}"
	truncate -s "${mib}M" "${image}"
	mkfs.ext4 -q -F -O ^has_journal -m 0 "${image}"
	mkdir -p "${mnt}"
	"${in_node[@]}" mount -o loop "${image}" "${mnt}"
	"${in_node[@]}" rmdir "${mnt}/lost+found"
}

# volume_manifest prints the PersistentVolume NAME of CLASS, of MIB MiB.
volume_manifest() {
	local name="$1" class="$2" mib="$3"
	cat <<YAML
apiVersion: v1
kind: PersistentVolume
metadata:
  name: ${name}
  labels: {agentsandbox.dev/node-volume: "true"}
spec:
  storageClassName: ${class}
  capacity: {storage: ${mib}Mi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  local: {path: ${dir}/volumes/${name}}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [${node}]}]
---
YAML
}

# recycle_volumes runs until killed: every two seconds it wipes each
# Released volume (its sandbox's workspace is gone with the sandbox: the
# file system is made anew) and offers it again, as
# sig-storage-local-static-provisioner does for real clusters, and puts
# back a volume that went missing. No workspace reaches another sandbox.
recycle_volumes() {
	local class phases i name
	role="$(cat "${dir}/volumes/role" 2>/dev/null)" || role="test"
	enter_node
	while sleep 2; do
		class="$(cat "${dir}/volumes/class" 2>/dev/null)" || continue
		phases=" $(kubectl get pv -l agentsandbox.dev/node-volume \
			-o jsonpath='{range .items[*]}{.metadata.name}={.status.phase}{" "}{end}' 2>/dev/null) " || continue
		for ((i = 0; i < volumes; i++)); do
			name="node-${i}"
			case "${phases}" in
			*" ${name}=Released "*) kubectl delete pv "${name}" --wait=true >/dev/null 2>&1 || continue ;;
			*" ${name}="*) continue ;;
			esac
			volume_make "${name}" "$(volume_mib "${i}")" || continue
			volume_manifest "${name}" "${class}" "$(volume_mib "${i}")" | kubectl apply --server-side -f - >/dev/null 2>&1 || true
		done
	done
}

ready() {
	running mount-namespace && running containerd && running kubelet && running kube-router && running kube-proxy && running volume-recycler &&
		[[ "$(kubectl get node "${node}" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" == True ]]
}

up() {
	case "${1:-}" in
	"") role="test" ;;
	--demo) role=demo ;;
	*)
		echo "hack/node.sh up: unknown option $1 (want --demo or nothing)" >&2
		return 2
		;;
	esac
	check
	install_packages
	check
	"${root}/tools/build.sh" kube containerd gvisor kube-router kube-proxy
	"${root}/hack/cluster.sh" up
	if ready && [[ "$(cat "${dir}/role" 2>/dev/null)" == "${role}" ]]; then
		log "node ${node} already running (${role})"
	else
		if [[ -d "${dir}/pids" ]]; then
			log "a node of an earlier run is left (crashed, stopped or in another role): taking it down first"
			down_node
		fi
		build_images
		save_host
		echo "${role}" >"${dir}/role"
		log "starting node ${node} (${role}): containerd, kubelet, kube-router, kube-proxy"
		network_up
		mount_namespace_up
		containerd_up
		kubelet_credentials
		kubelet_up
		kube_router_up
		kube_proxy_up
	fi
	build_gate_image
	import_images "${dir}/gate/gate.tar"
	# A test that opened IPv6 and did not live to close it.
	ipv6 closed
	# cluster.sh up adds the kwok gvisor nodes back each time.
	if [[ "${role}" == demo ]]; then
		kubectl delete node -l "${group_label}=gvisor,type=kwok" --wait=false >/dev/null
	fi
	volumes_up
	start volume-recycler "${root}/hack/node.sh" recycle-volumes
	log "node ${node} Ready: runc and runsc, NetworkPolicy enforced, ${volumes} local volumes ($(storage_class))"
}

kill_pid() {
	local name="$1" pid i
	[[ -f "${dir}/pids/${name}" ]] || return 0
	pid="$(cat "${dir}/pids/${name}")"
	if kill -0 "${pid}" 2>/dev/null; then
		kill "${pid}"
		for i in $(seq 1 40); do
			kill -0 "${pid}" 2>/dev/null || break
			sleep 0.25
		done
		kill -9 "${pid}" 2>/dev/null || true
	fi
	rm -f "${dir}/pids/${name}"
}

# ours lists the processes whose command line names this node's directory:
# shims, runsc sandboxes and gofers. Nothing else is killed.
ours() {
	local p
	for p in /proc/[0-9]*; do
		tr '\0' ' ' <"${p}/cmdline" 2>/dev/null | grep -qF -- "${dir}/" && echo "${p#/proc/}"
	done
	return 0
}

down_node() {
	if "${root}/hack/cluster.sh" status; then
		# Pods deleted through the API are torn down by the kubelet: CNI
		# DEL, netns and mounts, as on any node.
		kubectl delete pod -A --field-selector "spec.nodeName=${node}" --grace-period 1 --timeout 60s >/dev/null 2>&1 || true
		kubectl delete node "${node}" --wait=false >/dev/null 2>&1 || true
		# The node's volumes go with it: so do the claims bound to them,
		# which would otherwise keep their volumes Terminating and bind the
		# next node's namesakes to workspaces that are gone. The
		# controllers make new claims for the sandboxes that still want one.
		local claims claim
		claims="$(kubectl get pv -l agentsandbox.dev/node-volume \
			-o jsonpath='{range .items[?(@.spec.claimRef)]}{.spec.claimRef.namespace}/{.spec.claimRef.name}{" "}{end}' 2>/dev/null)" || true
		for claim in ${claims}; do
			kubectl delete pvc -n "${claim%%/*}" "${claim#*/}" --wait=false >/dev/null 2>&1 || true
		done
		kubectl delete pv -l agentsandbox.dev/node-volume --timeout 60s >/dev/null 2>&1 || true
		kubectl delete storageclass "${storage_class_name}" --ignore-not-found >/dev/null 2>&1 || true
	fi
	kill_pid volume-recycler
	kill_pid kube-proxy
	nft delete table ip kube-proxy 2>/dev/null || true
	nft delete table ip6 kube-proxy 2>/dev/null || true
	kill_pid kube-router
	if [[ -x "$(bin kube-router kube-router)" ]]; then
		"$(bin kube-router kube-router)" --cleanup-config >/dev/null 2>&1 || true
	fi
	kill_pid kubelet
	kill_pid containerd
	local p m n k v
	for p in $(ours); do kill -9 "${p}" 2>/dev/null || true; done
	# The node's mounts go with its mount namespace, once its last process
	# (the holder) has.
	kill_pid mount-namespace
	sleep 0.5
	# Mounts under the node's directory, deepest first (a node of an older
	# checkout made them in the machine's namespace), and the network
	# namespaces' files the CNI made.
	awk -v d="${dir}/" 'index($2, d) == 1 {print $2}' /proc/mounts | sort -r | while IFS= read -r m; do
		umount -l "${m}" 2>/dev/null || true
	done
	for n in /var/run/netns/*; do
		[[ -e "${n}" ]] || continue
		n="${n##*/}"
		grep -qxF "${n}" "${dir}/host.netns" 2>/dev/null && continue
		[[ "${n}" == cni-* ]] || continue
		umount -l "/var/run/netns/${n}" 2>/dev/null || true
		rm -f "/var/run/netns/${n}"
	done
	ip link show "${bridge}" >/dev/null 2>&1 && ip link del "${bridge}"
	if [[ -f "${dir}/uplink" ]]; then
		# shellcheck disable=SC2046 # the rule is a list of words
		while iptables -D $(guard_rule "$(cat "${dir}/uplink")") 2>/dev/null; do :; done
		rm -f "${dir}/uplink"
	fi
	for k in INPUT FORWARD; do
		# shellcheck disable=SC2046 # the rule is a list of words
		while ip6tables -D $(no_ipv6_rule "${k}") 2>/dev/null; do :; done
	done
	[[ -f "${dir}/host.chains" ]] && remove_chains
	# iptables-nft leaves the tables it made behind, empty.
	if [[ -f "${dir}/host.nft" ]]; then
		nft list tables | grep -vxF -f "${dir}/host.nft" | while read -r _ family table; do
			nft delete table "${family}" "${table}" || true
		done
	fi
	for n in $(ipset list -n 2>/dev/null); do
		grep -qxF "${n}" "${dir}/host.ipsets" 2>/dev/null || ipset destroy "${n}" 2>/dev/null || true
	done
	if [[ -f "${dir}/host.sysctl" ]]; then
		while IFS='=' read -r k v; do sysctl -qw "${k}=${v}" 2>/dev/null || true; done <"${dir}/host.sysctl"
	fi
	if [[ -f "${dir}/host.sysctl" && ! -e "${dir}/host.run-containerd" ]] && ! pgrep -x containerd >/dev/null; then
		rm -rf /run/containerd
	fi
	# Cgroups the kubelet and the runtimes made; they exist only for the node.
	for m in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
		if [[ -d "${m}" ]]; then find "${m}" -depth -type d -exec rmdir {} + 2>/dev/null || true; fi
	done
	rm -rf "${dir:?}/pids" "${dir}/run" "${dir}/containerd" "${dir}/kubelet" "${dir}/runsc" "${dir}/cni" "${dir}/gate" \
		"${dir}/pod-logs" "${dir}/host."* "${dir}/role"
}

down() {
	[[ -d "${dir}" ]] || { log "no node to stop"; return 0; }
	log "stopping node ${node}"
	down_node
	rm -rf "${dir:?}/volumes"
	log "node ${node} stopped; the machine is as it was"
}

case "${1:-}" in
check) check ;;
up) up "${2:-}" ;;
down) down ;;
status) ready ;;
recycle-volumes) recycle_volumes ;;
enforcer)
	# For tests that prove the isolation check finds a stopped enforcer.
	case "${2:-}" in
	stop) kill_pid kube-router ;;
	start) kube_router_up ;;
	*)
		echo "usage: $0 enforcer stop|start" >&2
		exit 2
		;;
	esac
	;;
ipv6)
	# For tests that prove the isolation check finds IPv6 open.
	case "${2:-}" in
	open | closed) ipv6 "$2" ;;
	*)
		echo "usage: $0 ipv6 open|closed" >&2
		exit 2
		;;
	esac
	;;
*)
	echo "usage: $0 check|up [--demo]|down|status|enforcer stop|start|ipv6 open|closed" >&2
	exit 2
	;;
esac

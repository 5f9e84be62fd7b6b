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
# from tools/build.sh and the images from Debian packages (see
# hack/node/images.sh).
# Runs as root. What it changes on the machine (sysctls, a bridge, iptables
# chains and rules, nft tables, ipsets, mounts, network namespaces, cgroups)
# is recorded first and undone by down.
#
# This file is the commands; each part of the node's work is a file of
# hack/node/, sourced below:
#   common.sh        paths, constants (realnode/realnode.go's read once) and
#                    the helpers that run the node's tools
#   requirements.sh  what the machine needs: check, and the packages up installs
#   images.sh        the images, built here and imported into containerd
#   processes.sh     the node's background processes and its mount namespace
#   network.sh       bridge, IPv6, CNI, kube-router and kube-proxy
#   kubelet.sh       containerd and the kubelet
#   volumes.sh       the local volumes and their recycler
#   teardown.sh      the machine's state recorded before up, restored by down
set -euo pipefail
# The node joins the default local cluster, whatever other cluster
# (hack/cluster.sh, AGENTSANDBOX_CLUSTER) the caller drives.
unset AGENTSANDBOX_CLUSTER

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=node/common.sh
source "${root}/hack/node/common.sh"
# shellcheck source=node/requirements.sh
source "${root}/hack/node/requirements.sh"
# shellcheck source=node/images.sh
source "${root}/hack/node/images.sh"
# shellcheck source=node/processes.sh
source "${root}/hack/node/processes.sh"
# shellcheck source=node/network.sh
source "${root}/hack/node/network.sh"
# shellcheck source=node/kubelet.sh
source "${root}/hack/node/kubelet.sh"
# shellcheck source=node/volumes.sh
source "${root}/hack/node/volumes.sh"
# shellcheck source=node/teardown.sh
source "${root}/hack/node/teardown.sh"

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

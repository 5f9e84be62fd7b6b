# shellcheck shell=bash
# The pods' network: the bridge they hang off and the rules that keep them
# on this machine and off IPv6, their CNI configuration, NetworkPolicy
# (kube-router) and the service proxy (kube-proxy).

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

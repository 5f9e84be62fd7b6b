# shellcheck shell=bash
# What this machine needs to run the node: what it lacks (check) and the
# Debian packages up installs (install_packages).

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

# shellcheck shell=bash
# What down undoes: the machine's state recorded before up first changes
# it (save_host), and the node's objects, processes and every change it
# made to the machine removed (down_node).

# save_host records what up changes on the machine, once: a crashed run's
# record is kept, so down restores the state from before the first up.
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

# ours lists the processes whose command line names this node's directory:
# shims, runsc sandboxes and gofers. Nothing else is killed.
ours() {
	local p
	for p in /proc/[0-9]*; do
		# A process may end before its cmdline is read: stderr is redirected
		# before the file is opened, so that goes unreported.
		tr '\0' ' ' 2>/dev/null <"${p}/cmdline" | grep -qF -- "${dir}/" && echo "${p#/proc/}"
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

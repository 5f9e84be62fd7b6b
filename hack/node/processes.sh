# shellcheck shell=bash
# The node's processes: each runs in the background under a name, with its
# PID in pids/NAME and its output in logs/NAME.log in the node's
# directory; and the mount namespace the node's processes run in.

running() { [[ -f "${dir}/pids/$1" ]] && kill -0 "$(cat "${dir}/pids/$1")" 2>/dev/null; }

start() {
	local name="$1"
	shift
	running "${name}" && return 0
	mkdir -p "${dir}/pids" "${dir}/logs"
	nohup "$@" >>"${dir}/logs/${name}.log" 2>&1 &
	echo $! >"${dir}/pids/${name}"
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

# enter_node sets in_node from the running holder, for a command (up on a
# running node, the recycler) that did not start it.
enter_node() {
	[[ ${#in_node[@]} -gt 0 ]] || ! running mount-namespace ||
		in_node=(nsenter "--mount=/proc/$(cat "${dir}/pids/mount-namespace")/ns/mnt" --)
}

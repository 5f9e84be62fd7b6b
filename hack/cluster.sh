#!/usr/bin/env bash
# Starts and stops the local test cluster: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and kwok, as plain processes on
# loopback, driven by kwokctl's binary runtime.
#
#   hack/cluster.sh up        start (or reuse) the cluster, install the CRDs,
#                             add the kwok nodes; idempotent
#   hack/cluster.sh down      stop every process and delete the cluster state
#   hack/cluster.sh status    exit 0 when the cluster answers
#   hack/cluster.sh kubeconfig  print the kubeconfig path
#   hack/cluster.sh audit-log   print the audit log path
#
# The admin kubeconfig is written to $AGENTSANDBOX_CACHE/kubeconfig
# (default ~/.cache/agentsandbox/kubeconfig). RBAC is on and the audit policy
# in hack/cluster/audit-policy.yaml logs agentsandbox.dev and pods/exec
# requests to $AGENTSANDBOX_CACHE/kwok/clusters/agentsandbox/logs/audit.log.
#
# AGENTSANDBOX_CLUSTER=NAME drives another local cluster beside that one,
# with its own ports, state and kubeconfig ($AGENTSANDBOX_CACHE/kubeconfig-NAME):
# make test runs two test packages at once, each on a cluster of its own
# (hack/test.sh). The real node (hack/node.sh) joins the default cluster only.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${AGENTSANDBOX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agentsandbox}"
default_name=agentsandbox
name="${AGENTSANDBOX_CLUSTER:-${default_name}}"
if [[ ! "${name}" =~ ^[a-z0-9]([a-z0-9-]*[a-z0-9])?$ ]]; then
	echo "AGENTSANDBOX_CLUSTER=${name}: a cluster name is lower-case letters, digits and '-'" >&2
	exit 2
fi
# The default cluster keeps the paths it always had (make demo, the README).
suffix=""
[[ "${name}" == "${default_name}" ]] || suffix="-${name}"
kubeconfig="${cache}/kubeconfig${suffix}"
export KWOK_WORKDIR="${cache}/kwok"

# Node groups: name prefix and count. Sandboxes without a node pool land on
# "general"; examples and tests point a gVisor NodePool at "gvisor".
general_nodes=3
gvisor_nodes=2

log() { printf '==> %s\n' "$*" >&2; }

bin() { echo "$("${root}/tools/build.sh" --print-bin "$1")/$2"; }
kubectl() { "$(bin kube kubectl)" --kubeconfig "${kubeconfig}" "$@"; }

# has_node is true when a real node (hack/node.sh) is joined to this cluster.
has_node() {
	[[ -z "${suffix}" && -d "${cache}/node/pids" ]]
}

healthy() {
	[[ -f "${kubeconfig}" ]] && kubectl get --raw /readyz >/dev/null 2>&1
}

node_manifest() {
	local group="$1" count="$2" i
	for ((i = 0; i < count; i++)); do
		cat <<YAML
apiVersion: v1
kind: Node
metadata:
  name: ${group}-${i}
  annotations:
    kwok.x-k8s.io/node: fake
  labels:
    kubernetes.io/hostname: ${group}-${i}
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    type: kwok
    agentsandbox.dev/node-group: ${group}
status:
  # Both kinds of address, so that kwok's node-initialize stage never
  # writes the list: it runs again whenever the node lifecycle controller
  # marks the node NotReady (its heartbeats lapse while a test keeps the
  # API server down), and for a node lacking either kind it writes an
  # empty list, after which nothing can exec into, forward to or read the
  # logs of the node's pods ("no preferred addresses found").
  addresses: [{type: InternalIP, address: 127.0.0.1}, {type: Hostname, address: localhost}]
  allocatable: {cpu: "32", memory: 256Gi, pods: "500", ephemeral-storage: 1Ti}
  capacity: {cpu: "32", memory: 256Gi, pods: "500", ephemeral-storage: 1Ti}
  nodeInfo: {architecture: amd64, operatingSystem: linux, kubeletVersion: fake, kubeProxyVersion: fake}
---
YAML
	done
}

# lock serialises up and down: test packages run in parallel and each may
# ask for the cluster at the same moment.
lock() {
	mkdir -p "${cache}"
	exec 9>"${cache}/cluster${suffix}.lock"
	flock 9
}

# Persistent workspaces need volumes, and nothing provisions them on a kwok
# cluster: a default StorageClass without a provisioner and a pool of
# pre-created PersistentVolumes (never mounted: kwok runs no containers) that
# the PV controller binds claims to. Released volumes are recreated on the
# next `up`.
local_volumes=100

storage_manifest() {
	cat <<YAML
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: Immediate
reclaimPolicy: Retain
---
YAML
	local i
	for ((i = 0; i < local_volumes; i++)); do
		cat <<YAML
apiVersion: v1
kind: PersistentVolume
metadata:
  name: local-${i}
  labels: {agentsandbox.dev/local-volume: "true"}
spec:
  storageClassName: standard
  capacity: {storage: 100Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  hostPath: {path: /tmp/agentsandbox-local-${i}}
---
YAML
	done
}

# The cluster runs with hack/cluster/kwok.yaml rendered into the cache, the
# directory the node-side exec and logs use filled in (kwokctl takes no
# variables, and that directory must live under the cache). A running
# cluster whose rendered configuration differs from the current one (started
# before kwok.yaml changed) is recreated, so nobody tests against a stale
# node setup.
streams_dir="${cache}/kwok-streams${suffix}"
config="${cache}/kwok${suffix}.yaml"

rendered_config() {
	sed -e "s|@STREAMS_DIR@|${streams_dir}|g" -e "s|@PKI_DIR@|${KWOK_WORKDIR}/clusters/${name}/pki|g" \
		"${root}/hack/cluster/kwok.yaml"
}

current() {
	healthy && [[ -f "${config}" ]] && rendered_config | cmp -s - "${config}"
}

up() {
	# OpenTofu too: the Terraform tests and the demo drive the provider with it.
	"${root}/tools/build.sh" etcd kwok kube tofu
	lock
	if current; then
		log "cluster ${name} already running (kubeconfig ${kubeconfig})"
	else
		# A cluster whose processes died (machine restart, kill) or whose
		# configuration changed is rebuilt rather than repaired: its state
		# is disposable. A real node joined to the old one goes with it.
		if has_node; then
			"${root}/hack/node.sh" down 9>&-
		fi
		"$(bin kwok kwokctl)" delete cluster --name "${name}" >/dev/null 2>&1 || true
		rm -f "${kubeconfig}"
		log "starting cluster ${name}"
		mkdir -p "${streams_dir}"
		# kwok reads the CRI log format: time, stream, tag, message.
		printf '2026-01-01T00:00:00.000000000Z stdout F hello from the sandbox pod (kwok ClusterLogs)\n' >"${streams_dir}/pod.log"
		rendered_config >"${config}"
		"$(bin kwok kwokctl)" create cluster --name "${name}" --runtime binary \
			--config "${config}" \
			--etcd-binary "$(bin etcd etcd)" \
			--kube-apiserver-binary "$(bin kube kube-apiserver)" \
			--kube-controller-manager-binary "$(bin kube kube-controller-manager)" \
			--kube-scheduler-binary "$(bin kube kube-scheduler)" \
			--kwok-controller-binary "$(bin kwok kwok)" \
			--kube-authorization --kube-admission \
			--kube-audit-policy "${root}/hack/cluster/audit-policy.yaml" \
			--kubeconfig "${kubeconfig}" --wait 2m >&2 9>&-
	fi
	log "installing CRDs, RBAC and admission policies (config/ without the Deployment)"
	kubectl apply --server-side --force-conflicts -f "${root}/config/crd/bases" >/dev/null
	kubectl wait --for condition=Established --timeout 60s -f "${root}/config/crd/bases" >/dev/null
	kubectl apply --server-side --force-conflicts -f "${root}/config/manager/namespace.yaml" \
		-f "${root}/config/rbac" -f "${root}/config/admission" >/dev/null
	log "adding kwok nodes (${general_nodes} general, ${gvisor_nodes} gvisor)"
	{ node_manifest general "${general_nodes}"; node_manifest gvisor "${gvisor_nodes}"; } |
		kubectl apply --server-side -f - >/dev/null
	kubectl wait --for condition=Ready --timeout 60s node -l agentsandbox.dev/node-group >/dev/null
	log "adding ${local_volumes} local volumes for persistent workspaces"
	released="$(kubectl get pv -l agentsandbox.dev/local-volume -o jsonpath='{range .items[?(@.status.phase=="Released")]}{.metadata.name}{" "}{end}')"
	if [[ -n "${released}" ]]; then
		# shellcheck disable=SC2086 # a list of names
		kubectl delete pv --wait=false ${released} >/dev/null
		# shellcheck disable=SC2086 # the same list
		kubectl wait --for=delete --timeout 60s pv ${released} >/dev/null 2>&1 || true
	fi
	storage_manifest | kubectl apply --server-side -f - >/dev/null
	log "cluster ready: export KUBECONFIG=${kubeconfig}"
}

down() {
	# A real node joined to the cluster (hack/node.sh) goes first: its
	# kubelet would outlive the API server it reports to.
	if has_node; then
		"${root}/hack/node.sh" down
	fi
	lock
	if [[ -x "$(bin kwok kwokctl)" ]]; then
		"$(bin kwok kwokctl)" delete cluster --name "${name}" >&2 || true
	fi
	rm -f "${kubeconfig}"
	# make demo's OpenTofu state describes objects of this cluster only.
	[[ -n "${suffix}" ]] || rm -rf "${cache}/demo-tofu"
	# kwokctl stops the processes it started; make sure nothing outlived it
	# (for example after an interrupted create). An API server whose etcd is
	# gone (a test's restart cut short) can hang in its graceful shutdown:
	# what still runs after 5 s is killed.
	local pattern="${KWOK_WORKDIR}/clusters/${name}/" i
	pkill -f "${pattern}" 2>/dev/null || true
	for ((i = 0; i < 50; i++)); do
		pgrep -f "${pattern}" >/dev/null || break
		sleep 0.1
	done
	pkill -KILL -f "${pattern}" 2>/dev/null || true
	log "cluster ${name} stopped"
}

# restart [SECONDS] kills etcd and the API server of the running cluster
# (SIGKILL, as a crash would), keeps them down for SECONDS (default 0) and
# starts them again, with the same command lines, on the same data: what a
# test of the API server going away (in the middle of a sync, for two
# minutes) does. The other components reconnect; one that gave up meanwhile
# (a controller manager that lost its lease exits) is started again too.
# (kwokctl's own stop and start would restart every component.)
restart() {
	healthy || { log "no cluster ${name} running to restart"; exit 1; }
	lock
	local dir="${KWOK_WORKDIR}/clusters/${name}" comp pid
	local -A cmdline
	for comp in kube-apiserver etcd kube-controller-manager kube-scheduler kwok-controller; do
		cmdline[${comp}]="$(tr '\0' '\n' <"/proc/$(cat "${dir}/pids/${comp}.pid")/cmdline")"
	done
	for comp in kube-apiserver etcd; do
		pid="$(cat "${dir}/pids/${comp}.pid")"
		kill -KILL "${pid}"
		while kill -0 "${pid}" 2>/dev/null; do sleep 0.1; done
	done
	sleep "${1:-0}"
	start_component "${dir}" etcd "${cmdline[etcd]}"
	start_component "${dir}" kube-apiserver "${cmdline[kube-apiserver]}"
	local i
	for ((i = 0; i < 120; i++)); do
		if healthy && crds_served; then
			for comp in kube-controller-manager kube-scheduler kwok-controller; do
				kill -0 "$(cat "${dir}/pids/${comp}.pid")" 2>/dev/null || start_component "${dir}" "${comp}" "${cmdline[${comp}]}"
			done
			log "etcd and the API server of cluster ${name} restarted"
			return
		fi
		sleep 0.5
	done
	log "cluster ${name} not ready (or not serving its CRDs) 60s after restarting etcd and the API server"
	exit 1
}

# crds_served is true once the API server serves every CRD's kinds: a
# restarted API server is ready a few seconds before it does, and a client
# that asks meanwhile is told the kind does not exist.
crds_served() {
	local gv
	for gv in $(kubectl get crd -o jsonpath='{range .items[*]}{.spec.group}/{.spec.versions[0].name}{"\n"}{end}' | sort -u); do
		kubectl get --raw "/apis/${gv}" >/dev/null 2>&1 || return 1
	done
}

# start_component starts a component of the cluster in dir from its command
# line (one argument a line) the way kwokctl does: detached, in the
# cluster's directory, logging to its file; without the lock's descriptor,
# which it would otherwise hold for as long as it runs.
start_component() {
	local dir="$1" comp="$2" args
	mapfile -t args <<<"$3"
	(cd "${dir}" && exec setsid "${args[@]}" >>"${dir}/logs/${comp}.log" 2>&1 </dev/null 9>&-) &
	echo "$!" >"${dir}/pids/${comp}.pid"
}

case "${1:-}" in
up) up ;;
restart) restart "${2:-0}" ;;
down) down ;;
status) healthy ;;
kubeconfig) echo "${kubeconfig}" ;;
audit-log) echo "${KWOK_WORKDIR}/clusters/${name}/logs/audit.log" ;;
*)
	echo "usage: $0 up|down|restart [SECONDS]|status|kubeconfig|audit-log" >&2
	exit 2
	;;
esac

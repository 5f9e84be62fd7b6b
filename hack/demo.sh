#!/usr/bin/env bash
# `make demo`: on the local cluster (make cluster-up), join a real node
# where this machine can run one (hack/node.sh up --demo: kubelet,
# containerd, runc, gVisor, NetworkPolicy), run the reconciler, apply the
# node pool, template and warm pool of examples/resources with
# OpenTofu and the provider binary (which waits for the pool to fill), claim
# the sandbox of examples/gitops the GitOps way (a GitSync pulls it from a
# Git repository served on loopback by hack/gitserve, and
# `agentsandbox sync --gitsync` waits for that sync), and show it Ready in
# its own isolated namespace, and, on the real node, run code in it under
# gVisor and show its egress blocked, and take the README's tour as alice
# (run, cp, exec: DEMO_TOUR_RUNS times, default 1), with the rights an admin
# gives a developer (agentsandbox-user, bound to the demo's users here), and
# run the isolation check against the warm pool, which must find nothing
# escaped (it exits non-zero, and the demo fails, if anything did).
# The reconciler and the Git server stop when
# the demo ends; the cluster, the objects and the OpenTofu state (in the
# cache) stay for you to explore.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
KUBECONFIG="$(hack/cluster.sh kubeconfig)"
export KUBECONFIG
kubectl() { "$(tools/build.sh --print-bin kube)/kubectl" "$@"; }
log() { printf '\n==> %s\n' "$*" >&2; }

real_node=false
if hack/node.sh check; then
	log "joining a real node in place of the kwok gvisor nodes: hack/node.sh up --demo"
	hack/node.sh up --demo
	real_node=true
else
	log "no real node on this machine (above): the sandboxes run on kwok nodes, where nothing really runs"
fi

# tour takes the README's tour as alice, DEMO_TOUR_RUNS times: a one-off
# run from the warm pool, a file copied into her sandbox and run there.
# Afterwards no pod of the node may still be terminating: a deleted sandbox
# gives its capacity back.
tour() {
	local runs="${DEMO_TOUR_RUNS:-1}" i start as=(--as alice@example.com)
	local task
	task="$(mktemp)"
	printf 'import platform\nprint("task.py ran on", platform.node())\n' >"${task}"
	for ((i = 1; i <= runs; i++)); do
		log "the tour as alice (${i} of ${runs}): agentsandbox run, cp and exec --as alice@example.com"
		start=${SECONDS}
		(
			set -x
			bin/agentsandbox run "${as[@]}" --pool python -- python3 -c 'print(2 + 2)'
			bin/agentsandbox cp "${as[@]}" "${task}" alice-scratch:task.py
			bin/agentsandbox exec "${as[@]}" alice-scratch -- python3 task.py
		)
		echo "tour ${i}: $((SECONDS - start))s"
	done
	rm -f "${task}"
	local terminating=""
	for _ in $(seq 1 60); do
		terminating="$(kubectl get pods -A --field-selector spec.nodeName=agentsandbox-node \
			-o jsonpath='{range .items[?(@.metadata.deletionTimestamp)]}{.metadata.namespace}/{.metadata.name} {end}')"
		[[ -z "${terminating}" ]] && break
		sleep 1
	done
	if [[ -n "${terminating}" ]]; then
		echo "pods still terminating a minute after the tour: ${terminating}" >&2
		return 1
	fi
	echo "no pod of the node is terminating: every deleted sandbox gave its capacity back"
}

namespace=agentsandbox-system
log "starting the reconciler: bin/agentsandbox reconcile (log in ${root}/bin/reconcile.log)"
# The real node has the egress gate's image (hack/node.sh builds it); the
# published one it would pull by default is not reachable from here. Its
# metrics are on loopback, so plain HTTP (--metrics-secure=false).
bin/agentsandbox reconcile --leader-election-namespace "${namespace}" \
	--egress-gate-image localhost/agentsandbox/sandbox-gate:dev \
	--health-addr 127.0.0.1:18081 --metrics-addr 127.0.0.1:18080 --metrics-secure=false >bin/reconcile.log 2>&1 &
pid=$!
git_pid=""
stop() {
	for p in ${pid} ${git_pid}; do
		kill "${p}" 2>/dev/null || true
		wait "${p}" 2>/dev/null || true
	done
}
trap stop EXIT
for _ in $(seq 1 100); do
	curl -fsS http://127.0.0.1:18081/readyz >/dev/null 2>&1 && break
	kill -0 "${pid}" 2>/dev/null || { cat bin/reconcile.log >&2; exit 1; }
	sleep 0.2
done
echo "readyz: $(curl -fsS http://127.0.0.1:18081/readyz)"

cache="${AGENTSANDBOX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agentsandbox}"
work="${cache}/demo-tofu"
mkdir -p "${work}"
if [[ ! -f "${work}/terraform.tfstate" ]]; then
	# Objects of an earlier demo that OpenTofu did not create would make
	# apply refuse to adopt them.
	kubectl delete gitsync/demo sandbox/alice-scratch warmpool/python sandboxtemplate/python nodepool/gvisor \
		--ignore-not-found --wait >/dev/null
fi
cat >"${work}/tofurc" <<HCL
provider_installation {
  dev_overrides {
    "registry.opentofu.org/agentsandbox/agentsandbox" = "${root}/bin"
  }
  direct {}
}
HCL
{
	printf 'terraform {\n  required_providers {\n    agentsandbox = { source = "agentsandbox/agentsandbox" }\n  }\n}\n'
	printf 'provider "agentsandbox" {\n  config_path = "%s"\n}\n' "${KUBECONFIG}"
	cat examples/resources/agentsandbox_{node_pool,template,warm_pool}/resource.tf
} >"${work}/main.tf"
tofu() { TF_CLI_CONFIG_FILE="${work}/tofurc" "$(tools/build.sh --print-bin tofu)/tofu" -chdir="${work}" "$@"; }
log "tofu apply: the node pool, template and warm pool of examples/resources (waits until the pool is full)"
tofu apply -auto-approve -input=false -compact-warnings -no-color
tofu state list

# The demo's users are developers: bound to agentsandbox-user as the
# README's install section tells an admin to, so the tour works as them.
log "binding agentsandbox-user to the demo's users, alice@example.com and bob@example.com"
kubectl create clusterrolebinding agentsandbox-demo-users --clusterrole agentsandbox-user \
	--user alice@example.com --user bob@example.com --dry-run=client -o yaml | kubectl apply --server-side -f - >/dev/null

log "claiming a sandbox the GitOps way: a GitSync pulls examples/gitops/sandbox.yaml from a Git server on 127.0.0.1:18082"
# The repository holds the sandbox only: the node pool, template and warm
# pool are OpenTofu's here, and a GitSync declaring them too would be refused
# as a conflict with its fields. A fresh repository each run.
git_root="${cache}/demo-git"
rm -rf "${git_root}"
git init -q --bare --initial-branch=main "${git_root}/sandboxes.git"
checkout="$(mktemp -d)"
git -C "${checkout}" init -q --initial-branch=main
cp examples/gitops/sandbox.yaml "${checkout}/"
git -C "${checkout}" add sandbox.yaml
git -C "${checkout}" -c user.name=demo -c user.email=demo@example.com commit -q -m "A scratch sandbox for alice"
git -C "${checkout}" push -q "${git_root}/sandboxes.git" main
rm -rf "${checkout}"
go build -o bin/gitserve ./hack/gitserve
bin/gitserve -root "${git_root}" -addr 127.0.0.1:18082 2>bin/gitserve.log &
git_pid=$!
for _ in $(seq 1 50); do
	curl -fsS 'http://127.0.0.1:18082/sandboxes.git/info/refs?service=git-upload-pack' >/dev/null 2>&1 && break
	kill -0 "${git_pid}" 2>/dev/null || { cat bin/gitserve.log >&2; exit 1; }
	sleep 0.2
done
# A second demo run claims afresh: the sync below applies it again.
kubectl delete sandbox alice-scratch --ignore-not-found --wait >/dev/null
kubectl apply --server-side -f - <<YAML
apiVersion: agentsandbox.dev/v1alpha1
kind: GitSync
metadata:
  name: demo
spec:
  url: http://127.0.0.1:18082/sandboxes.git
  ref: {branch: main}
  interval: 1m
  retryInterval: 10s
YAML
bin/agentsandbox sync --gitsync demo --timeout 2m
kubectl get gitsync demo -o wide
kubectl wait --for condition=Ready --timeout 2m sandbox/alice-scratch
kubectl get sandbox alice-scratch -o jsonpath='launch {.status.launchType} {.status.launchMessage}; requested {.status.requestedAt}, claimed {.status.claimedAt}, ready {.status.readyAt}; namespace {.status.namespace}{"\n"}'
ns="$(kubectl get sandbox alice-scratch -o jsonpath='{.status.namespace}')"

log "kubectl get agentsandbox -o wide"
kubectl get agentsandbox -o wide

log "what the sandbox is made of: kubectl -n ${ns} get ..."
kubectl -n "${ns}" get pod,pvc,networkpolicy,resourcequota,limitrange,rolebinding
kubectl get namespace "${ns}" --show-labels

log "only the owner may exec into it"
for user in alice@example.com bob@example.com; do
	echo "${user} may exec: $(kubectl auth can-i create pods --subresource exec -n "${ns}" --as "${user}" || true)"
done

if ${real_node}; then
	log "running code in the sandbox, under gVisor on the real node: bin/agentsandbox exec alice-scratch -- python3 ..."
	kubectl get pod -n "${ns}" -o wide
	bin/agentsandbox exec alice-scratch -- python3 -c '
import os, socket, subprocess
print("kernel:", subprocess.run(["dmesg"], capture_output=True, text=True).stdout.splitlines()[0])
print("uid:", os.getuid(), "| hostname:", socket.gethostname())
for name, host, port in [("the node'"'"'s kubelet", "10.244.0.1", 10250), ("the cloud metadata address", "169.254.169.254", 80)]:
    try:
        socket.create_connection((host, port), timeout=3).close()
        print("egress to %s %s:%d: OPEN" % (name, host, port))
    except OSError as e:
        print("egress to %s %s:%d: blocked (%s)" % (name, host, port, e))
'
	echo "from this machine, the kubelet answers, and refuses anonymous requests: HTTP $(curl -sk -o /dev/null -w '%{http_code}' https://10.244.0.1:10250/pods)"

	tour

	# The check claims two members of the pool (as agents get them) and
	# the pool starts two more: six sandboxes, which the node fits.
	log "the isolation check, as alice: bin/agentsandbox check isolation --as alice@example.com --pool python"
	bin/agentsandbox check isolation --as alice@example.com --pool python
fi

log "reconciler metrics"
curl -fsS http://127.0.0.1:18080/metrics | grep -E '^agentsandbox_' || true

log "demo done; the cluster keeps running (the reconciler stops with the demo)"
cat <<TEXT
  export KUBECONFIG=${KUBECONFIG}
  alias kubectl=$(tools/build.sh --print-bin kube)/kubectl
  bin/agentsandbox reconcile --leader-election-namespace ${namespace} --egress-gate-image localhost/agentsandbox/sandbox-gate:dev   # run the reconciler again
  bin/agentsandbox ui                                                   # the Sandboxes page: open http://127.0.0.1:8090/
  bin/agentsandbox run --as alice@example.com --pool python -- python3 -c 'print(2 + 2)'   # the tour, as alice
  bin/agentsandbox exec --as alice@example.com alice-scratch -- python3 task.py
  make cluster-down                                                     # stop the cluster (and the real node)
TEXT

#!/usr/bin/env bash
# `make demo`: on the local cluster (make cluster-up), run the reconciler,
# apply the example declarations of examples/gitops with server-side apply,
# wait for the warm pool to fill, and show the sandbox claimed from it Ready
# in its own isolated namespace. The reconciler stops when the demo ends; the cluster and
# the objects stay for you to explore.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
KUBECONFIG="$(hack/cluster.sh kubeconfig)"
export KUBECONFIG
kubectl() { "$(tools/build.sh --print-bin kube)/kubectl" "$@"; }
log() { printf '\n==> %s\n' "$*" >&2; }

namespace=agentsandbox-system
log "starting the reconciler: bin/agentsandbox reconcile (log in ${root}/bin/reconcile.log)"
bin/agentsandbox reconcile --leader-election-namespace "${namespace}" \
	--health-addr 127.0.0.1:18081 --metrics-addr 127.0.0.1:18080 >bin/reconcile.log 2>&1 &
pid=$!
trap 'kill ${pid} 2>/dev/null || true; wait ${pid} 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
	curl -fsS http://127.0.0.1:18081/readyz >/dev/null 2>&1 && break
	kill -0 "${pid}" 2>/dev/null || { cat bin/reconcile.log >&2; exit 1; }
	sleep 0.2
done
echo "readyz: $(curl -fsS http://127.0.0.1:18081/readyz)"

log "applying the node pool, template and warm pool of examples/gitops (server-side apply)"
kubectl apply --server-side --field-manager agentsandbox-demo \
	-f examples/gitops/node-pool.yaml -f examples/gitops/template.yaml -f examples/gitops/warm-pool.yaml
log "waiting for the warm pool to be full"
kubectl wait --for condition=Ready --timeout 2m warmpool/python

log "claiming a sandbox from the pool: examples/gitops/sandbox.yaml"
# A second demo run claims afresh.
kubectl delete sandbox alice-scratch --ignore-not-found --wait >/dev/null
kubectl apply --server-side --field-manager agentsandbox-demo -f examples/gitops/sandbox.yaml
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

log "reconciler metrics"
curl -fsS http://127.0.0.1:18080/metrics | grep -E '^agentsandbox_' || true

log "demo done; the cluster keeps running (the reconciler stops with the demo)"
cat <<TEXT
  export KUBECONFIG=${KUBECONFIG}
  alias kubectl=$(tools/build.sh --print-bin kube)/kubectl
  bin/agentsandbox reconcile --leader-election-namespace ${namespace}   # run the reconciler again
  make cluster-down                                                     # stop the cluster
TEXT

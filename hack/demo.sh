#!/usr/bin/env bash
# `make demo`: the local cluster (already started by `make cluster-up`), the
# example declarations of examples/gitops applied with server-side apply, and
# the reconciler started against it until it is healthy and leading.
#
# The controllers that turn the declarations into namespaces, pods and warm
# pools come with the Controllers issues; until then the demo shows the API
# (the five kinds, their validation and printer columns) and a healthy,
# leader-elected reconciler.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
KUBECONFIG="$(hack/cluster.sh kubeconfig)"
export KUBECONFIG
kubectl() { "$(tools/build.sh --print-bin kube)/kubectl" "$@"; }
log() { printf '\n==> %s\n' "$*" >&2; }

log "applying examples/gitops (server-side apply, field manager agentsandbox-demo)"
kubectl apply --server-side --field-manager agentsandbox-demo -f examples/gitops/

log "kubectl get agentsandbox"
kubectl get agentsandbox -o wide

namespace=agentsandbox-system
kubectl create namespace "${namespace}" --dry-run=client -o yaml | kubectl apply --server-side -f - >/dev/null
log "starting the reconciler (bin/agentsandbox reconcile)"
logfile="$(mktemp)"
bin/agentsandbox reconcile --leader-election-namespace "${namespace}" \
	--health-addr 127.0.0.1:18081 --metrics-addr 127.0.0.1:18080 >"${logfile}" 2>&1 &
pid=$!
trap 'kill ${pid} 2>/dev/null || true; wait ${pid} 2>/dev/null || true; rm -f "${logfile}"' EXIT
for _ in $(seq 1 100); do
	if curl -fsS http://127.0.0.1:18081/readyz >/dev/null 2>&1 &&
		[[ -n "$(kubectl -n "${namespace}" get lease agentsandbox-reconciler -o jsonpath='{.spec.holderIdentity}' 2>/dev/null)" ]]; then
		break
	fi
	kill -0 "${pid}" 2>/dev/null || { cat "${logfile}" >&2; exit 1; }
	sleep 0.2
done
echo "readyz: $(curl -fsS http://127.0.0.1:18081/readyz)"
echo "leader: $(kubectl -n "${namespace}" get lease agentsandbox-reconciler -o jsonpath='{.spec.holderIdentity}')"
echo "metrics: $(curl -fsS http://127.0.0.1:18080/metrics | grep -c '^[a-z]') series"

log "demo done; the cluster keeps running"
cat <<TEXT
  export KUBECONFIG=${KUBECONFIG}
  kubectl get agentsandbox          # (kubectl: $(tools/build.sh --print-bin kube)/kubectl)
  make cluster-down                 # stop it
TEXT

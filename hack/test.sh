#!/usr/bin/env bash
# `make test`: every check and every test, against the local cluster.
#
# Builds the pinned tools (cached), checks that generated files are current,
# gofmt and go vet, then runs `go test ./...` (through gotestsum, which lists
# the 20 slowest tests at the end) against the local kwok cluster
# with a real node joined to it (hack/node.sh) when this machine can run
# one, then fuzzes the GitSync declaration decoder for FUZZTIME (default 30s).
# A cluster this script starts is stopped when it exits, pass or fail; one
# that was already running (make cluster-up, make demo) is recreated empty
# first and left running.
#
# To run the same tests against another cluster (kind, say), skip this script:
#   KUBECONFIG=$HOME/.kube/kind go test ./...
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
start=${SECONDS}
log() { printf '==> %s\n' "$*" >&2; }

tools/build.sh

log "checking generated files"
make --no-print-directory verify-generate
log "gofmt and go vet"
make --no-print-directory lint

started=false
if hack/cluster.sh status; then
	# Tests create the example objects under their own names, which a
	# `make demo` leaves behind: start from a clean cluster, and leave it
	# running afterwards as it was.
	log "recreating the running local cluster, so no demo or earlier run leaves objects behind"
	hack/cluster.sh down
else
	started=true
	trap 'hack/cluster.sh down' EXIT
fi
hack/cluster.sh up
KUBECONFIG="$(hack/cluster.sh kubeconfig)"
export KUBECONFIG

# The real node runs sandboxes for real (realnode/); it is taken down when
# the tests end, pass or fail. Where the machine cannot run it the realnode
# tests skip, saying why, except in CI, which must prove isolation.
if hack/node.sh check; then
	trap 'hack/node.sh down; if ${started}; then hack/cluster.sh down; fi' EXIT
	hack/node.sh up
	export AGENTSANDBOX_REAL_NODE=true
elif [[ "${CI:-}" == true ]]; then
	log "CI needs the real node, and this machine cannot run it (above)"
	exit 1
else
	log "the real-node tests (realnode/) will skip: this machine cannot run the node (above)"
fi

log "go test ./... (cluster started by this run: ${started})"
# One package at a time (-p 1): controller test packages each run the
# reconciler in-process without leader election, and two reconcilers acting
# on the same objects at once is not how it runs in a cluster. Within a
# package, up to 8 parallel tests at once (go test's default is one per
# core, 2 here): they spend their time waiting on the API server and the
# controllers, not computing.
# Through gotestsum, which prints what go test prints and keeps the JSON
# events, from which the slowest tests are listed at the end, pass or fail:
# where make test's minutes go.
report="$(mktemp -t agentsandbox-test-XXXXXX.json)"
gotestsum="$(tools/build.sh --print-bin gotestsum)/gotestsum"
status=0
# shellcheck disable=SC2086 # GO_TEST_FLAGS is a list of flags
"${gotestsum}" --format standard-quiet --jsonfile "${report}" -- ${GO_TEST_FLAGS:--count=1 -p 1 -parallel 8 -timeout 45m} ./... || status=$?
log "the 20 slowest tests (all events: ${report})"
"${gotestsum}" tool slowest --jsonfile "${report}" --num 20 >&2 || true
[[ ${status} -eq 0 ]] || exit "${status}"
log "fuzzing the GitSync declaration decoder for ${FUZZTIME:=30s}"
make --no-print-directory fuzz FUZZTIME="${FUZZTIME}"
log "all tests passed in $((SECONDS - start))s"

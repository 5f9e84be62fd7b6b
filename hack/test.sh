#!/usr/bin/env bash
# `make test`: every check and every test, against the local cluster.
#
# Builds the pinned tools (cached), checks that generated files are current,
# runs golangci-lint (make lint), then runs `go test ./...` (through gotestsum, which lists
# the 20 slowest tests at the end) against TEST_CLUSTERS (default 2) local
# kwok clusters, one package on each at a time, the first with a real node
# joined to it (hack/node.sh) when this machine can run one, then fuzzes the
# GitSync declaration decoder for FUZZTIME (default 30s).
# A cluster this script starts is stopped when it exits, pass or fail; a
# default one that was already running (make cluster-up, make demo) is
# recreated empty first and left running.
#
# To run the same tests against another cluster (kind, say), skip this script:
#   KUBECONFIG=$HOME/.kube/kind go test ./...
# (the packages then take turns on that one cluster).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
start=${SECONDS}
log() { printf '==> %s\n' "$*" >&2; }

tools/build.sh

# need_packages installs the Debian packages some tests drive, when one of
# their commands is missing: need_packages WHAT PACKAGE COMMAND...
need_packages() {
	local what="$1" package="$2" cmd
	shift 2
	for cmd in "$@"; do
		command -v "${cmd}" >/dev/null && continue
		if [[ ${EUID} -eq 0 ]] && command -v apt-get >/dev/null; then
			log "apt-get install ${package}, for ${what}"
			apt-get update -qq
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${package}" >/dev/null
		else
			log "${what} need ${cmd}, and will fail: install ${package}"
		fi
		return
	done
}
# The SSH tests run Debian's OpenSSH client (ssh in cmd/agentsandbox, scp
# in sshproxy); the Sandboxes page's tests (webui) drive Debian's headless
# Chromium.
need_packages "the SSH tests" openssh-client ssh scp
need_packages "the Sandboxes page tests" chromium chromium
need_packages "make lint's shell checks" shellcheck shellcheck
# The page embeds its terminal emulator, installed from npm.
hack/web.sh

log "checking generated files"
make --no-print-directory verify-generate
log "golangci-lint (gofmt, go vet, staticcheck and the layout's import rules) and shellcheck"
make --no-print-directory lint

# Test packages run two at a time (TEST_CLUSTERS), each on a local cluster
# of its own: every package runs the reconciler in-process, and two
# reconcilers acting on one cluster's objects is not how it runs. A package
# takes a free cluster of those AGENTSANDBOX_TEST_CLUSTERS names and holds it
# until it ends (internal/testharness/testcluster); the first is the default cluster,
# the one the real node joins.
clusters=(agentsandbox)
for ((i = 2; i <= ${TEST_CLUSTERS:=2}; i++)); do clusters+=("agentsandbox-${i}"); done

started=false
node=false
cleanup() {
	if ${node}; then hack/node.sh down; fi
	local name stopped=("${clusters[@]:1}")
	for name in "${stopped[@]}"; do AGENTSANDBOX_CLUSTER="${name}" hack/cluster.sh down; done
	if ${started}; then
		hack/cluster.sh down
		stopped+=("${clusters[0]}")
	fi
	# Nothing of a stopped cluster may outlive it (once, a test's restart
	# left an API server running): say so if anything did.
	local kwok="${AGENTSANDBOX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agentsandbox}/kwok/clusters"
	for name in "${stopped[@]}"; do
		if pgrep -f "${kwok}/${name}/" >/dev/null; then
			log "processes of cluster ${name} outlived it:"
			pgrep -af "${kwok}/${name}/" | cut -c1-160 >&2 || true
		fi
	done
}
trap cleanup EXIT
if hack/cluster.sh status; then
	# Tests create the example objects under their own names, which a
	# `make demo` leaves behind: start from a clean cluster, and leave it
	# running afterwards as it was.
	log "recreating the running local cluster, so no demo or earlier run leaves objects behind"
	hack/cluster.sh down
else
	started=true
fi
hack/cluster.sh up
# The other clusters start from nothing, one after the other: kwokctl picks
# each component's port as one unused at that moment, and two clusters
# created at once can pick the same one.
for name in "${clusters[@]:1}"; do
	AGENTSANDBOX_CLUSTER="${name}" hack/cluster.sh down
	AGENTSANDBOX_CLUSTER="${name}" hack/cluster.sh up
done
KUBECONFIG="$(hack/cluster.sh kubeconfig)"
export KUBECONFIG
AGENTSANDBOX_TEST_CLUSTERS="$(IFS=,; echo "${clusters[*]}")"
export AGENTSANDBOX_TEST_CLUSTERS

# The real node runs sandboxes for real (realnode/); it is taken down when
# the tests end, pass or fail. Where the machine cannot run it the realnode
# tests skip, saying why, except in CI, which must prove isolation.
if hack/node.sh check; then
	node=true
	hack/node.sh up
	export AGENTSANDBOX_REAL_NODE=true
elif [[ "${CI:-}" == true ]]; then
	log "CI needs the real node, and this machine cannot run it (above)"
	exit 1
else
	log "the real-node tests (realnode/) will skip: this machine cannot run the node (above)"
fi

log "go test ./... on ${#clusters[@]} clusters (${AGENTSANDBOX_TEST_CLUSTERS})"
# As many packages at once as there are clusters (-p); within a package, up
# to 8 parallel tests at once (go test's default is one per core, 2 here):
# they spend their time waiting on the API server and the controllers, not
# computing.
# Through gotestsum, which prints what go test prints and keeps the JSON
# events, from which the slowest tests are listed at the end, pass or fail:
# where make test's minutes go.
# The longest packages first (go test starts them in the order given):
# started last, one would run alone at the end while the other cluster
# idles. realnode comes first, as it can only take the first cluster, and
# provider, the longest, takes the second at once; cmd/agentsandbox and
# resources (the resource types' acceptance tests) follow on whichever is
# free.
longest=(./realnode ./provider ./cmd/agentsandbox ./resources)
mapfile -t rest < <(go list ./... | grep -v -x -F "$(printf 'github.com/agentsandbox/terraform-provider-agentsandbox/%s\n' "${longest[@]#./}")")
packages=("${longest[@]}" "${rest[@]}")
report="$(mktemp -t agentsandbox-test-XXXXXX.json)"
# Tests write what a person should be able to look at afterwards (the
# Sandboxes page's screenshots) with t.ArtifactDir: kept here.
artifacts="${root}/bin/test-artifacts"
rm -rf "${artifacts}"
mkdir -p "${artifacts}"
gotestsum="$(tools/build.sh --print-bin gotestsum)/gotestsum"
status=0
# shellcheck disable=SC2086 # GO_TEST_FLAGS is a list of flags
"${gotestsum}" --format standard-quiet --jsonfile "${report}" -- ${GO_TEST_FLAGS:--count=1 -p ${#clusters[@]} -parallel 8 -timeout 45m -artifacts -outputdir ${artifacts}} "${packages[@]}" || status=$?
log "the 20 slowest tests (all events: ${report})"
"${gotestsum}" tool slowest --jsonfile "${report}" --num 20 >&2 || true
[[ ${status} -eq 0 ]] || exit "${status}"
log "fuzzing the GitSync declaration decoder for ${FUZZTIME:=30s}"
make --no-print-directory fuzz FUZZTIME="${FUZZTIME}"
log "all tests passed in $((SECONDS - start))s (the Sandboxes page's screenshots: find ${artifacts#"${root}/"} -name '*.png')"

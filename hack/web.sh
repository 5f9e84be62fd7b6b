#!/usr/bin/env bash
# Installs the Sandboxes page's terminal emulator (xterm.js and its fit
# add-on) from npm, exactly as webui/frontend/package-lock.json pins it, and
# copies the files the page serves into webui/static/vendor, which go build
# embeds. Neither directory is committed: no third-party code lives in the
# repository. make build, make demo and make test run this; it does nothing
# when the copies match the lockfile.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
frontend="${root}/webui/frontend"
vendor="${root}/webui/static/vendor"
stamp="${frontend}/node_modules/.copied-lock-sha256"
log() { printf '==> %s\n' "$*" >&2; }

want="$(sha256sum "${frontend}/package-lock.json" | cut -d' ' -f1)"
if [[ -f ${stamp} && "$(cat "${stamp}")" == "${want}" && -f ${vendor}/xterm.js ]]; then
	exit 0
fi

if ! command -v npm >/dev/null; then
	if [[ ${EUID} -eq 0 ]] && command -v apt-get >/dev/null; then
		log "apt-get install npm, for the Sandboxes page's terminal emulator"
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
	else
		echo "npm is needed to build the Sandboxes page's terminal (xterm.js): install Node.js and npm" >&2
		exit 1
	fi
fi

log "npm ci (webui/frontend): xterm.js for the Sandboxes page"
npm ci --prefix "${frontend}" --ignore-scripts --no-audit --no-fund --loglevel=error
mkdir -p "${vendor}"
modules="${frontend}/node_modules/@xterm"
cp "${modules}/xterm/lib/xterm.js" "${modules}/xterm/css/xterm.css" "${modules}/addon-fit/lib/addon-fit.js" "${vendor}/"
cp "${modules}/xterm/LICENSE" "${vendor}/xterm.LICENSE"
echo "${want}" >"${stamp}"

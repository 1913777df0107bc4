#!/usr/bin/env bash
# Builds the helm command from its Go module at a pinned version, once, into
# a cache outside the repository (never committed), and prints its path; with
# arguments, runs it with them.
# Usage: scripts/helm.sh [HELM ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

helm_version=v4.3.2
cache=${AGENTSANDBOX_CACHE:-/var/cache/agentsandbox}
[ -w "$(dirname "$cache")" ] || [ -w "$cache" ] || cache=${XDG_CACHE_HOME:-$HOME/.cache}/agentsandbox
helm=$cache/helm-$helm_version/helm
if [ ! -x "$helm" ]; then
	mkdir -p "$(dirname "$helm")"
	echo "helm.sh: building helm $helm_version into $(dirname "$helm")" >&2
	GOBIN=$(dirname "$helm") GOFLAGS=-mod=mod go install "helm.sh/helm/v4/cmd/helm@$helm_version"
fi
if [ $# -eq 0 ]; then
	echo "$helm"
	exit 0
fi
# helm keeps no state of ours: its caches and config in a throwaway home.
home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
HELM_CACHE_HOME=$home/cache HELM_CONFIG_HOME=$home/config HELM_DATA_HOME=$home/data "$helm" "$@"

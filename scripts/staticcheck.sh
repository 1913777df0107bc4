#!/usr/bin/env bash
# Runs staticcheck (honnef.co/go/tools, pinned) over the module, installing
# it first into a cache outside the repository when it is not there.
set -euo pipefail
cd "$(dirname "$0")/.."
version=v0.8.2
bin=/var/cache/agentsandbox/staticcheck-$version
[ -w /var/cache ] || bin=${XDG_CACHE_HOME:-$HOME/.cache}/agentsandbox/staticcheck-$version
if [ ! -x "$bin/staticcheck" ]; then
  mkdir -p "$bin"
  GOBIN=$bin go install "honnef.co/go/tools/cmd/staticcheck@$version"
fi
"$bin/staticcheck" ./...

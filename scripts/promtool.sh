#!/usr/bin/env bash
# Prints the path of a promtool to check metrics with: the one on PATH, or
# the one in Debian's prometheus package, downloaded and unpacked (not
# installed: no server, no service) into a cache directory once.
# Usage: scripts/promtool.sh
set -euo pipefail
if command -v promtool >/dev/null 2>&1; then
	command -v promtool
	exit 0
fi
cache=${AGENTSANDBOX_CACHE:-/var/cache/agentsandbox}/promtool
if [ ! -x "$cache/usr/bin/promtool" ]; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	(cd "$tmp" && apt-get download prometheus >/dev/null 2>&1) ||
		{ apt-get update >/dev/null 2>&1 && (cd "$tmp" && apt-get download prometheus >/dev/null); }
	mkdir -p "$cache"
	dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/x"
	install -D -m 0755 "$tmp/x/usr/bin/promtool" "$cache/usr/bin/promtool"
fi
echo "$cache/usr/bin/promtool"

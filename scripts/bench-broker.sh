#!/usr/bin/env bash
# Compares the egress proxy's credential broker (TLS interception of a
# secret's host, the value put in) with a blind CONNECT tunnel to the same
# loopback HTTPS upstream, interleaved in one run (egress.TestCompareBroker):
# small GETs on a kept-alive connection (p50), the first request on a new
# connection (a new host each time for the broker, so a leaf is minted),
# and a download of DOWNLOAD_MIB (default 1024). Prints the medians of the
# rounds and the ratios. Only loopback is used.
# Usage: scripts/bench-broker.sh [ROUNDS] [REQUESTS]   (defaults: 5, 2000; DOWNLOAD_MIB=1024)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/egress.test" ./egress/
AGENTSANDBOX_COMPARE_BROKER=1 AGENTSANDBOX_COMPARE_ROUNDS=${1:-5} AGENTSANDBOX_COMPARE_REQUESTS=${2:-2000} \
	AGENTSANDBOX_COMPARE_DOWNLOAD_MIB=${DOWNLOAD_MIB:-1024} \
	"$tmp/egress.test" -test.run '^TestCompareBroker$' -test.count=1 | grep -v '^PASS$'

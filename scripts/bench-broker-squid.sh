#!/usr/bin/env bash
# The credential broker side by side with Squid's ssl-bump (Debian's
# squid-openssl): egress.TestCompareBroker with a third side, a Squid the
# test configures in a temporary directory (its own squid.conf, a
# certificate database made by security_file_certgen, a test CA, a port on
# 127.0.0.1, names resolved by its hosts file only), bumping every CONNECT
# to the same loopback HTTPS upstream (whose CA it trusts) and replacing
# the Authorization header as the broker substitutes it. Interleaved rounds
# in one run: keep-alive GET p50, the first request on a new connection (a
# new host each time), a download of DOWNLOAD_MIB (default 1024); medians
# and ratios. Squid is stopped (with its helpers) and its directory removed
# when the run ends; only loopback is used.
# Usage: scripts/bench-broker-squid.sh [ROUNDS] [REQUESTS]   (defaults: 5, 2000; DOWNLOAD_MIB=1024)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
squid=$(command -v squid || true)
if [ -z "$squid" ] || ! "$squid" -v | grep -q -- '--with-openssl'; then
	echo "needs Squid built with OpenSSL: apt-get install -y squid-openssl (then: systemctl disable --now squid)" >&2
	exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/egress.test" ./egress/
AGENTSANDBOX_COMPARE_BROKER=1 AGENTSANDBOX_COMPARE_SQUID=$squid AGENTSANDBOX_COMPARE_ROUNDS=${1:-5} \
	AGENTSANDBOX_COMPARE_REQUESTS=${2:-2000} AGENTSANDBOX_COMPARE_DOWNLOAD_MIB=${DOWNLOAD_MIB:-1024} \
	"$tmp/egress.test" -test.run '^TestCompareBroker$' -test.count=1 | grep -v '^PASS$'

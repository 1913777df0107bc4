#!/usr/bin/env bash
# Compares the egress proxy with stripe/smokescreen and a direct loopback
# connection, interleaved in one run (direct, ours, ours through the
# in-sandbox bridge, a bare splice relay, smokescreen, then again; ours and
# the relay in a process of their own, as the worker and smokescreen run): a CONNECT upload of
# UPLOAD_MIB (default 1024) per side and round, and small GETs with a
# keep-alive client. It builds smokescreen from the checkout at
# SMOKESCREEN_SRC into a temporary directory (nothing of it enters this
# repository), runs it on a free loopback port with --allow-range
# 127.0.0.0/8 (so it may reach the loopback servers that stand in for the
# internet; ours reaches them through its test dial hook), runs
# TestCompareProxies (egress/compare_test.go) against it, and prints the
# medians and the ratios. Only loopback is used.
# Usage: scripts/bench-egress.sh SMOKESCREEN_SRC [ROUNDS] [REQUESTS]
#        (defaults: 5 rounds, 2000 GETs per side; UPLOAD_MIB=1024)
#        the README's figures: scripts/bench-egress.sh SRC 7 2000
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
src=${1:?usage: scripts/bench-egress.sh SMOKESCREEN_SRC [ROUNDS] [REQUESTS]}
rounds=${2:-5}
requests=${3:-2000}
tmp=$(mktemp -d)
smk_pid=
cleanup() {
	if [ -n "$smk_pid" ]; then kill "$smk_pid" 2>/dev/null || true; wait "$smk_pid" 2>/dev/null || true; fi
	rm -rf "$tmp"
}
trap cleanup EXIT

mod=mod
[ -d "$src/vendor" ] && mod=vendor
(cd "$src" && go build -mod="$mod" -o "$tmp/smokescreen" .)
go test -c -o "$tmp/egress.test" ./egress/

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$tmp/smokescreen" --listen-ip 127.0.0.1 --listen-port "$port" --allow-range 127.0.0.0/8 \
	--statsd-address 127.0.0.1:9 >"$tmp/smokescreen.log" 2>&1 &
smk_pid=$!
for _ in $(seq 100); do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
	sleep 0.1
done

echo "bench-egress: smokescreen $(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo '?') on 127.0.0.1:$port," \
	"$(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
AGENTSANDBOX_SMOKESCREEN_ADDR="127.0.0.1:$port" AGENTSANDBOX_COMPARE_ROUNDS="$rounds" \
	AGENTSANDBOX_COMPARE_REQUESTS="$requests" AGENTSANDBOX_COMPARE_UPLOAD_MIB="${UPLOAD_MIB:-1024}" \
	"$tmp/egress.test" -test.run '^TestCompareProxies$' -test.count 1 -test.v -test.timeout 30m |
	grep -v -e '^=== RUN' -e '^--- PASS' -e '^PASS$'

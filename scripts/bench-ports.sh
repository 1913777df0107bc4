#!/usr/bin/env bash
# Measures the forwarding to a sandbox's ports (BenchmarkRealPorts in
# worker/httpapi, a real sandbox, as root), each comparison's two sides
# interleaved in every round, and prints the medians and the ratios:
#   - a small GET on one kept-alive connection, the same python3 client
#     (scripts/ports/getbench.py, AGENTSANDBOX_PORTS_GETS per side and round,
#     default 2000) and the same server (scripts/ports/app.py in the sandbox):
#     through the port route from the host, and inside the sandbox to itself;
#   - a download of AGENTSANDBOX_PORTS_DOWNLOAD_MIB (default 1024) with curl:
#     through the port route from the host, and through the sandbox's egress
#     tunnel (curl inside, CONNECT through its bridge and the worker's proxy,
#     whose test dialer takes a "public" address to the same app on the host's
#     loopback).
# Only loopback and the sandbox's own network are used.
# Usage: scripts/bench-ports.sh [ROUNDS]   (default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
rounds=${1:-5}
[ "$(id -u)" = 0 ] || { echo "bench-ports: run as root (real sandboxes)" >&2; exit 1; }

echo "bench-ports: $rounds rounds, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
out=$(CI=true go test -run '^$' -bench '^BenchmarkRealPorts$' -benchtime "${rounds}x" -count 1 -timeout 60m ./worker/httpapi/)
line=$(printf '%s\n' "$out" | grep '^BenchmarkRealPorts')
metric() { printf '%s\n' "$line" | awk -v unit="$1" '{ for (i = 2; i < NF; i++) if ($(i+1) == unit) print $i }'; }
printf '%s\n' "$out" | grep 'rounds:' | sed 's/^ *//'
cat <<REPORT
small GET, kept alive, p50 (medians of the rounds):
  inside the sandbox to itself   $(metric get-inside-p50-us) µs
  through the port route         $(metric get-port-p50-us) µs
  added (median of the rounds)   $(metric get-added-p50-us) µs   (target < 500 µs)
download of ${AGENTSANDBOX_PORTS_DOWNLOAD_MIB:-1024} MiB (medians of the rounds):
  through the port route         $(metric download-port-MiB/s) MiB/s
  through the egress tunnel      $(metric download-egress-MiB/s) MiB/s
  ratio (median of the rounds)   $(metric download-port/egress)x   (target >= 0.5x)
REPORT

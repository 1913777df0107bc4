#!/usr/bin/env bash
# Three workers of capacity 8 on this machine (real sandboxes, pooled):
# 24 creates at once through the Go client's Pool against 8 at once to one
# worker (and 8 at once through the pool, to tell its own cost from the
# load), interleaved round by round (BenchmarkPoolCreate in e2e/), and
# prints each side's p50 and p99 and the ratio of the first two p50s.
# Usage: scripts/bench-pool.sh [ROUNDS]   (default 10; as root)
#
# scripts/bench-pool.sh browser [ROUNDS]   (default 6; as root, Chromium
# installed): a browser sandbox's create to the answer of its first CDP
# Page.navigate through the API, from the browser pool (--pool-browser:
# Chromium started ahead) against cold (Chromium started by the first
# connection), interleaved round by round (BenchmarkRealBrowserPool in
# worker/httpapi/); prints each side's p50, p90 and phases, the ratio of the
# p50s, and what a warm browser sandbox holds before any client (its
# cgroup's memory and its processes' summed PSS).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
if [ "${1:-}" = browser ]; then
	rounds=${2:-6}
	echo "bench-pool browser: $rounds rounds, load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%MZ), $(git rev-parse --short HEAD)"
	out=$(mktemp)
	trap 'rm -f "$out"' EXIT
	if ! CI=true go test -count=1 -run '^$' -bench '^BenchmarkRealBrowserPool$' -benchtime "${rounds}x" -timeout 30m ./worker/httpapi/ >"$out" 2>&1; then
		cat "$out"
		exit 1
	fi
	awk '/^BenchmarkRealBrowserPool/ {
			for (i = 3; i < NF; i += 2) v[$(i + 1)] = $i
			for (s = 1; s <= 2; s++) {
				side = s == 1 ? "pooled" : "cold"
				printf "%-6s create → first navigate answered: p50 %s ms, p90 %s ms (phases p50: create %s, page server %s, connect %s, new page %s, navigate %s)\n", side,
					v[side "-p50-ms"], v[side "-p90-ms"], v[side "-create-p50-ms"], v[side "-server-p50-ms"], v[side "-dial-p50-ms"], v[side "-newpage-p50-ms"], v[side "-navigate-p50-ms"]
			}
			printf "p50 ratio (pooled / cold): %s\n", v["p50-ratio"]
			printf "a warm browser sandbox before any client: cgroup memory p50 %s MiB, its processes PSS p50 %s MiB\n", v["warm-cgroup-MiB-p50"], v["warm-pss-MiB-p50"]
		}' "$out"
	exit
fi
rounds=${1:-10}
echo "bench-pool: $rounds rounds, load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%MZ)"
CI=true go test -count=1 -run '^$' -bench '^BenchmarkPoolCreate$' -benchtime "${rounds}x" -timeout 30m ./e2e/ |
	awk '/^BenchmarkPoolCreate/ {
		for (i = 3; i < NF; i += 2) v[$(i + 1)] = $i
		printf "through the pool, 24 at once: p50 %s ms, p99 %s ms\n", v["pool24-p50-ms"], v["pool24-p99-ms"]
		printf "one worker, 8 at once:        p50 %s ms, p99 %s ms\n", v["one8-p50-ms"], v["one8-p99-ms"]
		printf "through the pool, 8 at once:  p50 %s ms, p99 %s ms\n", v["pool8-p50-ms"], v["pool8-p99-ms"]
		printf "p50 ratio (pool / one): %s\n", v["p50-ratio"]
	}
	/creates through the pool/ { sub(/^ +/, ""); last = $0 }
	END { if (last != "") print last }'

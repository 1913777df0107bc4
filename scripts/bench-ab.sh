#!/usr/bin/env bash
# Compares the sandbox runtime's create, exec and wipe at two revisions,
# interleaved in one run (A, B, A, B…), so that both see the same machine
# load: it builds this package's benchmark binary at BASE (a git revision,
# checked out in a temporary worktree) and at the working tree, then runs
# BenchmarkCreate, BenchmarkCreateInit (with each revision's own worker and
# lean init binaries), BenchmarkExecTrue and BenchmarkWipe ROUNDS times each,
# alternating, and prints every round's p50, the medians of the p50s and
# the ratio new/base. Needs root, bubblewrap and cgroups.
# Usage: scripts/bench-ab.sh BASE [ROUNDS] [N]   (defaults: 5 rounds of 50)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
base=${1:?usage: scripts/bench-ab.sh BASE [ROUNDS] [N]}
rounds=${2:-5}
n=${3:-50}
tmp=$(mktemp -d)
cleanup() {
	git worktree remove --force "$tmp/base" >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT
git worktree add --detach "$tmp/base" "$base" >/dev/null 2>&1
gobuild=$PWD/scripts/gobuild.sh # both sides built the same way, as they ship
# A base from before the worker's own command (cmd/codes-sandbox-worker)
# builds the commands it has: its benchmarks re-execute its codes-sandbox.
(cd "$tmp/base" && go test -c -o "$tmp/base.test" ./sandbox/ &&
	"$gobuild" "$tmp/base-bin" $(ls -d ./cmd/codes-sandbox ./cmd/codes-sandbox-worker ./cmd/codes-sandbox-init 2>/dev/null))
go test -c -o "$tmp/new.test" ./sandbox/
"$gobuild" "$tmp/new-bin" ./cmd/codes-sandbox ./cmd/codes-sandbox-worker ./cmd/codes-sandbox-init
echo "bench-ab: base $(git rev-parse --short "$base") vs working tree, $rounds rounds of ${n}x, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
	for side in base new; do
		CI=true BENCH_CODES_SANDBOX="$tmp/$side-bin/codes-sandbox" BENCH_CODES_SANDBOX_WORKER="$tmp/$side-bin/codes-sandbox-worker" BENCH_CODES_SANDBOX_INIT="$tmp/$side-bin/codes-sandbox-init" \
			"$tmp/$side.test" -test.run '^$' -test.bench '^Benchmark(Create|CreateInit|ExecTrue|Wipe)$' \
			-test.benchtime "${n}x" -test.count 1 2>/dev/null |
			awk -v side="$side" -v round="$r" '/^Benchmark/ {
				name = $1; sub(/^Benchmark/, "", name); sub(/-[0-9]+$/, "", name)
				for (i = 3; i < NF; i += 2) if ($(i+1) ~ /p50-ms$/) {
					metric = $(i+1); sub(/p50-ms$/, "", metric); sub(/-$/, "", metric)
					print side, round, name (metric == "" ? "" : "/" metric), $i
				} }'
	done
done | tee "$tmp/p50" | awk '{ printf "  round %s %-4s %-24s p50 %7.3f ms\n", $2, $1, $3, $4 }'
awk '
	{ v[$1, $3] = v[$1, $3] " " $4; names[$3] = 1 }
	function median(list,   a, n, i, j, t) {
		n = split(list, a, " ")
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	END {
		printf "\n%-24s %12s %12s %8s\n", "operation", "base p50 ms", "new p50 ms", "new/base"
		for (name in names) {
			b = median(v["base", name]); w = median(v["new", name])
			printf "%-24s %12.3f %12.3f %8.2f\n", name, b, w, w / b
		}
	}' "$tmp/p50"

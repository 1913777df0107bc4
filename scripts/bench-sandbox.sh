#!/usr/bin/env bash
# Benchmarks the sandbox (issue 4), all in one run so the figures see the
# same machine load:
#   - `codes-sandbox run -- /bin/true` next to a bare `bwrap --unshare-all ...
#     /bin/true` and `codes-sandbox run --help` (the binary's own start, no
#     sandbox), alternating, N rounds each,
#   - exec of /bin/true in an existing sandbox,
#   - Create (until the init accepts commands) with this package's test
#     binary as the init, and with the inits a worker really runs, alternating:
#     the worker binary re-executed and the lean codes-sandbox-init,
#   - the verified wipe.
# Prints p50/p90 in milliseconds, and for the one-off run, bwrap and binary
# start also the CPU time each used with its whole process tree (user and
# system; the processes it leaves behind included, kernel threads' work such
# as a network namespace's teardown in neither). scripts/profile-run.sh
# shows where that CPU goes, process by process. Needs root, bubblewrap and
# cgroups. It runs in a mount namespace of its own with a tmpfs at
# /run/codes-sandbox, the state dir, as a systemd host has it (/run is a
# tmpfs there, and a different file system from /usr/bin, where the
# binaries live).
# Usage: scripts/bench-sandbox.sh [N]   (default 200)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
n=${1:-200}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
scripts/gobuild.sh "$tmp" ./cmd/codes-sandbox ./cmd/codes-sandbox-worker ./cmd/codes-sandbox-init
echo "bench-sandbox: $n rounds, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
go test -c -o "$tmp/sandbox.test" ./sandbox/
mkdir -p /run/codes-sandbox
BENCH_CODES_SANDBOX="$tmp/codes-sandbox" BENCH_CODES_SANDBOX_WORKER="$tmp/codes-sandbox-worker" BENCH_CODES_SANDBOX_INIT="$tmp/codes-sandbox-init" CI=true \
	unshare -m --propagation private sh -c 'mount -t tmpfs -o mode=755 tmpfs /run/codes-sandbox && cd sandbox && exec "$0" "$@"' \
	"$tmp/sandbox.test" -test.run '^$' -test.bench '^Benchmark(OneOff|ExecTrue|Create|CreateInit|Wipe)$' -test.benchtime "${n}x" -test.count 1 |
	tee "$tmp/out" | grep -E '^(Benchmark|PASS|FAIL|---)' || true
awk '
	/^Benchmark/ {
		name = $1; sub(/^Benchmark/, "", name); sub(/-[0-9]+$/, "", name)
		for (i = 3; i < NF; i += 2) { v[name, $(i+1)] = $i }
	}
	END {
		printf "\n%-34s %9s %9s\n", "operation", "p50 ms", "p90 ms"
		printf "%-34s %9s %9s\n", "raw bwrap /bin/true", v["OneOff", "raw-bwrap-p50-ms"], v["OneOff", "raw-bwrap-p90-ms"]
		printf "%-34s %9s %9s\n", "codes-sandbox run -- /bin/true", v["OneOff", "run-p50-ms"], v["OneOff", "run-p90-ms"]
		printf "%-34s %9s %9s\n", "  of which binary start (--help)", v["OneOff", "binary-start-p50-ms"], v["OneOff", "binary-start-p90-ms"]
		printf "%-34s %9s %9s\n", "CPU: raw bwrap /bin/true", v["OneOff", "raw-bwrap-cpu-p50-ms"], v["OneOff", "raw-bwrap-cpu-p90-ms"]
		printf "%-34s %9s %9s\n", "CPU: codes-sandbox run", v["OneOff", "run-cpu-p50-ms"], v["OneOff", "run-cpu-p90-ms"]
		printf "%-34s %9s %9s\n", "CPU: binary start (--help)", v["OneOff", "binary-start-cpu-p50-ms"], v["OneOff", "binary-start-cpu-p90-ms"]
		printf "%-34s %9s %9s\n", "exec /bin/true (existing sandbox)", v["ExecTrue", "p50-ms"], v["ExecTrue", "p90-ms"]
		printf "%-34s %9s %9s\n", "create (until ready), test init", v["Create", "p50-ms"], v["Create", "p90-ms"]
		printf "%-34s %9s %9s\n", "  init: worker binary re-executed", v["CreateInit", "worker-binary-p50-ms"], v["CreateInit", "worker-binary-p90-ms"]
		printf "%-34s %9s %9s\n", "  init: lean codes-sandbox-init", v["CreateInit", "lean-init-p50-ms"], v["CreateInit", "lean-init-p90-ms"]
		printf "%-34s %9s %9s\n", "wipe (verified)", v["Wipe", "p50-ms"], v["Wipe", "p90-ms"]
		if (v["OneOff", "raw-bwrap-p50-ms"] > 0)
			printf "\nrun / raw bwrap (p50): %.2fx (target <= 2.5x on cgroup v1, <= 2x on v2); exec p50 target < 3 ms; wipe p50 target < 10 ms\n",
				v["OneOff", "run-p50-ms"] / v["OneOff", "raw-bwrap-p50-ms"]
		if (v["OneOff", "raw-bwrap-cpu-p50-ms"] > 0)
			printf "run / raw bwrap CPU time (p50): %.2fx; the binary start alone: %.2fx\n",
				v["OneOff", "run-cpu-p50-ms"] / v["OneOff", "raw-bwrap-cpu-p50-ms"],
				v["OneOff", "binary-start-cpu-p50-ms"] / v["OneOff", "raw-bwrap-cpu-p50-ms"]
	}' "$tmp/out"
grep -q '^PASS' "$tmp/out"

#!/usr/bin/env bash
# loadtest.sh: a real worker under load, through the Go client
# (scripts/loadtest). Root, loopback only: it starts its own worker on
# 127.0.0.1:0 with a state dir on a tmpfs of its own (as /run is on a
# systemd host), a cgroup parent of its own and --overcommit (N sandboxes at
# the default caps may add up to more than a small host has; the load never
# comes near them).
#
#   scripts/loadtest.sh [load] [DURATION] [N]...   (default: load 20s 1 10 50)
#       For each N, a worker of capacity N (its pool the default, the
#       capacity) and N clients, each a loop of create → exec /bin/true →
#       upload a 4 KiB file → download it → delete until DURATION ends:
#       rounds/s, p50/p99 of each operation, the worker's RSS and open
#       descriptors (/proc/PID: before, peak, after).
#   scripts/loadtest.sh burst [N] [ROUNDS]         (default: burst 50 3)
#       A worker of capacity N with no pool (--pool 0): ROUNDS rounds of N
#       raw bubblewrap starts at once, N cold creates at once, N execs of
#       /bin/true at once (one per sandbox) and N host fork+exec at once,
#       interleaved; medians and ratios.
#
# Each run ends by checking that nothing leaked: no operation failed, the
# worker lists no sandbox, and once it has stopped nothing is mounted below
# its state dir and no cgroup is left below its cgroup parent. It exits 1
# otherwise.
#
# Env: POOL (the worker's --pool), PPROF=DIR (serve the worker's profiles on
# a loopback metrics listener and save a 10 s CPU profile and a 5 s
# execution trace taken during the load into DIR), KEEP_LOG=FILE.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
[[ $(id -u) == 0 ]] || { echo "loadtest: run as root (the worker needs it)" >&2; exit 1; }
mode=load
if [[ "${1:-}" == load || "${1:-}" == burst ]]; then mode=$1; shift; fi

tmp=$(mktemp -d /tmp/agentsandbox-loadtest-XXXXXX)
chmod 755 "$tmp"
pid=
state=
cleanup() {
	if [[ -n "$pid" ]]; then kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true; fi
	[[ -n "$state" ]] && umount "$state" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
scripts/gobuild.sh "$tmp/bin" ./cmd/codes-sandbox ./cmd/codes-sandbox-worker ./cmd/codes-sandbox-init
go build -o "$tmp/bin/" ./scripts/loadtest
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/token"
chmod 600 "$tmp/token"

# start_worker CAPACITY [FLAGS...]: a worker with a fresh state dir and
# cgroup parent; sets pid, state, parent, api, metrics.
start_worker() {
	local capacity=$1
	shift
	state=$tmp/state.$capacity.$RANDOM
	parent=agentsandbox-loadtest-$$-$RANDOM
	mkdir -p "$state"
	mount -t tmpfs -o mode=0755 loadtest-state "$state"
	local extra=()
	[[ -n "${POOL:-}" ]] && extra+=(--pool "$POOL")
	[[ -n "${PPROF:-}" ]] && extra+=(--metrics-listen 127.0.0.1:0 --pprof)
	rm -f "$tmp/addr"
	"$tmp/bin/codes-sandbox" serve --listen 127.0.0.1:0 --addr-file "$tmp/addr" --api-token-file "$tmp/token" \
		--capacity "$capacity" --state-dir "$state" --cgroup-parent "$parent" --browser off --overcommit \
		"${extra[@]}" "$@" 2>"$tmp/worker.log" &
	pid=$!
	local t0=$SECONDS
	for _ in $(seq 3000); do [[ -s "$tmp/addr" ]] && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	[[ -s "$tmp/addr" ]] || { tail "$tmp/worker.log" >&2; exit 1; }
	api=http://$(cat "$tmp/addr")
	echo "  the worker (capacity $capacity${POOL:+, pool $POOL}) answered after $((SECONDS - t0)) s"
	metrics=$(sed -n 's/.*"msg":"serving metrics".*"addr":"\([^"]*\)".*/\1/p' "$tmp/worker.log" | head -1)
	# the pool fills before the load starts
	sleep "${SETTLE:-3}"
}

# profile: with PPROF, a CPU profile and an execution trace of the worker
# taken in the background while the load runs.
profile() {
	[[ -n "${PPROF:-}" && -n "$metrics" ]] || return 0
	mkdir -p "$PPROF"
	(
		sleep 1
		curl -fsS -o "$PPROF/$1.cpu.pprof" "http://$metrics/debug/pprof/profile?seconds=${PPROF_SECONDS:-10}"
		curl -fsS -o "$PPROF/$1.trace" "http://$metrics/debug/pprof/trace?seconds=5"
	) &
}

# stop_worker: stops the worker and checks what it leaves behind.
stop_worker() {
	local t0=$SECONDS
	kill -TERM "$pid"
	wait "$pid" || { echo "loadtest: the worker exited $?" >&2; tail "$tmp/worker.log" >&2; leaks=1; }
	pid=
	echo "  the worker stopped in $((SECONDS - t0)) s"
	[[ -n "${KEEP_LOG:-}" ]] && cp "$tmp/worker.log" "$KEEP_LOG"
	local mounts cgroups
	mounts=$(grep -c " $state/" /proc/self/mountinfo || true)
	cgroups=$({ find /sys/fs/cgroup/*/"$parent" /sys/fs/cgroup/"$parent" -mindepth 1 -type d 2>/dev/null || true; } | wc -l)
	echo "  after the worker stopped: mounts below its state dir $mounts, cgroups below its parent $cgroups"
	[[ "$mounts" == 0 && "$cgroups" == 0 ]] || leaks=1
	find /sys/fs/cgroup/*/"$parent" /sys/fs/cgroup/"$parent" -maxdepth 0 -type d -exec rmdir {} + 2>/dev/null || true
	umount "$state"
	state=
}

leaks=0
case $mode in
load)
	duration=${1:-20s}
	shift || true
	clients=("$@")
	[[ ${#clients[@]} -gt 0 ]] || clients=(1 10 50)
	echo "loadtest: $(date -u '+%Y-%m-%d %H:%M UTC'), the tree at $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo '+changes')"
	for n in "${clients[@]}"; do
		start_worker "$n"
		profile "load-$n"
		"$tmp/bin/loadtest" load --worker "$api" --token-file "$tmp/token" --clients "$n" --duration "$duration" --pid "$pid" || leaks=1
		wait_bg=$(jobs -pr | grep -vx "$pid" || true)
		[[ -n "$wait_bg" ]] && wait $wait_bg 2>/dev/null || true
		stop_worker
	done
	;;
burst)
	n=${1:-50}
	rounds=${2:-3}
	echo "loadtest: $(date -u '+%Y-%m-%d %H:%M UTC'), the tree at $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo '+changes'), $(bwrap --version)"
	POOL=${POOL:-0} start_worker "$n"
	profile "burst-$n"
	"$tmp/bin/loadtest" burst --worker "$api" --token-file "$tmp/token" --clients "$n" --rounds "$rounds" || leaks=1
	wait_bg=$(jobs -pr | grep -vx "$pid" || true)
	[[ -n "$wait_bg" ]] && wait $wait_bg 2>/dev/null || true
	stop_worker
	;;
esac
[[ $leaks == 0 ]] || { echo "loadtest: FAILED (an error or something left behind, above)" >&2; exit 1; }
echo "loadtest: no error, nothing left behind"

#!/usr/bin/env bash
# Latency of one sandbox round, three ways, in the same run (root, loopback):
#   api   create + exec /bin/true + delete through `codes-sandbox serve`'s API
#         (three curl requests, so curl's own start-up is included)
#   run   `codes-sandbox run -- /bin/true` (a process: runtime setup, create,
#         exec, wipe)
#   bwrap raw bubblewrap running /bin/true with every namespace unshared
# Prints p50/p90/max in milliseconds over ROUNDS rounds (default 100).
# Usage: sudo scripts/bench-worker.sh [ROUNDS]   (after `make build`)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
ROUNDS=${1:-100}
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }
[ -x "$BIN/codes-sandbox" ] || { echo "$BIN/codes-sandbox missing: make build" >&2; exit 1; }

TMP=$(mktemp -d)
WORKER_PID=
cleanup() {
	if [ -n "$WORKER_PID" ]; then kill -TERM "$WORKER_PID" 2>/dev/null && wait "$WORKER_PID" 2>/dev/null || true; fi
	if [ "${KEEP_LOG:-}" ]; then cp "$TMP/worker.log" /tmp/bench-worker.log; fi
	rm -rf "$TMP"
}
trap cleanup EXIT

now() { date +%s%N; }
# stats NAME FILE: p50, p90 and max of the nanosecond figures in FILE.
stats() {
	sort -n "$2" | awk -v name="$1" '{ v[NR] = $1 } END {
		p50 = v[int((NR - 1) * 0.5) + 1]; p90 = v[int((NR - 1) * 0.9) + 1]
		printf "%-6s n=%-4d p50 %7.1f ms   p90 %7.1f ms   max %7.1f ms\n", name, NR, p50 / 1e6, p90 / 1e6, v[NR] / 1e6 }'
}

head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$TMP/token"
TOKEN=$(cat "$TMP/token")
"$BIN/codes-sandbox" serve --listen 127.0.0.1:0 --addr-file "$TMP/addr" --api-token-file "$TMP/token" \
	--capacity 2 2>"$TMP/worker.log" &
WORKER_PID=$!
for _ in $(seq 300); do [ -s "$TMP/addr" ] && break; sleep 0.1; done
[ -s "$TMP/addr" ] || { echo "worker did not start:" >&2; cat "$TMP/worker.log" >&2; exit 1; }
API="http://$(cat "$TMP/addr")"
auth=(-H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json')

api_round() {
	local id
	id=$(curl -fsS "${auth[@]}" -X POST "$API/v1/sandboxes" -d '{}' | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
	[ -n "$id" ] || return 1
	curl -fsS "${auth[@]}" -X POST "$API/v1/sandboxes/$id/exec" -d '{"argv":["/bin/true"]}' | grep -q '"exit_code":0' || return 1
	curl -fsS "${auth[@]}" -X DELETE "$API/v1/sandboxes/$id" -o /dev/null
}
failed=0
for _ in $(seq "$ROUNDS"); do
	t0=$(now)
	if api_round; then echo $(($(now) - t0)) >>"$TMP/api"; else failed=$((failed + 1)); fi
done

for _ in $(seq "$ROUNDS"); do
	t0=$(now)
	"$BIN/codes-sandbox" run -- /bin/true
	echo $(($(now) - t0)) >>"$TMP/run"
done

bw=(bwrap --unshare-all --die-with-parent --new-session --cap-drop ALL --clearenv
	--ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64
	--proc /proc --dev /dev --tmpfs /tmp /bin/true)
for _ in $(seq "$ROUNDS"); do
	t0=$(now)
	"${bw[@]}"
	echo $(($(now) - t0)) >>"$TMP/bwrap"
done

echo "sandbox round latency, $ROUNDS rounds each ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
echo "worker: $(grep -m1 -oE 'sandboxes run (the lean init|this binary as their init)' "$TMP/worker.log" || echo 'init not logged')"
stats api "$TMP/api"
[ "$failed" = 0 ] || echo "api    $failed round(s) failed (see the worker's log: KEEP_LOG=1 keeps it in /tmp/bench-worker.log)"
stats run "$TMP/run"
stats bwrap "$TMP/bwrap"

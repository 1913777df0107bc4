#!/usr/bin/env bash
# What each SDK adds to a command's round trip: `true` run in one sandbox
# through the Go client, the Python SDK (sync and async) and the TypeScript
# SDK, interleaved round by round (scripts/bench-sdk/compare.py), p50 and p90
# of each and each p50 minus the Go client's. Root, loopback only: it starts
# its own worker. Needs Debian's python3-httpx and python3-websockets, and
# node >= 20 (it builds sdk/typescript).
# Usage: sudo scripts/bench-sdk.sh [ROUNDS]   (default 200)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
export ROUNDS=${1:-200}
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }

tmp=$(mktemp -d /tmp/agentsandbox-bench-sdk-XXXXXX)
chmod 755 "$tmp"
pid=
cleanup() {
  if [ -n "$pid" ]; then kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

go build -o "$tmp/bin/" ./cmd/codes-sandbox ./cmd/codes-sandbox-worker ./cmd/codes-sandbox-init ./scripts/bench-sdk/gorunner
(cd sdk/typescript && { [ -d node_modules ] || npm ci --no-audit --no-fund --loglevel=error; } && npm run --silent build)
printf 'bench-sdk-token\n' >"$tmp/api.token"
chmod 600 "$tmp/api.token"
"$tmp/bin/codes-sandbox" serve --listen 127.0.0.1:0 --addr-file "$tmp/addr" --api-token-file "$tmp/api.token" \
  --capacity 1 --state-dir "$tmp/state" --browser off 2>"$tmp/worker.log" &
pid=$!
for _ in $(seq 1200); do [ -s "$tmp/addr" ] && break; sleep 0.1; done
[ -s "$tmp/addr" ] || { tail "$tmp/worker.log" >&2; exit 1; }
export WORKER="http://$(cat "$tmp/addr")" TOKEN_FILE="$tmp/api.token"
SANDBOX=$(curl -sf -X POST -H "Authorization: Bearer bench-sdk-token" -H 'Content-Type: application/json' \
  -d '{"time_box_minutes":30}' "$WORKER/v1/sandboxes" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
export SANDBOX
echo "bench-sdk: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ), $ROUNDS rounds" >&2
/usr/bin/python3 scripts/bench-sdk/compare.py \
  "go=$tmp/bin/gorunner" \
  "python=/usr/bin/python3 scripts/bench-sdk/pyrunner.py" \
  "python-async=env ASYNC=1 /usr/bin/python3 scripts/bench-sdk/pyrunner.py" \
  "typescript=node scripts/bench-sdk/noderunner.mjs"

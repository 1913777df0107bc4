#!/usr/bin/env bash
# The SDKs' suites (sdk/python with pytest, sdk/typescript with node's test
# runner and tsc --noEmit), each run once, against one real worker this
# script starts: `codes-sandbox serve` on loopback, as root, with a token file
# and a temporary state directory. Needs root, bubblewrap, Debian's
# python3-httpx/-websockets/-pytest (scripts/install-deps.sh) and node >= 20
# with npm; with CI set, a missing piece is a failure, not a skip.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

missing() {
  if [ -n "${CI:-}" ]; then echo "sdk-test: CI is set, so this must run, but: $1" >&2; exit 1; fi
  echo "sdk-test: skipped: $1" >&2
}
[ "$(id -u)" = 0 ] || { missing "the worker runs sandboxes as root"; exit 0; }
command -v bwrap >/dev/null || { missing "bubblewrap is not installed (make deps)"; exit 0; }

tmp=$(mktemp -d /tmp/agentsandbox-sdk-test-XXXXXX)
chmod 755 "$tmp" # the sandbox uids traverse the state directory below it
pid=
cleanup() {
  if [ -n "$pid" ]; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

go build -o "$tmp/bin/" ./cmd/codes-sandbox ./cmd/codes-sandbox-worker ./cmd/codes-sandbox-init
printf 'sdk-test-token\n' >"$tmp/api.token"
chmod 600 "$tmp/api.token"
browser=off
command -v chromium >/dev/null && browser=auto
"$tmp/bin/codes-sandbox" serve --listen 127.0.0.1:0 --addr-file "$tmp/addr" --api-token-file "$tmp/api.token" \
  --capacity 4 --overcommit --state-dir "$tmp/state" --browser "$browser" --preview-listen 127.0.0.1:0 2>"$tmp/worker.log" &
pid=$!
for _ in $(seq 3000); do
  [ -s "$tmp/addr" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$tmp/worker.log" >&2; echo "sdk-test: the worker exited" >&2; exit 1; }
  sleep 0.1
done
[ -s "$tmp/addr" ] || { tail -20 "$tmp/worker.log" >&2; echo "sdk-test: the worker did not start in 300 s (its self-test runs first)" >&2; exit 1; }
export AGENTSANDBOX_TEST_WORKER="http://$(cat "$tmp/addr")" AGENTSANDBOX_TEST_TOKEN_FILE="$tmp/api.token" AGENTSANDBOX_BIN="$tmp/bin"
fail=0

echo "sdk-test: sdk/python (pytest)" >&2
(cd sdk/python && /usr/bin/python3 -m pytest -q -p no:cacheprovider) || fail=1

node_major=$(node --version 2>/dev/null | sed -E 's/^v([0-9]+).*/\1/' || true)
if [ -z "$node_major" ] || ! command -v npm >/dev/null || [ "$node_major" -lt 20 ]; then
  missing "node >= 20 and npm are needed for sdk/typescript (this node: ${node_major:-none})"
else
  echo "sdk-test: sdk/typescript (tsc --noEmit, node --test)" >&2
  (cd sdk/typescript && npm ci --no-audit --no-fund --loglevel=error && npm run --silent check && npm test --silent) || fail=1
fi

if [ "$fail" != 0 ]; then
  echo "sdk-test: the worker's log:" >&2
  tail -50 "$tmp/worker.log" >&2
  exit 1
fi

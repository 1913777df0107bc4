#!/usr/bin/env bash
# The whole system on one machine, loopback only (what `make demo` runs after
# `make build`): Live (ovlive on SQLite in a temp dir) with a person, an agent
# stream and a first-party service token; a sandbox worker (codes-sandbox
# serve) that proves its isolation and checks in with that Live; one command
# run in a sandbox through the worker's API; the owner's view; a clean stop.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
WAIT=${DEMO_WAIT_SECONDS:-30}

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
die() { echo "demo: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (sandboxes need root, bubblewrap and cgroups): sudo make demo"
for b in ovlive codes-sandbox; do [ -x "$BIN/$b" ] || die "$BIN/$b is missing: run make build"; done
command -v curl >/dev/null || die "curl is missing: apt-get install -y curl"

pretty() {
	if command -v jq >/dev/null; then jq .; elif command -v python3 >/dev/null; then python3 -m json.tool; else cat; echo; fi
}
# field NAME: the string value of "NAME" in the one JSON object on stdin.
field() { sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p"; }
# wait_for SECONDS WHAT COMMAND...: run COMMAND until it succeeds, at most SECONDS.
wait_for() {
	local deadline=$((SECONDS + $1)) what=$2
	shift 2
	until "$@" >/dev/null 2>&1; do
		[ $SECONDS -lt $deadline ] || die "gave up waiting for $what after ${WAIT}s (logs in $TMP)"
		sleep 0.1
	done
}

TMP=$(mktemp -d "${TMPDIR:-/tmp}/agentsandbox-demo.XXXXXX")
chmod 0700 "$TMP"
LIVE_PID= WORKER_PID=
# note LINE...: cleanup's messages. The demo's output may be a pipe whose reader
# is gone (`make demo | head`): a failed write is dropped, and the next ones
# are not tried, so nothing stops the cleanup or prints write errors.
OUT_GONE=
note() { [ -n "$OUT_GONE" ] || printf '%s\n' "$@" 2>/dev/null || OUT_GONE=1; }
# cleanup runs once, on every way out (the EXIT trap; the signal traps below
# turn a signal into an exit). It ignores the signals that would cut it
# short, a closed stdout included (SIGPIPE), and does every step whatever
# the one before did (no set -e); each wait in it is bounded.
cleanup() {
	local code=$?
	trap '' INT TERM HUP PIPE
	trap - EXIT
	set +e
	note "" $'\033[1m== stopping\033[0m'
	if [ -n "$WORKER_PID" ] && kill -0 "$WORKER_PID" 2>/dev/null; then
		kill -TERM "$WORKER_PID"
		for _ in $(seq 150); do kill -0 "$WORKER_PID" 2>/dev/null || break; sleep 0.1; done
		if kill -0 "$WORKER_PID" 2>/dev/null; then
			note "worker did not stop in 15 s; killing it (the next worker to start removes what its sandboxes left)"
			kill -KILL "$WORKER_PID"
		fi
		if wait "$WORKER_PID" 2>/dev/null; then note "worker stopped (every sandbox wiped)"; else note "worker exited with $?"; fi
	fi
	if [ -n "$LIVE_PID" ] && kill -0 "$LIVE_PID" 2>/dev/null; then
		kill -TERM "$LIVE_PID"
		for _ in $(seq 150); do kill -0 "$LIVE_PID" 2>/dev/null || break; sleep 0.1; done
		kill -0 "$LIVE_PID" 2>/dev/null && kill -KILL "$LIVE_PID"
		wait "$LIVE_PID" 2>/dev/null && note "Live stopped"
	fi
	if [ $code -ne 0 ] && [ -z "$OUT_GONE" ]; then
		note "demo failed (exit $code); last worker log lines:"
		tail -n 5 "$TMP/worker.log" 2>/dev/null
	fi
	rm -rf "$TMP"
	exit $code
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 141' PIPE
trap 'exit 143' TERM

DB="sqlite:$TMP/ovlive.db"
say "starting Live (ovlive) on SQLite, on a free loopback port"
# Both servers write to their logs only: neither holds the demo's output.
"$BIN/ovlive" serve --listen 127.0.0.1:0 --addr-file "$TMP/live.addr" --db "$DB" >"$TMP/live.log" 2>&1 &
LIVE_PID=$!
wait_for "$WAIT" "Live to listen" test -s "$TMP/live.addr"
LIVE="http://$(cat "$TMP/live.addr")"
echo "Live: $LIVE"

say "creating a person, an agent stream, a first-party service and its credentials"
admin() { "$BIN/ovlive" admin --db "$DB" "$@"; }
PERSON=$(admin person add --name "Demo Owner" | field id)
STREAM=$(admin stream add --owner "$PERSON" | field id)
SERVICE=$(admin service add --name codes-sandbox --first-party --capability live.agent_sandbox.register | field id)
(umask 077 && admin token issue --service "$SERVICE" | field token >"$TMP/service.token")
PERSON_TOKEN=$(admin token issue --person "$PERSON" | field token)
SESSION=$(admin session issue --person "$PERSON" | field session)
SIGN_IN=$(admin session link --person "$PERSON" --ttl 1h --base-url "$LIVE" | field url)
[ -s "$TMP/service.token" ] && [ -n "$PERSON_TOKEN" ] && [ -n "$SESSION" ] && [ -n "$SIGN_IN" ] ||
	die "could not issue the credentials"
echo "person $PERSON owns stream $STREAM; service $SERVICE holds live.agent_sandbox.register"
echo "service token written to a 0600 file (never on a command line)"

say "starting the sandbox worker (codes-sandbox serve, capacity 2), checking in with Live"
(umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$TMP/api.token")
API_TOKEN=$(cat "$TMP/api.token")
"$BIN/codes-sandbox" serve --listen 127.0.0.1:0 --addr-file "$TMP/worker.addr" \
	--api-token-file "$TMP/api.token" --capacity 2 \
	--live-url "$LIVE" --stream "$STREAM" --subject "$PERSON" --service-token-file "$TMP/service.token" \
	>"$TMP/worker.log" 2>&1 &
WORKER_PID=$!
wait_for "$WAIT" "the worker to listen" test -s "$TMP/worker.addr"
WORKER="http://$(cat "$TMP/worker.addr")"
echo "worker API: $WORKER"

view() { curl -fsS -H "Authorization: Bearer $PERSON_TOKEN" "$LIVE/api/streams/agent/$STREAM/plays/worker"; }
alive() { view | grep -q '"state":"alive"'; }
wait_for "$WAIT" "the owner's view to say alive" alive
echo "the owner's view says: alive"

say "running a command in a sandbox through the worker's API"
api() { curl -fsS -H "Authorization: Bearer $API_TOKEN" -H 'Content-Type: application/json' "$@"; }
BOX=$(api -X POST "$WORKER/v1/sandboxes" -d '{"time_box_minutes":5}' | field id)
[ -n "$BOX" ] || die "could not create a sandbox"
echo "created sandbox $BOX"
echo '$ sh -c '\''echo hello from the sandbox; id; cat /proc/self/status | grep -E "Cap(Eff|Bnd)|Seccomp"'\'
api -X POST "$WORKER/v1/sandboxes/$BOX/exec" \
	-d '{"argv":["sh","-c","echo hello from the sandbox; id; cat /proc/self/status | grep -E \"Cap(Eff|Bnd)|Seccomp\""]}' |
	while IFS= read -r ev; do echo "  $ev"; done
api -X DELETE "$WORKER/v1/sandboxes/$BOX" -o /dev/null -w 'deleted (wiped): HTTP %{http_code}\n'

if view | grep -q '"browser":true'; then
	say "a headless browser in a sandbox (the worker proved it: its check-in says browser: true)"
	# No egress for this one: this machine has no network to show, and
	# Chromium's own background requests must not reach a resolver.
	BOX=$(api -X POST "$WORKER/v1/sandboxes" -d '{"browser":{"start":true},"egress":{"mode":"none"}}' | field id)
	[ -n "$BOX" ] || die "could not create a browser sandbox"
	echo "created browser sandbox $BOX; its DevTools endpoint for Playwright, Puppeteer or chromedp:"
	api "$WORKER/v1/sandboxes/$BOX/browser/json/version" | pretty | sed 's/^/  /'
	api -X DELETE "$WORKER/v1/sandboxes/$BOX" -o /dev/null -w 'deleted (wiped, profile and all): HTTP %{http_code}\n'
else
	echo "(no browser on this worker: apt-get install chromium for the browser step)"
fi

say "the owner's view (GET /api/streams/agent/$STREAM/plays/worker with the owner's person token)"
view | pretty

say "the owner's page"
cat <<MSG
Sign in:  $SIGN_IN
          (a one-time link, for an hour: open it in a browser on this machine; it
          signs the owner in and lands on their streams, $LIVE/streams)
The page: $LIVE/streams/agent/$STREAM/worker
Or fetch it with the owner's session:
          curl -b 'ov_session=$SESSION' $LIVE/streams/agent/$STREAM/worker
(Everything stops when the demo ends: set DEMO_PAUSE_SECONDS=300 to keep it up
for a while, Enter stops it earlier.)
MSG
if [ "${DEMO_PAUSE_SECONDS:-0}" -gt 0 ]; then
	echo "keeping Live and the worker up for $DEMO_PAUSE_SECONDS s; press Enter to stop"
	read -r -t "$DEMO_PAUSE_SECONDS" _ || true
fi

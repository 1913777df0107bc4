#!/usr/bin/env bash
# The whole system on one machine, loopback only (what `make demo` runs after
# `make build`): Live (ovlive on SQLite in a temp dir) with a person, an agent
# stream and a first-party service token; a sandbox worker (codes-sandbox
# serve) that proves its isolation and checks in with that Live; one command
# run in a sandbox through the worker's API; one in a sandbox of a tiny image
# (busybox) that the demo builds (umoci) and serves from a registry of its own
# on loopback (Debian's docker-registry, pushed with skopeo); a web app in a
# sandbox opened through the API and a preview URL; the owner's view; a clean
# stop.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
REGISTRY_PID=
WAIT=${DEMO_WAIT_SECONDS:-120}

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
# DONE is set once every step succeeded; STTY holds the terminal's settings
# while the demo waits for Ctrl-C with them changed.
DONE= STTY=
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
	[ -z "$STTY" ] || stty "$STTY" 2>/dev/null
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
	if [ -n "$REGISTRY_PID" ] && kill -0 "$REGISTRY_PID" 2>/dev/null; then
		kill -TERM "$REGISTRY_PID"
		for _ in $(seq 50); do kill -0 "$REGISTRY_PID" 2>/dev/null || break; sleep 0.1; done
		kill -0 "$REGISTRY_PID" 2>/dev/null && kill -KILL "$REGISTRY_PID"
		wait "$REGISTRY_PID" 2>/dev/null && note "registry stopped"
	fi
	if [ -n "$LIVE_PID" ] && kill -0 "$LIVE_PID" 2>/dev/null; then
		kill -TERM "$LIVE_PID"
		for _ in $(seq 150); do kill -0 "$LIVE_PID" 2>/dev/null || break; sleep 0.1; done
		kill -0 "$LIVE_PID" 2>/dev/null && kill -KILL "$LIVE_PID"
		wait "$LIVE_PID" 2>/dev/null && note "Live stopped"
	fi
	if [ $code -eq 130 ] && [ -z "$OUT_GONE" ]; then
		note "demo interrupted (Ctrl-C) before its end"
	elif [ $code -ne 0 ] && [ -z "$OUT_GONE" ]; then
		note "demo failed (exit $code); last worker log lines:"
		tail -n 5 "$TMP/worker.log" 2>/dev/null
	fi
	rm -rf "$TMP"
	exit $code
}
trap cleanup EXIT
trap 'exit 129' HUP
# Ctrl-C once every step succeeded is how the demo is meant to end.
trap 'if [ -n "$DONE" ]; then note "" "Ctrl-C: the demo had run to its end"; exit 0; fi; exit 130' INT
trap 'exit 141' PIPE
trap 'exit 143' TERM

DB="sqlite:$TMP/ovlive.db"
say "starting Live (ovlive) on SQLite, on a free loopback port"
# Both servers write to their logs only: neither holds the demo's output.
# Each runs in a session of its own, so that a Ctrl-C at the terminal
# reaches only this script, which stops them (cleanup).
setsid "$BIN/ovlive" serve --listen 127.0.0.1:0 --addr-file "$TMP/live.addr" --db "$DB" >"$TMP/live.log" 2>&1 &
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

# image_registry: a tiny image (busybox-static and a few of its applets,
# linux, this machine's architecture) built with umoci and pushed with skopeo
# to Debian's docker-registry on a free loopback port; it sets REGISTRY to
# the registry's host:port, or leaves it empty when a tool is missing.
REGISTRY=
image_registry() {
	local t
	for t in docker-registry umoci skopeo busybox; do command -v "$t" >/dev/null || return 0; done
	local port
	port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	mkdir -p "$TMP/registry"
	printf 'version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: 127.0.0.1:%s\n' \
		"$TMP/registry" "$port" >"$TMP/registry.yml"
	setsid docker-registry serve "$TMP/registry.yml" >"$TMP/registry.log" 2>&1 &
	REGISTRY_PID=$!
	{
		umoci init --layout "$TMP/oci" && umoci new --image "$TMP/oci:demo" &&
			umoci unpack --image "$TMP/oci:demo" "$TMP/bundle"
	} >>"$TMP/registry.log" 2>&1 || return 1
	mkdir -p "$TMP/bundle/rootfs/bin" "$TMP/bundle/rootfs/etc" "$TMP/bundle/rootfs/tmp"
	cp "$(command -v busybox)" "$TMP/bundle/rootfs/bin/busybox"
	for t in sh echo id cat uname ls grep; do ln -s busybox "$TMP/bundle/rootfs/bin/$t"; done
	echo 'root:x:0:0:root:/root:/bin/sh' >"$TMP/bundle/rootfs/etc/passwd"
	{
		umoci repack --image "$TMP/oci:demo" "$TMP/bundle" &&
			umoci config --image "$TMP/oci:demo" --config.env PATH=/bin --os linux --architecture "$(dpkg --print-architecture)"
	} >>"$TMP/registry.log" 2>&1 || return 1
	wait_for "$WAIT" "the registry to listen" curl -fsS -o /dev/null "http://127.0.0.1:$port/v2/"
	skopeo copy --quiet --dest-tls-verify=false "oci:$TMP/oci:demo" "docker://127.0.0.1:$port/demo/busybox:1" >>"$TMP/registry.log" 2>&1 || return 1
	REGISTRY=127.0.0.1:$port
}
# The image and its registry are made before the worker starts (which is
# told to allow that registry), without a word: the lines up to the worker's
# address are what scripts/demo-cleanup-test.sh cuts at.
image_registry || die "could not build or serve the demo's image (see $TMP/registry.log)"
IMAGE_FLAGS=()
[ -z "$REGISTRY" ] || IMAGE_FLAGS=(--image-registry-insecure "$REGISTRY/demo")

say "starting the sandbox worker (codes-sandbox serve, capacity 2), checking in with Live"
# --overcommit: the demo starts on a small machine too, where two sandboxes'
# worst case (tasks × descriptors, memory) passes the host's tables: the
# worker then logs the sums instead of refusing to start.
(umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$TMP/api.token")
API_TOKEN=$(cat "$TMP/api.token")
setsid "$BIN/codes-sandbox" serve --listen 127.0.0.1:0 --addr-file "$TMP/worker.addr" \
	--api-token-file "$TMP/api.token" --capacity 2 --overcommit --preview-listen 127.0.0.1:0 "${IMAGE_FLAGS[@]}" \
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

if [ -z "$REGISTRY" ]; then
	echo "(docker-registry, umoci, skopeo or busybox-static is missing: make deps installs them; no image step)"
else
	say "a sandbox of an image (POST /v1/sandboxes {\"image\": \"$REGISTRY/demo/busybox:1\"})"
	echo "a tiny image (busybox), built with umoci and served by a registry of the demo's own, $REGISTRY (the worker allows it: --image-registry-insecure)"
	BOX=$(api -X POST "$WORKER/v1/sandboxes" -d "{\"image\":\"$REGISTRY/demo/busybox:1\"}" | field id)
	[ -n "$BOX" ] || die "could not create an image sandbox (see $TMP/worker.log)"
	api "$WORKER/v1/sandboxes/$BOX" | grep -o '"image_digest":"[^"]*"' | sed 's/^/  runs on /'
	echo '$ sh -c '\''echo hello from an image; id; ls /bin | head -3; echo mine > /etc/motd && cat /etc/motd'\'
	api -X POST "$WORKER/v1/sandboxes/$BOX/exec" \
		-d '{"argv":["sh","-c","echo hello from an image; id; ls /bin | head -3; echo mine > /etc/motd && cat /etc/motd"]}' |
		while IFS= read -r ev; do echo "  $ev"; done
	api -X DELETE "$WORKER/v1/sandboxes/$BOX" -o /dev/null -w 'deleted (wiped; the image stays, unchanged): HTTP %{http_code}\n'
	api "$WORKER/v1/images" | pretty | sed 's/^/  /'
fi

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
echo "Playwright, in one line (Node; the token is read from its file, never put on a command line):"
echo "  const browser = await chromium.connectOverCDP(\"${WORKER/http/ws}/v1/sandboxes/SANDBOX_ID/browser\", {headers: {Authorization: \"Bearer \" + fs.readFileSync(\"$TMP/api.token\", \"utf8\").trim()}});"

say "agents: the worker's MCP server (Streamable HTTP at /v1/mcp, the same token)"
api -m "$WAIT" -X POST "$WORKER/v1/mcp" -H 'Accept: application/json, text/event-stream' \
	-d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"demo","version":"1"}}}' |
	sed -n 's/^data: //p' | head -c 300
echo
echo "An MCP client, in one line (a local agent host's server entry, over stdio):"
echo "  {\"mcpServers\": {\"codes-sandbox\": {\"command\": \"$(realpath "$BIN")/codes-sandbox\", \"args\": [\"mcp\", \"--worker\", \"$WORKER\", \"--api-token-file\", \"$TMP/api.token\"]}}}"
echo "or over HTTP: $WORKER/v1/mcp with the header Authorization: Bearer <the token in $TMP/api.token>"

say "a web app in a sandbox, opened through the worker: by its API and by a preview URL"
BOX=$(api -X POST "$WORKER/v1/sandboxes" -d '{"time_box_minutes":10}' | field id)
[ -n "$BOX" ] || die "could not create a sandbox for the app"
curl -fsS -H "Authorization: Bearer $API_TOKEN" -X PUT --data-binary @scripts/ports/app.py \
	"$WORKER/v1/sandboxes/$BOX/files/app.py" -o /dev/null
api -X POST "$WORKER/v1/sandboxes/$BOX/exec" \
	-d '{"argv":["python3","app.py","8000","hello from a web app in sandbox '"$BOX"'"],"background":true}' -o /dev/null
echo "sandbox $BOX runs python3 app.py on its own 127.0.0.1:8000 (no address outside reaches it)"
PORT_URL="$WORKER/v1/sandboxes/$BOX/ports/8000"
wait_for "$WAIT" "the app to answer" curl -fsS -H "Authorization: Bearer $API_TOKEN" "$PORT_URL/small"
echo "\$ curl -H 'Authorization: Bearer …' $PORT_URL/"
curl -fsS -H "Authorization: Bearer $API_TOKEN" "$PORT_URL/" | grep -o '<p id="text">[^<]*</p>' | sed 's/^/  /'
PREVIEW=$(api -X POST "$PORT_URL/preview" -d '{"ttl_seconds":600}' | field url)
[ -n "$PREVIEW" ] || die "could not make a preview URL"
# The preview's host name (PORT-ID.localhost) reaches loopback in a browser
# without any resolver; curl is told where it is instead of looking it up.
PREVIEW_HOSTPORT=$(printf '%s' "$PREVIEW" | sed -E 's|^https?://([^/]+)/.*|\1|')
echo "a preview URL for a person's browser (its own origin; the token becomes a cookie on the first visit):"
echo "  $PREVIEW"
echo "\$ curl -L (following its redirect, with a cookie jar) that URL:"
curl -fsS -L -c "$TMP/preview.cookies" -b "$TMP/preview.cookies" --connect-to "$PREVIEW_HOSTPORT:127.0.0.1:${PREVIEW_HOSTPORT##*:}" \
	"$PREVIEW" | grep -o '<p id="text">[^<]*</p>' | sed 's/^/  /'
echo "(open it in Chromium on this machine: the page's script opens a WebSocket to the app, which echoes it)"

say "the owner's view (GET /api/streams/agent/$STREAM/plays/worker with the owner's person token)"
view | pretty

say "the owner's page"
cat <<MSG
Sign in:  $SIGN_IN
          (a one-time link, for an hour: open it in a browser on this machine and
          press "Sign in as …"; it signs the owner in and lands on their streams,
          $LIVE/streams)
The page: $LIVE/streams/agent/$STREAM/worker
Or fetch it with the owner's session:
          curl -b 'ov_session=$SESSION' $LIVE/streams/agent/$STREAM/worker
The app's preview: $PREVIEW
MSG
DONE=1
if [ -t 1 ]; then
	say "Live and the worker stay up so that you can open the page: press Ctrl-C to stop them"
	if [ -t 0 ] && STTY=$(stty -g 2>/dev/null); then
		# Ctrl-C is read as a key, so that it stops this script alone (make,
		# which runs it, sees it end well) instead of sending SIGINT to them all.
		stty -isig -icanon -echo min 1 time 0
		while key=$(dd bs=1 count=1 2>/dev/null | od -An -tx1) && [ -n "$key" ] && [ "$key" != " 03" ]; do :; done
		stty "$STTY" 2>/dev/null
		STTY=
		if [ -n "$key" ]; then note "" "Ctrl-C: the demo had run to its end"; else note "" "the terminal closed"; fi
	else
		while :; do sleep 1; done # until Ctrl-C (the INT trap) or TERM
	fi
elif [ "${DEMO_PAUSE_SECONDS:-0}" -gt 0 ]; then
	echo "keeping Live and the worker up for $DEMO_PAUSE_SECONDS s; press Enter to stop"
	read -r -t "$DEMO_PAUSE_SECONDS" _ || true
else
	echo "(Everything stops now that the demo has ended: run it on a terminal to keep it up until Ctrl-C,"
	echo "or set DEMO_PAUSE_SECONDS=300 to keep it up for a while.)"
fi

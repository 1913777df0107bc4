#!/usr/bin/env bash
# bench-live.sh: the load benchmark of ovlive. Durable check-ins from 100
# streams over 64 connections against `ovlive serve` on SQLite and (when a
# PostgreSQL DSN is given) on PostgreSQL, side by side with a bare net/http
# handler that only reads the body and answers 200, all in one run, on
# loopback only, each for a bounded time.
#
#   scripts/bench-live.sh                      # SQLite + bare
#   BENCH_POSTGRES=postgres://root@127.0.0.1:5432/test?sslmode=disable scripts/bench-live.sh
#
# Env: DURATION (default 10s), CONNS (64), STREAMS (100), BENCH_POSTGRES or
# AGENTSANDBOX_TEST_POSTGRES (PostgreSQL DSN; a fresh schema is created and
# dropped). Prints one JSON line per run, then a table.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

DURATION=${DURATION:-10s}
CONNS=${CONNS:-64}
STREAMS=${STREAMS:-100}
PG=${BENCH_POSTGRES:-${AGENTSANDBOX_TEST_POSTGRES:-}}

work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	if [[ -n "${schema:-}" ]]; then
		psql -q "$PG" -c "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 ||
			echo "could not drop schema $schema (psql missing?): drop it by hand" >&2
	fi
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/ovlive" ./cmd/ovlive
go build -o "$work/loadgen" ./scripts/loadgen
body=cmd/ovlive/testdata/worker-check-in.json

# wait_addr FILE: waits (bounded) for a server to write its address.
wait_addr() {
	for _ in $(seq 300); do
		[[ -s "$1" ]] && { cat "$1"; return; }
		sleep 0.1
	done
	echo "server did not start; see $work" >&2
	exit 1
}

# field NAME: the string field NAME of the one JSON object on stdin.
field() { sed -nE 's/.*"'"$1"'":"([^"]*)".*/\1/p'; }

# setup DB [SCHEMA...]: one owner, STREAMS streams bench-000..., a first-party
# service with a token. Prints "PERSON TOKEN".
setup() {
	local a=("$work/ovlive" admin --db "$@")
	local person svc
	person=$("${a[@]}" person add --name bench | field id)
	for i in $(seq 0 $((STREAMS - 1))); do
		"${a[@]}" stream add --owner "$person" --id "$(printf 'bench-%03d' "$i")" >/dev/null
	done
	svc=$("${a[@]}" service add --name codes-sandbox --first-party --capability live.agent_sandbox.register | field id)
	echo "$person $("${a[@]}" token issue --service "$svc" | field token)"
}

# bench NAME URL PERSON TOKEN PID: one measured run, its JSON line to results.
bench() {
	"$work/loadgen" run --name "$1" --url "$2" --subject "$3" --token "$4" --server-pid "$5" \
		--streams "$STREAMS" --conns "$CONNS" --duration "$DURATION" --body "$body" | tee -a "$work/results"
}

# serve_ovlive NAME DB [SCHEMA...]: set up, start, measure, stop.
serve_ovlive() {
	local name=$1; shift
	read -r person token < <(setup "$@")
	"$work/ovlive" serve --listen 127.0.0.1:0 --addr-file "$work/$name.addr" --db "$@" 2>"$work/$name.log" &
	local pid=$!
	pids+=("$pid")
	bench "$name" "http://$(wait_addr "$work/$name.addr")" "$person" "$token" "$pid"
	kill -TERM "$pid"
	wait "$pid"
}

"$work/loadgen" bare --listen 127.0.0.1:0 --addr-file "$work/bare.addr" &
pids+=($!)
bench bare "http://$(wait_addr "$work/bare.addr")" nobody none "$!"

serve_ovlive sqlite "sqlite:$work/live.db"
if [[ -n "$PG" ]]; then
	schema="ovlive_bench_$$_$(date +%s)"
	serve_ovlive postgres "$PG" --db-schema "$schema"
else
	echo "PostgreSQL skipped: set BENCH_POSTGRES or AGENTSANDBOX_TEST_POSTGRES" >&2
fi

echo
echo "check-ins over $CONNS connections from $STREAMS streams, $DURATION each, $(nproc) cores"
"$work/loadgen" report <"$work/results"

#!/usr/bin/env bash
# bench-live.sh: the load benchmark of ovlive. Durable check-ins (the seed's
# full worker check-in as the body) from STREAMS streams over CONNS
# connections, sent by wrk, against `ovlive serve` on SQLite and (when a
# PostgreSQL DSN is given) on PostgreSQL, and against a bare net/http handler
# that only reads the body and answers 200. The sides run interleaved (bare,
# SQLite, PostgreSQL, bare, SQLite, ... ) for ROUNDS rounds on servers that
# stay up, so that a noisy moment hits every side; it prints each run and
# then the medians over the rounds and the ratio to the bare handler, with
# the date and the machine. Loopback only; every wait is bounded.
#
#   scripts/bench-live.sh                      # SQLite + bare
#   BENCH_POSTGRES=postgres://root@127.0.0.1:5432/test?sslmode=disable scripts/bench-live.sh
#
# Env: ROUNDS (5), DURATION (10s per run), WARMUP (3s per side, not counted),
# CONNS (64), STREAMS (100), THREADS (wrk threads, 2), BENCH_POSTGRES or
# AGENTSANDBOX_TEST_POSTGRES (a fresh schema is created and dropped),
# OVLIVE_BIN (measure this ovlive binary instead of building this tree),
# OVLIVE_BEFORE_BIN (also measure this binary, e.g. a build of an older
# commit, as the sides sqlite-before and postgres-before, interleaved with
# the others), KEEP_RESULTS (copy the runs' JSON lines to this file).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-3s}
CONNS=${CONNS:-64}
STREAMS=${STREAMS:-100}
THREADS=${THREADS:-2}
PG=${BENCH_POSTGRES:-${AGENTSANDBOX_TEST_POSTGRES:-}}

command -v wrk >/dev/null || { echo "bench-live: wrk is needed (apt-get install -y wrk)" >&2; exit 1; }

work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	for s in ${schema:-} ${schema_before:-}; do
		psql -q "$PG" -c "DROP SCHEMA IF EXISTS $s CASCADE" >/dev/null 2>&1 ||
			echo "could not drop schema $s (psql missing?): drop it by hand" >&2
	done
	rm -rf "$work"
}
trap cleanup EXIT

if [[ -n "${OVLIVE_BIN:-}" ]]; then
	cp "$OVLIVE_BIN" "$work/ovlive"
else
	scripts/gobuild.sh "$work" ./cmd/ovlive
fi
if [[ -n "${OVLIVE_BEFORE_BIN:-}" ]]; then
	cp "$OVLIVE_BEFORE_BIN" "$work/ovlive-before"
fi
go build -o "$work/loadgen" ./scripts/loadgen
body=$PWD/cmd/ovlive/testdata/worker-check-in.json
lua=$PWD/scripts/loadgen/checkin.lua

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

# setup BIN DB [SCHEMA...]: one owner, STREAMS streams bench-000..., a
# first-party service with a token. Prints "PERSON TOKEN".
setup() {
	local a=("$1" admin --db "${@:2}")
	local person svc
	person=$("${a[@]}" person add --name bench | field id)
	for i in $(seq 0 $((STREAMS - 1))); do
		"${a[@]}" stream add --owner "$person" --id "$(printf 'bench-%03d' "$i")" >/dev/null
	done
	svc=$("${a[@]}" service add --name codes-sandbox --first-party --capability live.agent_sandbox.register | field id)
	echo "$person $("${a[@]}" token issue --service "$svc" | field token)"
}

# The sides: name, URL, subject, token and server pid of each.
names=() urls=() subjects=() tokens=() spids=()
add_side() {
	"$work/loadgen" loopback "$2"
	names+=("$1") urls+=("$2") subjects+=("$3") tokens+=("$4") spids+=("$5")
}

# start_ovlive NAME BIN DB [SCHEMA...]: set up a database and serve it with BIN.
start_ovlive() {
	local name=$1 bin=$2; shift 2
	local person token
	read -r person token < <(setup "$bin" "$@")
	"$bin" serve --listen 127.0.0.1:0 --addr-file "$work/$name.addr" --db "$@" 2>"$work/$name.log" &
	pids+=("$!")
	add_side "$name" "http://$(wait_addr "$work/$name.addr")" "$person" "$token" "$!"
}

"$work/loadgen" bare --listen 127.0.0.1:0 --addr-file "$work/bare.addr" &
pids+=("$!")
add_side bare "http://$(wait_addr "$work/bare.addr")" nobody none "$!"
start_ovlive sqlite "$work/ovlive" "sqlite:$work/live.db"
[[ -n "${OVLIVE_BEFORE_BIN:-}" ]] && start_ovlive sqlite-before "$work/ovlive-before" "sqlite:$work/before.db"
if [[ -n "$PG" ]]; then
	schema="ovlive_bench_$$_$(date +%s)"
	start_ovlive postgres "$work/ovlive" "$PG" --db-schema "$schema"
	if [[ -n "${OVLIVE_BEFORE_BIN:-}" ]]; then
		schema_before="${schema}_before"
		start_ovlive postgres-before "$work/ovlive-before" "$PG" --db-schema "$schema_before"
	fi
else
	echo "PostgreSQL skipped: set BENCH_POSTGRES or AGENTSANDBOX_TEST_POSTGRES" >&2
fi

# cpu PID: the process's user+system CPU time so far, in clock ticks.
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
ticks=$(getconf CLK_TCK)

# measure I ROUND DURATION: one wrk run of side I; prints its JSON line with
# the round and the server's CPU time per request added.
measure() {
	local i=$1 c0 c1 line
	c0=$(cpu "${spids[$i]}")
	line=$(BENCH_NAME=${names[$i]} BENCH_TOKEN=${tokens[$i]} BENCH_SUBJECT=${subjects[$i]} BENCH_BODY=$body \
		BENCH_STREAMS=$STREAMS wrk -t"$THREADS" -c"$CONNS" -d"$3" --timeout 30s -s "$lua" "${urls[$i]}" | tail -n 1)
	c1=$(cpu "${spids[$i]}")
	local reqs
	reqs=$(sed -nE 's/.*"requests":([0-9]+).*/\1/p' <<<"$line")
	local us
	us=$(awk -v d=$((c1 - c0)) -v t="$ticks" -v n="$reqs" 'BEGIN { printf "%.1f", (n > 0 ? d * 1e6 / t / n : 0) }')
	echo "${line%\}},\"round\":$2,\"server_cpu_us\":$us}"
}

for i in "${!names[@]}"; do measure "$i" 0 "$WARMUP" >/dev/null; done
for round in $(seq "$ROUNDS"); do
	for i in "${!names[@]}"; do measure "$i" "$round" "$DURATION" | tee -a "$work/results"; done
done
[[ -n "${KEEP_RESULTS:-}" ]] && cp "$work/results" "$KEEP_RESULTS"

echo
echo "ovlive check-ins: $CONNS connections, $STREAMS streams, wrk -t$THREADS, $ROUNDS interleaved rounds of $DURATION"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); machine: $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(uname -sr); $(go version | cut -d' ' -f3)"
echo "ovlive: ${OVLIVE_BIN:-this tree at $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo '+changes')}${OVLIVE_BEFORE_BIN:+; before: $OVLIVE_BEFORE_BIN}"
"$work/loadgen" summary <"$work/results"

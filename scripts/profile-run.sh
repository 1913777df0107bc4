#!/usr/bin/env bash
# profile-run.sh: where the CPU time of a one-off `codes-sandbox run --
# /bin/true` goes, process by process, next to raw bubblewrap with the same
# namespaces (the command BenchmarkOneOff times). It builds the worker and
# its init as they ship but with their symbols (scripts/gobuild.sh,
# GOBUILD_SYMBOLS=1), runs N of each, alternating, under one system-wide
# `perf record`, and prints the CPU milliseconds per run of each process
# (the kernel's work for a process counted in it, kernel threads on their
# own line) and each one's heaviest functions. The raw bubblewrap runs as a
# copy named bwrap-raw, so its samples stay apart from the worker's.
# Needs root, bubblewrap, cgroups and perf (apt-get install -y linux-perf).
#
#   scripts/profile-run.sh [N]     (default 60)
#
# Env: PROFILE_HZ (sampling frequency, 8000), PROFILE_TOP (functions shown
# per process, 8), KEEP_PERF_DATA (copy perf.data to this file).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
n=${1:-60}
hz=${PROFILE_HZ:-8000}
top=${PROFILE_TOP:-8}
command -v perf >/dev/null || { echo "profile-run: perf is needed (apt-get install -y linux-perf)" >&2; exit 1; }
bwrap=$(command -v bwrap) || { echo "profile-run: bubblewrap is needed (apt-get install -y bubblewrap)" >&2; exit 1; }
[[ $(id -u) == 0 ]] || { echo "profile-run: run as root (codes-sandbox run needs it)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
GOBUILD_SYMBOLS=1 scripts/gobuild.sh "$tmp" ./cmd/codes-sandbox ./cmd/codes-sandbox-worker ./cmd/codes-sandbox-init
cp "$bwrap" "$tmp/bwrap-raw"
run=("$tmp/codes-sandbox" run -- /bin/true)
raw=("$tmp/bwrap-raw" --unshare-all --die-with-parent --ro-bind /usr /usr
	--symlink usr/lib /lib --symlink usr/lib64 /lib64 --symlink usr/bin /bin
	--proc /proc --dev /dev /bin/true)
printf 'for i in $(seq %d); do %s; %s; done\n' "$n" "$(printf '%q ' "${run[@]}")" "$(printf '%q ' "${raw[@]}")" >"$tmp/loop.sh"
# The worker finds its init next to itself; warm the page cache and the
# runtime's kept /etc copy first, so every profiled run is a later one.
"${run[@]}"
perf record -q -F "$hz" -a -g -o "$tmp/perf.data" -- sh "$tmp/loop.sh" >/dev/null 2>"$tmp/record.log" ||
	{ cat "$tmp/record.log" >&2; exit 1; }
[[ -n "${KEEP_PERF_DATA:-}" ]] && cp "$tmp/perf.data" "$KEEP_PERF_DATA"

echo "profile-run: $n runs each, alternating, perf at $hz Hz; $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(uname -r), $("$bwrap" --version)"
echo "the tree at $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo '+changes')"
echo
echo "CPU per run, by process (ms; under perf, which slows every side alike):"
perf script -i "$tmp/perf.data" -F comm 2>/dev/null | awk -v n="$n" -v hz="$hz" '
	{ gsub(/^[ \t]+|[ \t]+$/, ""); c[$0]++ }
	END {
		for (k in c) {
			if (k == "swapper") group["idle"] += c[k]
			else if (k ~ /^(kworker|ksoftirqd|rcu|migration|kdamond|kcompactd|cpuhp|watchdog)/) group["kernel threads"] += c[k]
			else if (k ~ /^(codes-sandbox|bwrap|bwrap-raw|\.init|true)$/) printf "1\t%s\t%.2f\t\n", k, c[k] / n / hz * 1000
			else group["other"] += c[k]
		}
		printf "2\t%s\t%.2f\t(network namespace and cgroup teardown, softirqs, RCU)\n", "kernel threads", group["kernel threads"] / n / hz * 1000
		printf "2\t%s\t%.2f\t(the loop'"'"'s shell, perf, other programs)\n", "other", group["other"] / n / hz * 1000
		printf "3\t%s\t%.2f\t\n", "idle", group["idle"] / n / hz * 1000
	}' | sort -t$'\t' -k1,1n -k3,3nr | awk -F'\t' '{ printf "  %-16s %7.2f  %s\n", $2, $3, $4 }'
echo "  (true is both sides' /bin/true; bwrap-raw is the bare bubblewrap, bwrap the worker's)"
# Each function's share of a process's samples, counting a sample once for
# every function on its stack (so a caller includes its callees); the
# frames every sample of a process shares (its entry, the dispatcher) say
# nothing and are left out.
perf script -i "$tmp/perf.data" 2>/dev/null | awk '
	function flush(   f) {
		if (comm != "") { total[comm]++; for (f in seen) inc[comm SUBSEP f]++ }
		delete seen; comm = ""
	}
	/^[^ \t]/ { flush(); comm = $1; next }
	/^[ \t]+[0-9a-f]+ / { f = $2; sub(/\+0x[0-9a-f]+$/, "", f); seen[f] = 1; next }
	/^[ \t]*$/ { flush() }
	END {
		flush()
		for (k in inc) {
			split(k, p, SUBSEP)
			if (p[1] !~ /^(codes-sandbox|bwrap|bwrap-raw|\.init)$/) continue
			if (p[2] ~ /^(\[unknown\]|runtime\.(goexit|main|rt0_go|mstart|mstart0|mstart1|systemstack)|main\.(main|dispatch|runCmd)|.*cli\.Program\.Run|entry_SYSCALL.*|do_syscall_64|ret_from_fork.*|_start|__libc_start.*|main)(\.abi0)?$/) continue
			printf "%s\t%.1f\t%s\n", p[1], 100 * inc[k] / total[p[1]], p[2]
		}
	}' | sort -t$'\t' -k1,1 -k2,2nr | awk -F'\t' -v top="$top" '
	$1 != last { print ""; print $1 ": the functions under which its samples fell (% of them)"; last = $1; n = 0 }
	n++ < top { printf "  %5.1f%%  %s\n", $2, $3 }'
if command -v strace >/dev/null; then
	mountinfo() { strace -f -e trace=openat -o "$tmp/strace" "$@" >/dev/null && grep -c mountinfo "$tmp/strace"; }
	echo
	echo "openings of a mount table (/proc/.../mountinfo) in one run, all processes: run $(mountinfo "${run[@]}"), raw bubblewrap $(mountinfo "${raw[@]}")"
fi

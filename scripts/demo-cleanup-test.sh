#!/usr/bin/env bash
# Cuts `make demo` short the way a reader does, `make demo 2>&1 | head -12`
# (its cleanup used to die of SIGPIPE there and leave Live, the root worker
# and a temp dir of tokens running), and checks that the demo left nothing:
# no process of it (ovlive, codes-sandbox, a sandbox uid), no listener on its
# ports, no temp dir, no mount, cgroup, runtime directory or /etc copy of its
# worker. Needs root, as the demo does. Exit 0 only when nothing is left.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

die() { echo "demo-cleanup-test: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root (the demo needs root): sudo $0"

# The demo makes its temp dir under a TMPDIR of this test's own, so that its
# files and its processes (their command lines name that dir) are told apart
# from anything else on the machine.
work=$(mktemp -d /tmp/demo-cleanup-test.XXXXXX)
mkdir -m 0700 "$work/tmp"
state=/run/codes-sandbox
uid_first=200000 uid_end=$((200000 + 65536)) # sandbox.DefaultUIDBase and its range

# demo_pids: processes whose command line names the demo's temp dir, or that
# run this checkout's bin/ovlive or bin/codes-sandbox.
demo_pids() {
	local p exe
	for p in /proc/[0-9]*; do
		exe=$(readlink "$p/exe" 2>/dev/null) || continue
		case $exe in "$PWD/bin/ovlive" | "$PWD/bin/codes-sandbox") echo "${p#/proc/}"; continue ;; esac
		tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF "$work/tmp/" && echo "${p#/proc/}"
	done
	return 0
}
finish() {
	local code=$? pids
	# Whatever this run left must not outlive it: end it, by its pid.
	pids=$(demo_pids)
	[ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
	rm -rf "$work"
	exit $code
}
trap finish EXIT

# held FILE: another process holds the lock FILE (flock -n would take a free one).
held() { [ -e "$1" ] && ! flock -n "$1" true 2>/dev/null; }
# runtimes: the runtime names (rt-*) and /etc copies (etc-*) in the state dir,
# the runtime locks and the runtime cgroups, one a line.
runtimes() {
	{
		ls -1 "$state" 2>/dev/null | grep -E '^(rt|etc)-' || true
		ls -1 "$state/runtimes" 2>/dev/null | sed 's/\.lock$//' || true
		find /sys/fs/cgroup -mindepth 2 -maxdepth 6 -type d -name 'rt-*' -printf '%f\n' 2>/dev/null || true
	} | sort -u
}

# Build first, so that the demo's first 12 lines are its own (and those of a
# fresh machine's package installs go to this log).
make --no-print-directory deps build >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; die "make deps build failed"; }
before=$(runtimes)

# head's exit ends the pipeline; make's status after the broken pipe is not
# the point, what it leaves is. A hung demo is ended by timeout (its group).
set +o pipefail
env -u MAKEFLAGS -u MAKELEVEL TMPDIR="$work/tmp" timeout -k 10 300 \
	make --no-print-directory demo 2>&1 | head -12 >"$work/head.out"
set -o pipefail
echo "the demo's first 12 lines:"
sed 's/^/  | /' "$work/head.out"
live_port=$(sed -n 's|^Live: http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$work/head.out")
worker_port=$(sed -n 's|^worker API: http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$work/head.out")
[ -n "$live_port" ] && [ -n "$worker_port" ] ||
	die "the first 12 lines do not show Live and the worker started, so cutting there tests nothing: make the demo print them earlier or change the line count here"

left=()
pids=$(demo_pids)
[ -z "$pids" ] || left+=("processes: $(ps -o pid=,args= -p "$(echo $pids | tr ' ' ,)" | tr '\n' ';')")
# A sandbox process whose uid no runtime holds has outlived its worker.
while read -r uid pid args; do
	[ "$uid" -ge $uid_first ] && [ "$uid" -lt $uid_end ] || continue
	held "$state/uids/$uid.lock" || left+=("sandbox process $pid (uid $uid): $args")
done < <(ps -eo uid=,pid=,args=)
for port in "$live_port" "$worker_port"; do
	[ -z "$(ss -Hltn "sport = :$port")" ] || left+=("a listener on 127.0.0.1:$port")
done
[ -z "$(ls -A "$work/tmp")" ] || left+=("temp files: $(ls -A "$work/tmp" | tr '\n' ' ')")
# What appeared during the demo and no live process holds is its leftover;
# a live one is another process's (tests may run beside this one). One /etc
# copy is not: the last runtime leaves the copy of the host's /etc for the
# next one (sandbox/etc.go), so a second is a leftover.
etc_kept=()
while read -r name; do
	case $name in
	rt-*) held "$state/runtimes/$name.lock" || left+=("runtime $name (directory, lock or cgroup)") ;;
	etc-*) held "$state/$name" || etc_kept+=("$state/$name") ;;
	esac
done < <(comm -13 <(echo "$before") <(runtimes))
[ ${#etc_kept[@]} -le 1 ] || left+=("/etc copies (one is kept for the next runtime): ${etc_kept[*]}")
mounts=$(awk -v w="$work/" -v s="$state/rt-" 'index($5, w) == 1 || index($5, s) == 1 { print $5 }' /proc/self/mountinfo |
	while read -r m; do
		name=${m#"$state/"}
		name=${name%%/*}
		case $m in "$state"/*) held "$state/runtimes/$name.lock" && continue ;; esac
		echo "$m"
	done)
[ -z "$mounts" ] || left+=("mounts: $(echo $mounts)")

if [ ${#left[@]} -gt 0 ]; then
	printf 'LEFT BEHIND: %s\n' "${left[@]}" >&2
	die "make demo cut short by head left the above (see the cleanup trap of scripts/demo.sh)"
fi
echo "ok: make demo cut short by head -12 left no process, sandbox process, listener (ports $live_port, $worker_port), temp file, runtime, /etc copy or mount"

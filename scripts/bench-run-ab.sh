#!/usr/bin/env bash
# Compares `codes-sandbox run -- /bin/true` of two builds, interleaved
# (old, new, old, new…), N pairs, and prints each side's median and p90 wall
# time and the ratio of the medians. Each side runs in a mount namespace of
# its own with its own state dir bound at /run/codes-sandbox, so that
# neither removes the other's /etc copy or sees its runtimes; the unshare,
# mount and shell are the same on both sides. Each state dir is a tmpfs, as
# /run is on a systemd host (the worker's unit makes /run/codes-sandbox), so
# that what a run writes there costs what it costs in production; set
# STATE_TMPFS=0 to keep them on the disk of /var/tmp instead. Needs root,
# bubblewrap and cgroups. Build a side with: scripts/gobuild.sh DIR ./cmd/codes-sandbox ./cmd/codes-sandbox-init
# (and ./cmd/codes-sandbox-worker, for a tree that has it; `run` does not use it)
# Usage: [STATE_TMPFS=0] scripts/bench-run-ab.sh OLD_DIR NEW_DIR [N]   (default 30)
set -euo pipefail
old=${1:?usage: scripts/bench-run-ab.sh OLD_DIR NEW_DIR [N]}
new=${2:?usage: scripts/bench-run-ab.sh OLD_DIR NEW_DIR [N]}
n=${3:-30}
tmp=$(mktemp -d /var/tmp/bench-run-ab.XXXXXX)
trap 'umount "$tmp/old" "$tmp/new" 2>/dev/null || true; rm -rf "$tmp"' EXIT
mkdir -p "$tmp/old" "$tmp/new" /run/codes-sandbox
state="disk"
if [[ "${STATE_TMPFS:-1}" == 1 ]]; then
	mount -t tmpfs -o mode=755 tmpfs "$tmp/old"
	mount -t tmpfs -o mode=755 tmpfs "$tmp/new"
	state="tmpfs"
fi
chmod 755 "$tmp" "$tmp/old" "$tmp/new"
echo "bench-run-ab: $n pairs, state dirs on $state, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$old" "$new" "$n" "$tmp" <<'EOF'
import statistics, subprocess, sys, time
old, new, n, tmp = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
def cmd(side, bindir):
    return ["unshare", "-m", "sh", "-c",
            f"mount --make-rprivate / && mount --bind {tmp}/{side} /run/codes-sandbox && "
            f"exec {bindir}/codes-sandbox run -- /bin/true"]
sides = {"old": cmd("old", old), "new": cmd("new", new)}
times = {k: [] for k in sides}
for k, c in sides.items():  # warm: builds each side's /etc copy
    subprocess.run(c, check=True)
for _ in range(n):
    for k, c in sides.items():
        t = time.perf_counter()
        subprocess.run(c, check=True)
        times[k].append((time.perf_counter() - t) * 1000)
for k, v in times.items():
    q = statistics.quantiles(v, n=10)
    print(f"{k:4s} {sides[k][-1].split()[-4]}: p50 {statistics.median(v):6.1f} ms  p90 {q[8]:6.1f} ms")
print(f"new / old (p50): {statistics.median(times['new']) / statistics.median(times['old']):.2f}x")
EOF

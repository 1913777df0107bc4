"""scripts/bench-sdk.sh's driver: starts each runner (NAME=COMMAND after the
script), then, for ROUNDS rounds, asks each for one run of `true` in turn
(the order rotating every round, after WARMUP rounds not counted) and prints
each one's wall-time p50/p90 and CPU-time p50, and its p50s minus the first
runner's (the Go client). Every answer is awaited at most 60 s."""

import os
import select
import shlex
import subprocess
import sys

rounds, warmup = int(os.environ.get("ROUNDS", "200")), int(os.environ.get("WARMUP", "20"))
runners = [(name, shlex.split(cmd)) for name, cmd in (a.split("=", 1) for a in sys.argv[1:])]
procs = [subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1) for _, cmd in runners]
wall: list[list[int]] = [[] for _ in runners]
cpu: list[list[int]] = [[] for _ in runners]
try:
    for r in range(warmup + rounds):
        order = list(range(len(runners)))
        order = order[r % len(order):] + order[:r % len(order)]
        for i in order:
            p = procs[i]
            p.stdin.write("run\n")  # type: ignore[union-attr]
            p.stdin.flush()  # type: ignore[union-attr]
            if not select.select([p.stdout], [], [], 60)[0]:
                sys.exit(f"bench-sdk: {runners[i][0]} did not answer within 60 s")
            line = p.stdout.readline()  # type: ignore[union-attr]
            if not line:
                sys.exit(f"bench-sdk: {runners[i][0]} stopped")
            if r >= warmup:
                w, c = line.split()
                wall[i].append(int(w))
                cpu[i].append(int(c))
finally:
    for p in procs:
        p.stdin.close()  # type: ignore[union-attr]
    for p in procs:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()


def pct(v: list[int], q: float) -> float:
    s = sorted(v)
    return s[int((len(s) - 1) * q)] / 1e6


print(f"run of `true` in one sandbox, {rounds} interleaved rounds (after {warmup} warm-up), ms:")
print(f"{'client':<14} {'wall p50':>9} {'wall p90':>9} {'cpu p50':>8}   {'added wall p50':>14} {'added cpu p50':>14}")
for (name, _), w, c in zip(runners, wall, cpu):
    print(f"{name:<14} {pct(w, .5):9.3f} {pct(w, .9):9.3f} {pct(c, .5):8.3f}   "
          f"{pct(w, .5) - pct(wall[0], .5):+14.3f} {pct(c, .5) - pct(cpu[0], .5):+14.3f}")

"""scripts/bench-sdk.sh's Python side: for each line on stdin, run `true`
once in sandbox $SANDBOX through the SDK (sync, or async with ASYNC=1) and
print the call's wall time and the process's CPU time in nanoseconds."""

import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sdk" / "python" / "src"))
from agentsandbox import AsyncWorker, Worker  # noqa: E402

url, token, sid = os.environ["WORKER"], Path(os.environ["TOKEN_FILE"]).read_text().strip(), os.environ["SANDBOX"]


def sync_main() -> None:
    with Worker(url, token) as w:
        sb = w.sandbox(sid)
        for _ in sys.stdin:
            c, t = time.process_time_ns(), time.perf_counter_ns()
            r = sb.run(["true"])
            d, cpu = time.perf_counter_ns() - t, time.process_time_ns() - c
            assert r.exit_code == 0, r
            print(d, cpu, flush=True)


async def async_main() -> None:
    loop = asyncio.get_running_loop()
    async with AsyncWorker(url, token) as w:
        sb = w.sandbox(sid)
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:
                return
            c, t = time.process_time_ns(), time.perf_counter_ns()
            r = await sb.run(["true"])
            d, cpu = time.perf_counter_ns() - t, time.process_time_ns() - c
            assert r.exit_code == 0, r
            print(d, cpu, flush=True)


if os.environ.get("ASYNC") == "1":
    asyncio.run(async_main())
else:
    sync_main()

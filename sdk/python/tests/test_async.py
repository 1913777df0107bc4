"""The async client against a real worker: the same surface, awaited."""

from __future__ import annotations

import asyncio
import io
import tarfile
from typing import Any, Awaitable, Callable

import pytest

import agentsandbox as a


def run(worker_env: Any, body: Callable[[a.AsyncWorker], Awaitable[None]]) -> None:
    async def main() -> None:
        async with a.AsyncWorker(worker_env.url, worker_env.token) as w:
            await body(w)

    asyncio.run(main())


def test_async_sandbox(worker_env: Any) -> None:
    async def body(w: a.AsyncWorker) -> None:
        async with await w.create(limits={"memory_mb": 512}, time_box_minutes=6) as sb:
            assert sb.id in [s.id for s in await w.list()]
            chunks: list[str] = []
            r = await sb.run(["sh", "-c", "echo a; echo b >&2; exit 2"], on_stderr=chunks.append)
            assert (r.exit_code, r.stdout, r.stderr, chunks) == (2, "a\n", "b\n", ["b\n"])
            assert (await sb.run("cat", stdin=b"in")).stdout == "in"

            p = await sb.start(["sh", "-c", "read x; echo $x"])
            await p.write_stdin(b"fed\n", close=True)
            assert (await p.wait()).exit_code == 0
            stream = p.output()
            assert [ev.text async for ev in stream] == ["fed\n"] and stream.process is not None
            q = await sb.start(["sleep", "60"])
            await q.signal("KILL")
            assert (await q.wait()).exit_code == 137
            assert len(await sb.processes()) >= 2 and (await sb.process(q.pid).info()).state == "exited"

            async with await sb.terminal(["sh"]) as t:
                await t.write("echo $((40+2)); exit\n")
                seen = b""
                async for chunk in t:
                    seen += chunk
                assert b"42" in seen and t.process.pid > 0

            await sb.files.write("x/y.txt", "why")
            assert await sb.files.read_text("x/y.txt") == "why"
            assert [e.name for e in await sb.files.list("x")] == ["y.txt"]
            await sb.files.mkdir("z")
            await sb.files.remove("z")
            with pytest.raises(a.PathNotFoundError):
                await sb.files.read("z")
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w:gz") as tf:
                info = tarfile.TarInfo("t.txt")
                info.size = 2
                tf.addfile(info, io.BytesIO(b"ok"))
            await sb.archive.upload(buf.getvalue(), "arch")
            assert (await sb.run("cat arch/t.txt")).stdout == "ok"
            assert len(await sb.archive.download("arch")) > 0
            out = io.BytesIO()
            assert await sb.archive.download_to(out, "arch") == len(out.getvalue()) > 0

            assert (await sb.state()).state == "running"
            assert (await sb.usage()).memory_bytes > 0
            assert (await sb.extend(7)).limits.time_box_minutes == 7
            pv = await sb.preview(8000)
            assert pv.port == 8000 and pv.url.startswith(pv.origin + "/?sandbox_preview_token=")
            assert sb.port_url(8000).endswith(f"/ports/8000/") and "Authorization" in sb.port_headers()
        assert sb.wipe_report is not None and sb.wipe_report.verified
        with pytest.raises(a.SandboxNotFoundError):
            await sb.delete()
        assert (await w.status()).capacity >= 1

    run(worker_env, body)


def test_async_errors(worker_env: Any) -> None:
    async def body(w: a.AsyncWorker) -> None:
        with pytest.raises(a.InvalidRequestError):
            await w.create(limits={"memory_mb": 1})
        with pytest.raises(a.SandboxNotFoundError):
            await w.sandbox("gone").state()
        if not worker_env.browser:
            with pytest.raises(a.NoBrowserError):
                await w.create(browser=True)

    run(worker_env, body)

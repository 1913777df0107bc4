"""The attach WebSocket (a terminal), over the websockets library's asyncio
client; the sync Terminal drives it on a loop thread of its own."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
from typing import Any, Awaitable, Dict, Optional, TypeVar, Union

from ._errors import StreamEndedError, TransportError, error_from_wire
from ._models import AttachMessage, ProcessInfo, from_wire, to_wire

try:  # websockets >= 13: the new asyncio implementation
    from websockets.asyncio.client import connect as _connect

    _HEADERS = "additional_headers"
except ImportError:  # websockets 10-12
    from websockets.client import connect as _connect  # type: ignore[no-redef]

    _HEADERS = "extra_headers"

T = TypeVar("T")

#: The most one input message carries (the worker takes 1 MiB).
MAX_INPUT = 32 << 10
_STDOUT, _STDERR = 1, 2


async def open_ws(url: str, headers: Dict[str, str], max_size: Optional[int] = 2 << 20) -> Any:
    """A WebSocket to the worker with its token; TransportError when it cannot connect."""
    try:
        return await _connect(url, max_size=max_size, **{_HEADERS: headers})
    except (OSError, asyncio.TimeoutError) as e:
        raise TransportError(f"connect {url.split('?')[0]}: {e}") from e


class AttachSession:
    """One attached WebSocket: output as it comes, the exit record at the end."""

    def __init__(self, ws: Any) -> None:
        self._ws = ws
        self.dropped = 0
        self.process: Optional[ProcessInfo] = None
        self._error: Optional[Exception] = None
        self._done = False

    async def read(self) -> bytes:
        """The next piece of output; b"" once the command exited."""
        while True:
            if self._done:
                if self._error is not None:
                    raise self._error
                return b""
            try:
                m = await self._ws.recv()
            except Exception as e:  # websockets.ConnectionClosed and transport errors
                self._done = True
                if self.process is None:
                    self._error = StreamEndedError(f"the terminal's connection ended before the command's exit: {e}")
                continue
            if isinstance(m, bytes):
                if m and m[0] in (_STDOUT, _STDERR) and len(m) > 1:
                    return m[1:]
                continue
            msg = from_wire(AttachMessage, json.loads(m))
            if msg.type == "dropped":
                self.dropped += msg.bytes or 0
            elif msg.type == "exit":
                self.process, self._done = msg.process, True
            elif msg.type == "error":
                self._done = True
                self._error = error_from_wire(101, to_wire(msg.error) if msg.error else {})

    async def wait(self) -> ProcessInfo:
        """Read (discarding) to the exit; the command's record."""
        while await self.read():
            pass
        if self.process is None:
            raise StreamEndedError("the terminal ended without the command's exit")
        return self.process

    async def write(self, data: Union[bytes, str]) -> None:
        if isinstance(data, str):
            data = data.encode()
        for i in range(0, len(data), MAX_INPUT):
            await self._ws.send(bytes(data[i:i + MAX_INPUT]))

    async def resize(self, rows: int, cols: int) -> None:
        await self._ws.send(json.dumps(to_wire(AttachMessage(type="resize", rows=rows, cols=cols))))

    async def close_input(self) -> None:
        await self._ws.send(json.dumps(to_wire(AttachMessage(type="eof"))))

    async def close(self) -> None:
        await self._ws.close()


class LoopThread:
    """An event loop on a daemon thread, for the sync client's WebSockets."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="agentsandbox-ws", daemon=True)
        self._thread.start()

    def run(self, aw: Awaitable[T], timeout: Optional[float] = None) -> T:
        fut = asyncio.run_coroutine_threadsafe(_wrap(aw), self._loop)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


async def _wrap(aw: Awaitable[T]) -> T:
    return await aw

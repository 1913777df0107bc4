"""The async client: AsyncWorker, and its handles, with the sync client's surface."""

from __future__ import annotations

import json
from types import TracebackType
from typing import IO, Any, AsyncIterator, Dict, List, Mapping, Optional, Sequence, Union

import httpx

from . import _routes as routes
from ._attach import AttachSession, open_ws
from ._core import (
    Collector,
    Data,
    OutputCallback,
    auth_headers,
    create_body,
    exec_body,
    file_path,
    final_process,
    find_image,
    no_end,
    parse_event,
    upload_content,
    ws_url,
)
from ._client import DEFAULT_TIMEOUT
from ._errors import APIError, SandboxNotFoundError, TransportError, error_from_answer
from ._models import (
    BrowserVersion,
    EgressPolicy,
    ExecEvent,
    FileEntry,
    Image,
    ImageRequest,
    Limits,
    PatchRequest,
    Preview,
    PreviewRequest,
    ProcessInfo,
    RunResult,
    SandboxInfo,
    SandboxState,
    Secret,
    SelfTest,
    SignalRequest,
    Usage,
    WipeReport,
    WorkerStatus,
    from_wire,
    to_wire,
)


async def _aiter_content(data: Data) -> Any:
    content, headers = upload_content(data)
    if isinstance(content, bytes):
        return content, headers

    async def gen() -> AsyncIterator[bytes]:
        for chunk in content:
            yield chunk

    return gen(), headers


class AsyncWorker:
    """The async client of one worker: :class:`Worker`'s surface, awaited.

    ``async with AsyncWorker(url, token) as w:`` closes its connections at the end.
    """

    def __init__(self, url: str, token: str, *, timeout: Optional[float] = DEFAULT_TIMEOUT,
                 verify: Union[bool, str] = True, http_client: Optional[httpx.AsyncClient] = None) -> None:
        self.url = url.rstrip("/")
        self._token = token
        self._timeout = timeout
        self._http = http_client or httpx.AsyncClient(timeout=timeout, verify=verify, follow_redirects=False)
        self._headers = auth_headers(token)
        #: The worker's image store: pull, list, get, delete.
        self.images = AsyncImages(self)

    async def __aenter__(self) -> "AsyncWorker":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the client's connections (sandboxes run on)."""
        await self._http.aclose()

    # ---- transport ----

    async def _send(self, route: routes.Route, expect: int, *, stream: bool = False, json_body: Any = None,
                    content: Any = None, headers: Optional[Dict[str, str]] = None,
                    params: Optional[Dict[str, str]] = None, **path: Any) -> httpx.Response:
        hdrs = dict(self._headers)
        if headers:
            hdrs.update(headers)
        if json_body is not None:
            content = json.dumps(json_body).encode()
            hdrs["Content-Type"] = "application/json"
        timeout = httpx.Timeout(self._timeout, read=None) if stream else httpx.USE_CLIENT_DEFAULT
        req = self._http.build_request(route.method, self.url + route.path(**path), content=content,
                                       headers=hdrs, params=params, timeout=timeout)
        try:
            resp = await self._http.send(req, stream=stream)
        except httpx.TransportError as e:
            raise TransportError(f"{route.method} {req.url.path}: {e}") from e
        if resp.status_code != expect:
            try:
                body = await resp.aread()
            except httpx.TransportError:
                body = b""
            finally:
                await resp.aclose()
            raise error_from_answer(resp.status_code, body, resp.headers.get("Retry-After"))
        return resp

    async def _json(self, route: routes.Route, expect: int = 200, **kw: Any) -> Any:
        resp = await self._send(route, expect, **kw)
        return resp.json() if resp.content else None

    async def _events(self, route: routes.Route, **kw: Any) -> AsyncIterator[ExecEvent]:
        resp = await self._send(route, 200, stream=True, headers={"Accept": "application/x-ndjson"}, **kw)
        try:
            lines = resp.aiter_lines()
            async for line in lines:
                if not line.strip():
                    continue
                ev = parse_event(line)
                if ev.is_last:
                    # The answer ends right after its last event: read to
                    # its end, so the connection is kept for the next call.
                    async for _ in lines:
                        pass
                    yield ev
                    return
                yield ev
        except httpx.TransportError as e:
            raise TransportError(f"read stream: {e}") from e
        finally:
            await resp.aclose()
        raise no_end()

    # ---- the worker ----

    async def create(self, *, time_box_minutes: Optional[int] = None,
                     limits: Union[Limits, Mapping[str, int], None] = None,
                     egress: Union[EgressPolicy, Mapping[str, Any], str, None] = None,
                     env: Optional[Mapping[str, str]] = None, browser: Union[bool, str] = False,
                     image: Optional[str] = None,
                     secrets: Optional[Mapping[str, Union[Secret, Mapping[str, Any]]]] = None) -> "AsyncSandbox":
        """Create a sandbox (see Worker.create); ``async with await worker.create(...) as sb:`` deletes it at the end."""
        body = create_body(time_box_minutes=time_box_minutes, limits=limits, egress=egress, env=env, browser=browser,
                           image=image, secrets=secrets)
        info = from_wire(SandboxInfo, await self._json(routes.CREATE, 201, json_body=body))
        return AsyncSandbox(self, info.id, info)

    def sandbox(self, sandbox_id: str) -> "AsyncSandbox":
        """The handle of an existing sandbox (nothing is asked of the worker)."""
        return AsyncSandbox(self, sandbox_id)

    async def list(self) -> List[SandboxInfo]:
        """The worker's sandboxes."""
        return [from_wire(SandboxInfo, x) for x in (await self._json(routes.LIST))["items"]]

    async def status(self) -> WorkerStatus:
        """Capacity, load and the last self-test."""
        return from_wire(WorkerStatus, await self._json(routes.STATUS))

    async def run_self_test(self) -> SelfTest:
        """Run the self-test now (NoSelfTestError where the worker cannot)."""
        return from_wire(SelfTest, await self._json(routes.SELFTEST))


class AsyncImages:
    """The worker's image store (``AsyncWorker.images``), as Images."""

    def __init__(self, worker: "AsyncWorker") -> None:
        self._w = worker

    async def pull(self, ref: str) -> Image:
        """Pull ``ref`` into the store (see Images.pull); the image."""
        body = to_wire(ImageRequest(image=ref))
        return from_wire(Image, await self._w._json(routes.PULL_IMAGE, json_body=body))

    async def list(self) -> List[Image]:
        """The images the store holds, most recently used first."""
        return [from_wire(Image, x) for x in (await self._w._json(routes.LIST_IMAGES))["items"]]

    async def get(self, digest_or_ref: str) -> Optional[Image]:
        """The image of that digest or canonical reference, from ``list()``; None when not held."""
        return find_image(await self.list(), digest_or_ref)

    async def delete(self, digest_or_ref: str) -> Image:
        """Evict the image (see Images.delete); the image as it was."""
        return from_wire(Image, await self._w._json(routes.DELETE_IMAGE, digest=digest_or_ref))


class AsyncSandbox:
    """The async handle of one sandbox (see :class:`Sandbox`)."""

    def __init__(self, worker: AsyncWorker, sandbox_id: str, info: Optional[SandboxInfo] = None) -> None:
        self.worker = worker
        self.id = sandbox_id
        self.info = info
        self.wipe_report: Optional[WipeReport] = None
        self.files = AsyncFiles(self)
        self.archive = AsyncArchive(self)

    def __repr__(self) -> str:
        return f"AsyncSandbox({self.id!r})"

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, exc_type: Optional[type], exc: Optional[BaseException],
                        tb: Optional[TracebackType]) -> None:
        if self.wipe_report is None:
            try:
                await self.delete()
            except SandboxNotFoundError:
                pass

    async def state(self) -> SandboxState:
        """The sandbox now: description, state and usage."""
        return from_wire(SandboxState, await self.worker._json(routes.GET, id=self.id))

    async def usage(self) -> Usage:
        """What the sandbox uses now."""
        return (await self.state()).usage

    async def extend(self, time_box_minutes: int) -> SandboxInfo:
        """Set the time box anew (5..30 minutes counted from the start)."""
        body = to_wire(PatchRequest(time_box_minutes=time_box_minutes))
        self.info = from_wire(SandboxInfo, await self.worker._json(routes.EXTEND, json_body=body, id=self.id))
        return self.info

    async def update_secrets(self, secrets: Mapping[str, Union[Secret, Mapping[str, Any]]]) -> Dict[str, str]:
        """Add or rotate secrets, by name (PATCH with secrets): a name the
        sandbox has keeps its placeholder and the proxy puts the new value in
        from the next request on; a new name gets a new placeholder, set for
        the commands started after. Returns the placeholder of each secret
        given, by name. The sandbox must have been created with secrets or an
        egress allow entry with methods or paths, and the hosts must be within
        those (InvalidRequestError)."""
        secs = {k: v if isinstance(v, Secret) else Secret(**v) for k, v in secrets.items()}
        body = to_wire(PatchRequest(secrets=secs))
        info = from_wire(SandboxInfo, await self.worker._json(routes.EXTEND, json_body=body, id=self.id))
        placeholders = info.secret_placeholders or {}
        info.secret_placeholders = None
        self.info = info
        return placeholders

    async def delete(self) -> WipeReport:
        """Wipe the sandbox; its report."""
        self.wipe_report = from_wire(WipeReport, await self.worker._json(routes.DELETE, id=self.id))
        return self.wipe_report

    async def run(self, argv: Union[Sequence[str], str], *, stdin: Union[str, bytes, None] = None,
                  env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
                  timeout: Optional[float] = None, on_stdout: Optional[OutputCallback] = None,
                  on_stderr: Optional[OutputCallback] = None) -> RunResult:
        """Run a command to its end (see Sandbox.run)."""
        body = exec_body(argv, env=env, cwd=cwd, stdin=stdin, timeout=timeout)
        c = Collector(on_stdout, on_stderr)
        async for ev in self.worker._events(routes.EXEC, json_body=body, id=self.id):
            if ev.is_last:
                return c.result(ev)
            c.feed(ev)
        raise no_end()

    async def start(self, argv: Union[Sequence[str], str], *, env: Optional[Mapping[str, str]] = None,
                    cwd: Optional[str] = None, tty: bool = False, rows: Optional[int] = None,
                    cols: Optional[int] = None) -> "AsyncProcess":
        """Start a command in the background."""
        body = exec_body(argv, env=env, cwd=cwd, background=True, tty=tty, rows=rows, cols=cols)
        info = from_wire(ProcessInfo, await self.worker._json(routes.EXEC, 201, json_body=body, id=self.id))
        return AsyncProcess(self, info.pid, info)

    async def processes(self) -> List[ProcessInfo]:
        """Every command of the sandbox, oldest first."""
        return [from_wire(ProcessInfo, x) for x in (await self.worker._json(routes.PROCESSES, id=self.id))["items"]]

    def process(self, pid: int) -> "AsyncProcess":
        """The handle of command pid."""
        return AsyncProcess(self, pid)

    async def terminal(self, argv: Union[Sequence[str], str] = ("bash",), *, rows: int = 24, cols: int = 80,
                       env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None) -> "AsyncTerminal":
        """Start a command on a terminal of the sandbox's own and attach to it."""
        p = await self.start(argv, env=env, cwd=cwd, tty=True, rows=rows, cols=cols)
        try:
            return await p.attach()
        except BaseException:
            try:
                await p.signal("KILL")
            except APIError:
                pass
            raise

    def browser_ws_url(self) -> str:
        """The CDP WebSocket URL of the sandbox's browser."""
        return ws_url(self.worker.url, routes.BROWSER.path(id=self.id))

    def browser_headers(self) -> Dict[str, str]:
        """The headers a CDP client must send with ``browser_ws_url()``."""
        return auth_headers(self.worker._token)

    async def browser_version(self) -> BrowserVersion:
        """The browser's /json/version (starting it unless it runs)."""
        return from_wire(BrowserVersion, await self.worker._json(routes.BROWSER_VERSION, id=self.id))


    # ---- its ports ----

    def port_url(self, port: int, path: str = "") -> str:
        """The URL through which the worker forwards requests to ``port`` of the sandbox
        (``127.0.0.1:port`` inside it), with the server's own ``path`` after it (no leading
        ``/``, a query allowed). Send ``port_headers()`` with every request (a WebSocket's
        too, with ``ws``/``wss`` for ``http``/``https``); the worker removes them before the
        request enters the sandbox."""
        return self.worker.url + routes.PORT.path(id=self.id, port=int(port), path=path.lstrip("/"))

    def port_headers(self) -> Dict[str, str]:
        """The headers a request to ``port_url()`` must carry (the token)."""
        return auth_headers(self.worker._token)

    async def preview(self, port: int, ttl_seconds: Optional[int] = None) -> Preview:
        """A signed URL that opens ``port`` of the sandbox in a person's browser, on the
        worker's preview listener (its own origin), for ``ttl_seconds`` (1..86400; None: an
        hour). It dies sooner with the sandbox or the worker's restart. NoPreviewError on a
        worker without previews."""
        body = to_wire(PreviewRequest(ttl_seconds=ttl_seconds))
        return from_wire(Preview, await self.worker._json(routes.PREVIEW, json_body=body, id=self.id, port=int(port)))

class AsyncOutputStream:
    """A process's output events, iterated once with ``async for``; ``process`` after the last."""

    def __init__(self, it: AsyncIterator[ExecEvent]) -> None:
        self._it = it
        self.process: Optional[ProcessInfo] = None

    async def __aiter__(self) -> AsyncIterator[ExecEvent]:
        async for ev in self._it:
            if ev.is_last:
                self.process = final_process(ev)
                return
            yield ev


class AsyncProcess:
    """The async handle of one command of a sandbox (see :class:`Process`)."""

    def __init__(self, sandbox: AsyncSandbox, pid: int, info: Optional[ProcessInfo] = None) -> None:
        self.sandbox = sandbox
        self.pid = pid
        self.info_at_start = info

    def __repr__(self) -> str:
        return f"AsyncProcess({self.sandbox.id!r}, {self.pid})"

    def _kw(self) -> Dict[str, Any]:
        return {"id": self.sandbox.id, "pid": self.pid}

    async def info(self) -> ProcessInfo:
        """Its record now."""
        return from_wire(ProcessInfo, await self.sandbox.worker._json(routes.PROCESS, **self._kw()))

    def output(self, follow: bool = False) -> AsyncOutputStream:
        """Its output: what the buffer holds, then (``follow``) everything to its exit."""
        params = {"follow": "1"} if follow else None
        return AsyncOutputStream(self.sandbox.worker._events(routes.OUTPUT, params=params, **self._kw()))

    async def wait(self) -> ProcessInfo:
        """Follow its output (discarding it) to its exit; its record."""
        stream = self.output(follow=True)
        async for _ in stream:
            pass
        assert stream.process is not None
        return stream.process

    async def write_stdin(self, data: Data, *, close: bool = False) -> None:
        """Write to its stdin; ``close`` closes it after."""
        content, headers = await _aiter_content(data)
        headers["Content-Type"] = "application/octet-stream"
        r = await self.sandbox.worker._send(routes.STDIN, 204, content=content, headers=headers,
                                            params={"close": "1"} if close else None, **self._kw())
        await r.aclose()

    async def close_stdin(self) -> None:
        """Close its stdin."""
        await self.write_stdin(b"", close=True)

    async def signal(self, sig: str = "TERM") -> None:
        """Signal its process group."""
        r = await self.sandbox.worker._send(routes.SIGNAL, 204, json_body=to_wire(SignalRequest(signal=sig)),
                                            **self._kw())
        await r.aclose()

    async def attach(self) -> "AsyncTerminal":
        """Attach to it over a WebSocket."""
        w = self.sandbox.worker
        url = ws_url(w.url, routes.ATTACH.path(**self._kw()))
        try:
            ws = await open_ws(url, w._headers)
        except TransportError:
            raise
        except Exception as e:
            await self.info()
            raise TransportError(f"attach {self.pid}: {e}") from e
        return AsyncTerminal(self, AttachSession(ws))


class AsyncTerminal:
    """An attached session (see :class:`Terminal`); ``async for chunk in term`` reads its output."""

    def __init__(self, process: AsyncProcess, session: AttachSession) -> None:
        self.process = process
        self._s = session

    async def __aenter__(self) -> "AsyncTerminal":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            b = await self.read()
            if not b:
                return
            yield b

    @property
    def dropped(self) -> int:
        """Output the worker dropped because the reader was too slow."""
        return self._s.dropped

    async def read(self) -> bytes:
        """The next piece of output; b"" once the command exited."""
        return await self._s.read()

    async def read_until(self, marker: Union[bytes, str]) -> bytes:
        """Output up to and including marker (all of it when the command exits first)."""
        m = marker.encode() if isinstance(marker, str) else marker
        buf = b""
        while m not in buf:
            b = await self.read()
            if not b:
                break
            buf += b
        return buf

    async def write(self, data: Union[bytes, str]) -> None:
        """Type data into the command."""
        await self._s.write(data)

    async def resize(self, rows: int, cols: int) -> None:
        """Set the terminal's size."""
        await self._s.resize(rows, cols)

    async def close_input(self) -> None:
        """End its input."""
        await self._s.close_input()

    async def wait(self) -> ProcessInfo:
        """Read (discarding) to its exit; its record."""
        return await self._s.wait()

    async def close(self) -> None:
        """Close the connection (the command runs on)."""
        await self._s.close()


class AsyncFiles:
    """The sandbox's workspace files (see :class:`Files`)."""

    def __init__(self, sandbox: AsyncSandbox) -> None:
        self._sb = sandbox

    def _kw(self, path: str, directory: bool = False) -> Dict[str, Any]:
        return {"id": self._sb.id, "path": file_path(path, directory)}

    async def write(self, path: str, data: Data, *, mode: Optional[int] = None) -> None:
        """Write a file (parents made); all of data or nothing."""
        content, headers = await _aiter_content(data)
        headers["Content-Type"] = "application/octet-stream"
        if mode is not None:
            headers["X-File-Mode"] = format(mode & 0o777, "04o")
        r = await self._sb.worker._send(routes.PUT_FILE, 204, content=content, headers=headers, **self._kw(path))
        await r.aclose()

    async def read(self, path: str) -> bytes:
        """A file's content."""
        return (await self._sb.worker._send(routes.GET_FILE, 200, **self._kw(path))).content

    async def read_text(self, path: str, encoding: str = "utf-8") -> str:
        """A file's content as text."""
        return (await self.read(path)).decode(encoding)

    async def list(self, directory: str = "") -> List[FileEntry]:
        """A directory's entries, sorted by name."""
        doc = await self._sb.worker._json(routes.GET_FILE, **self._kw(directory, True))
        return [from_wire(FileEntry, x) for x in doc["items"]]

    async def mkdir(self, directory: str, *, mode: Optional[int] = None) -> None:
        """Make a directory with its parents."""
        headers = {"X-File-Type": "directory"}
        if mode is not None:
            headers["X-File-Mode"] = format(mode & 0o777, "04o")
        r = await self._sb.worker._send(routes.PUT_FILE, 204, headers=headers, **self._kw(directory, True))
        await r.aclose()

    async def remove(self, path: str, *, recursive: bool = False) -> None:
        """Remove a file, a symlink or an empty directory (``recursive``: any directory)."""
        r = await self._sb.worker._send(routes.DELETE_FILE, 204, params={"recursive": "1"} if recursive else None,
                                        **self._kw(path))
        await r.aclose()


class AsyncArchive:
    """Trees of the sandbox's workspace as tar archives (see :class:`Archive`)."""

    def __init__(self, sandbox: AsyncSandbox) -> None:
        self._sb = sandbox

    async def upload(self, data: Data, directory: str = "") -> None:
        """Unpack a tar (or gzipped tar) into directory, all or nothing."""
        content, headers = await _aiter_content(data)
        headers["Content-Type"] = "application/x-tar"
        r = await self._sb.worker._send(routes.PUT_ARCHIVE, 204, content=content, headers=headers,
                                        id=self._sb.id, path=file_path(directory, True))
        await r.aclose()

    async def download(self, directory: str = "") -> bytes:
        """A tar of directory's tree."""
        r = await self._sb.worker._send(routes.GET_ARCHIVE, 200, id=self._sb.id, path=file_path(directory, True))
        return r.content

    async def download_to(self, dst: IO[bytes], directory: str = "") -> int:
        """Stream a tar of directory's tree into dst; the bytes written."""
        resp = await self._sb.worker._send(routes.GET_ARCHIVE, 200, stream=True, id=self._sb.id,
                                           path=file_path(directory, True))
        n = 0
        try:
            async for chunk in resp.aiter_bytes():
                dst.write(chunk)
                n += len(chunk)
        except httpx.TransportError as e:
            raise TransportError(f"download archive (what was written is not a whole archive): {e}") from e
        finally:
            await resp.aclose()
        return n

"""The sync client: Worker, and its handles Sandbox, Process, Terminal, Files, Archive."""

from __future__ import annotations

import json
from types import TracebackType
from typing import IO, Any, Dict, Iterator, List, Mapping, Optional, Sequence, Union

import httpx

from . import _routes as routes
from ._attach import AttachSession, LoopThread, open_ws
from ._transport import StdlibTransport
from ._core import (
    Collector,
    Data,
    OutputCallback,
    auth_headers,
    create_body,
    events,
    exec_body,
    file_path,
    final_process,
    find_image,
    upload_content,
    ws_url,
)
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

DEFAULT_TIMEOUT = 60.0


class Worker:
    """A client of one sandbox worker's API (docs/openapi.yaml).

    ``with Worker(url, token) as w:`` closes its connections at the end. Its
    methods raise an :class:`APIError` subclass for an error answer (matched
    on the API's code) and :class:`TransportError` when no answer came.
    Redirects are never followed, so the token goes only to ``url``.
    """

    def __init__(self, url: str, token: str, *, timeout: Optional[float] = DEFAULT_TIMEOUT,
                 verify: Union[bool, str] = True, http_client: Optional[httpx.Client] = None) -> None:
        self.url = url.rstrip("/")
        self._token = token
        self._timeout = timeout
        self._http = http_client or httpx.Client(timeout=timeout, follow_redirects=False, trust_env=False,
                                                 transport=StdlibTransport(verify))
        self._headers = auth_headers(token)
        self._loop: Optional[LoopThread] = None
        #: The worker's image store: pull, list, get, delete.
        self.images = Images(self)

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the client's connections (sandboxes run on)."""
        self._http.close()
        if self._loop is not None:
            self._loop.close()
            self._loop = None

    # ---- transport ----

    def _send(self, route: routes.Route, expect: int, *, stream: bool = False, json_body: Any = None,
              content: Any = None, headers: Optional[Dict[str, str]] = None, params: Optional[Dict[str, str]] = None,
              **path: Any) -> httpx.Response:
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
            resp = self._http.send(req, stream=stream)
        except httpx.TransportError as e:
            raise TransportError(f"{route.method} {req.url.path}: {e}") from e
        if resp.status_code != expect:
            try:
                body = resp.read()
            except httpx.TransportError:
                body = b""
            finally:
                resp.close()
            raise error_from_answer(resp.status_code, body, resp.headers.get("Retry-After"))
        return resp

    def _json(self, route: routes.Route, expect: int = 200, **kw: Any) -> Any:
        resp = self._send(route, expect, **kw)
        return resp.json() if resp.content else None

    def _events(self, route: routes.Route, **kw: Any) -> Iterator[ExecEvent]:
        resp = self._send(route, 200, stream=True, headers={"Accept": "application/x-ndjson"}, **kw)
        try:
            lines = resp.iter_lines()
            for ev in events(lines):
                if ev.is_last:
                    # The answer ends right after its last event: read to
                    # its end, so the connection is kept for the next call.
                    for _ in lines:
                        pass
                yield ev
        except httpx.TransportError as e:
            raise TransportError(f"read stream: {e}") from e
        finally:
            resp.close()

    def _ws_loop(self) -> LoopThread:
        if self._loop is None:
            self._loop = LoopThread()
        return self._loop

    # ---- the worker ----

    def create(self, *, time_box_minutes: Optional[int] = None, limits: Union[Limits, Mapping[str, int], None] = None,
               egress: Union[EgressPolicy, Mapping[str, Any], str, None] = None, env: Optional[Mapping[str, str]] = None,
               browser: Union[bool, str] = False, image: Optional[str] = None,
               secrets: Optional[Mapping[str, Union[Secret, Mapping[str, Any]]]] = None) -> "Sandbox":
        """Create a sandbox. Use it as ``with worker.create(...) as sb:`` to delete it at the end.

        ``time_box_minutes`` 5..30 (default 5), ``limits`` within the worker's,
        ``egress`` a policy (or just its mode), ``env`` for every command,
        ``browser`` True (or ``"start"`` to start it now), ``image`` a
        reference (``registry.example/team/py:3.12`` or ``…@sha256:…``) to run
        on instead of the host's view, pulled first when the worker does not
        hold it (not with ``browser``), ``secrets`` by variable name
        (``{"OPENAI_API_KEY": Secret(value, ["api.openai.com"])}``: the sandbox
        gets a placeholder, the proxy puts the value in for those hosts only;
        see docs/egress.md). Raises AtCapacityError (see
        ``retry_after``), InvalidRequestError and its kin for options the
        worker cannot take, and for an image ImageNotAllowedError (images
        off, or a registry the worker does not allow), InvalidImageError,
        ImageNotFoundError, ImageUnauthorizedError, RegistryUnavailableError,
        ImageCacheFullError or ImagesUnavailableError.
        """
        body = create_body(time_box_minutes=time_box_minutes, limits=limits, egress=egress, env=env, browser=browser,
                           image=image, secrets=secrets)
        info = from_wire(SandboxInfo, self._json(routes.CREATE, 201, json_body=body))
        return Sandbox(self, info.id, info)

    def sandbox(self, sandbox_id: str) -> "Sandbox":
        """The handle of an existing sandbox (nothing is asked of the worker)."""
        return Sandbox(self, sandbox_id)

    def list(self) -> List[SandboxInfo]:
        """The worker's sandboxes."""
        return [from_wire(SandboxInfo, x) for x in self._json(routes.LIST)["items"]]

    def status(self) -> WorkerStatus:
        """Capacity, load and the last self-test."""
        return from_wire(WorkerStatus, self._json(routes.STATUS))

    def run_self_test(self) -> SelfTest:
        """Run the self-test now (NoSelfTestError where the worker cannot)."""
        return from_wire(SelfTest, self._json(routes.SELFTEST))


class Images:
    """The worker's image store (``Worker.images``; docs/images.md). On a
    worker without ``--image-registry`` images are off: ``list`` is empty and
    the others raise ImageNotAllowedError."""

    def __init__(self, worker: Worker) -> None:
        self._w = worker

    def pull(self, ref: str) -> Image:
        """Pull ``ref`` into the store ahead of the creates that use it (a tag
        is resolved again); the image. ImageNotAllowedError, InvalidImageError,
        ImageUnauthorizedError, ImageNotFoundError, RegistryUnavailableError,
        ImageCacheFullError."""
        body = to_wire(ImageRequest(image=ref))
        return from_wire(Image, self._w._json(routes.PULL_IMAGE, json_body=body))

    def list(self) -> List[Image]:
        """The images the store holds, most recently used first."""
        return [from_wire(Image, x) for x in self._w._json(routes.LIST_IMAGES)["items"]]

    def get(self, digest_or_ref: str) -> Optional[Image]:
        """The image of that digest, or of a canonical reference it was
        pulled by, from ``list()`` (the API has no route for one image);
        None when the store does not hold it."""
        return find_image(self.list(), digest_or_ref)

    def delete(self, digest_or_ref: str) -> Image:
        """Evict the image (its digest, or a reference it was pulled by) with
        the layers no other image uses; the image as it was.
        ImageNotFoundError, ImageInUseError while a sandbox runs on it."""
        return from_wire(Image, self._w._json(routes.DELETE_IMAGE, digest=digest_or_ref))


class Sandbox:
    """A handle of one sandbox: commands, files, time box, deletion.

    As a context manager it deletes the sandbox on exit and keeps the wipe's
    report in ``wipe_report``. Its methods raise SandboxNotFoundError once
    the sandbox is gone.
    """

    def __init__(self, worker: Worker, sandbox_id: str, info: Optional[SandboxInfo] = None) -> None:
        self.worker = worker
        self.id = sandbox_id
        #: The description from the create (or the last extend); None for a handle from ``Worker.sandbox``.
        self.info = info
        self.wipe_report: Optional[WipeReport] = None
        self.files = Files(self)
        self.archive = Archive(self)

    def __repr__(self) -> str:
        return f"Sandbox({self.id!r})"

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, exc_type: Optional[type], exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        if self.wipe_report is None:
            try:
                self.delete()
            except SandboxNotFoundError:
                pass

    def state(self) -> SandboxState:
        """The sandbox now: description, state and usage."""
        return from_wire(SandboxState, self.worker._json(routes.GET, id=self.id))

    def usage(self) -> Usage:
        """What the sandbox uses now."""
        return self.state().usage

    def extend(self, time_box_minutes: int) -> SandboxInfo:
        """Set the time box anew (5..30 minutes counted from the start)."""
        body = to_wire(PatchRequest(time_box_minutes=time_box_minutes))
        self.info = from_wire(SandboxInfo, self.worker._json(routes.EXTEND, json_body=body, id=self.id))
        return self.info

    def update_secrets(self, secrets: Mapping[str, Union[Secret, Mapping[str, Any]]]) -> Dict[str, str]:
        """Add or rotate secrets, by name (PATCH with secrets): a name the
        sandbox has keeps its placeholder and the proxy puts the new value in
        from the next request on; a new name gets a new placeholder, set for
        the commands started after. Returns the placeholder of each secret
        given, by name. The sandbox must have been created with secrets or an
        egress allow entry with methods or paths, and the hosts must be within
        those (InvalidRequestError)."""
        secs = {k: v if isinstance(v, Secret) else Secret(**v) for k, v in secrets.items()}
        body = to_wire(PatchRequest(secrets=secs))
        info = from_wire(SandboxInfo, self.worker._json(routes.EXTEND, json_body=body, id=self.id))
        placeholders = info.secret_placeholders or {}
        info.secret_placeholders = None
        self.info = info
        return placeholders

    def delete(self) -> WipeReport:
        """Wipe the sandbox; its report (WipeUnverifiedError, with ``leftovers``, when the wipe could not verify itself)."""
        self.wipe_report = from_wire(WipeReport, self.worker._json(routes.DELETE, id=self.id))
        return self.wipe_report

    # ---- commands ----

    def run(self, argv: Union[Sequence[str], str], *, stdin: Union[str, bytes, None] = None,
            env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None, timeout: Optional[float] = None,
            on_stdout: Optional[OutputCallback] = None, on_stderr: Optional[OutputCallback] = None) -> RunResult:
        """Run a command to its end and return its exit code, reason and output.

        ``argv`` is a list (or a string for ``sh -c``); ``stdin`` its whole
        input; ``timeout`` in seconds ends the command (not the sandbox);
        ``on_stdout``/``on_stderr`` get each piece of output as it arrives.
        A non-zero exit is a result, not an exception.
        """
        body = exec_body(argv, env=env, cwd=cwd, stdin=stdin, timeout=timeout)
        c = Collector(on_stdout, on_stderr)
        for ev in self.worker._events(routes.EXEC, json_body=body, id=self.id):
            if ev.is_last:
                return c.result(ev)
            c.feed(ev)
        raise AssertionError("unreachable")

    def start(self, argv: Union[Sequence[str], str], *, env: Optional[Mapping[str, str]] = None,
              cwd: Optional[str] = None, tty: bool = False, rows: Optional[int] = None,
              cols: Optional[int] = None) -> "Process":
        """Start a command in the background; it runs on, its output kept, until it exits or is signalled."""
        body = exec_body(argv, env=env, cwd=cwd, background=True, tty=tty, rows=rows, cols=cols)
        info = from_wire(ProcessInfo, self.worker._json(routes.EXEC, 201, json_body=body, id=self.id))
        return Process(self, info.pid, info)

    def processes(self) -> List[ProcessInfo]:
        """Every command of the sandbox, oldest first."""
        return [from_wire(ProcessInfo, x) for x in self.worker._json(routes.PROCESSES, id=self.id)["items"]]

    def process(self, pid: int) -> "Process":
        """The handle of command pid."""
        return Process(self, pid)

    def terminal(self, argv: Union[Sequence[str], str] = ("bash",), *, rows: int = 24, cols: int = 80,
                 env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None) -> "Terminal":
        """Start a command on a terminal of the sandbox's own and attach to it."""
        p = self.start(argv, env=env, cwd=cwd, tty=True, rows=rows, cols=cols)
        try:
            return p.attach()
        except BaseException:
            try:
                p.signal("KILL")
            except APIError:
                pass
            raise

    # ---- the browser ----

    def browser_ws_url(self) -> str:
        """The CDP WebSocket URL of the sandbox's browser (give it with ``browser_headers()``
        to Playwright's ``connect_over_cdp``)."""
        return ws_url(self.worker.url, routes.BROWSER.path(id=self.id))

    def browser_headers(self) -> Dict[str, str]:
        """The headers a CDP client must send with ``browser_ws_url()`` (the token)."""
        return auth_headers(self.worker._token)

    def browser_version(self) -> BrowserVersion:
        """The browser's /json/version (starting it unless it runs); NoBrowserError, BrowserBusyError."""
        return from_wire(BrowserVersion, self.worker._json(routes.BROWSER_VERSION, id=self.id))


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

    def preview(self, port: int, ttl_seconds: Optional[int] = None) -> Preview:
        """A signed URL that opens ``port`` of the sandbox in a person's browser, on the
        worker's preview listener (its own origin), for ``ttl_seconds`` (1..86400; None: an
        hour). It dies sooner with the sandbox or the worker's restart. NoPreviewError on a
        worker without previews."""
        body = to_wire(PreviewRequest(ttl_seconds=ttl_seconds))
        return from_wire(Preview, self.worker._json(routes.PREVIEW, json_body=body, id=self.id, port=int(port)))

class OutputStream:
    """A process's output events (output and drop markers), iterated once;
    ``process`` is its record after the last."""

    def __init__(self, it: Iterator[ExecEvent]) -> None:
        self._it = it
        self.process: Optional[ProcessInfo] = None

    def __iter__(self) -> Iterator[ExecEvent]:
        for ev in self._it:
            if ev.is_last:
                self.process = final_process(ev)
                return
            yield ev


class Process:
    """A handle of one command of a sandbox (from ``Sandbox.start`` or ``Sandbox.process``)."""

    def __init__(self, sandbox: Sandbox, pid: int, info: Optional[ProcessInfo] = None) -> None:
        self.sandbox = sandbox
        self.pid = pid
        self.info_at_start = info

    def __repr__(self) -> str:
        return f"Process({self.sandbox.id!r}, {self.pid})"

    def _kw(self) -> Dict[str, Any]:
        return {"id": self.sandbox.id, "pid": self.pid}

    def info(self) -> ProcessInfo:
        """Its record now (ProcessNotFoundError for an unknown pid)."""
        return from_wire(ProcessInfo, self.sandbox.worker._json(routes.PROCESS, **self._kw()))

    def output(self, follow: bool = False) -> OutputStream:
        """Its output: what the buffer holds, then (``follow``) everything to its exit."""
        params = {"follow": "1"} if follow else None
        return OutputStream(self.sandbox.worker._events(routes.OUTPUT, params=params, **self._kw()))

    def wait(self) -> ProcessInfo:
        """Follow its output (discarding it) to its exit; its record."""
        stream = self.output(follow=True)
        for _ in stream:
            pass
        assert stream.process is not None
        return stream.process

    def write_stdin(self, data: Data, *, close: bool = False) -> None:
        """Write to its stdin (streamed); ``close`` closes it after."""
        content, headers = upload_content(data)
        headers["Content-Type"] = "application/octet-stream"
        self.sandbox.worker._send(routes.STDIN, 204, content=content, headers=headers,
                                  params={"close": "1"} if close else None, **self._kw()).close()

    def close_stdin(self) -> None:
        """Close its stdin (on a terminal: type the end-of-file character)."""
        self.write_stdin(b"", close=True)

    def signal(self, sig: str = "TERM") -> None:
        """Signal its process group: TERM, KILL, INT, HUP, QUIT, USR1, USR2, STOP, CONT or WINCH."""
        self.sandbox.worker._send(routes.SIGNAL, 204, json_body=to_wire(SignalRequest(signal=sig)), **self._kw()).close()

    def attach(self) -> "Terminal":
        """Attach to it over a WebSocket: its output (from what its buffer holds), its input."""
        w = self.sandbox.worker
        loop = w._ws_loop()
        url = ws_url(w.url, routes.ATTACH.path(**self._kw()))
        try:
            ws = loop.run(open_ws(url, w._headers), w._timeout)
        except TransportError:
            raise
        except Exception as e:  # the handshake was refused: the process's state says why
            self.info()
            raise TransportError(f"attach {self.pid}: {e}") from e
        return Terminal(self, AttachSession(ws), loop)


class Terminal:
    """An attached session with a command: ``read``/iterate its output, ``write`` to it,
    ``resize``, ``close_input``, ``wait`` for its exit. ``with`` closes the connection."""

    def __init__(self, process: Process, session: AttachSession, loop: LoopThread) -> None:
        self.process = process
        self._s = session
        self._loop = loop

    def __enter__(self) -> "Terminal":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __iter__(self) -> Iterator[bytes]:
        while True:
            b = self.read()
            if not b:
                return
            yield b

    @property
    def dropped(self) -> int:
        """Output the worker dropped because the reader was too slow."""
        return self._s.dropped

    def read(self, timeout: Optional[float] = None) -> bytes:
        """The next piece of output; b"" once the command exited."""
        return self._loop.run(self._s.read(), timeout)

    def read_until(self, marker: Union[bytes, str], timeout: Optional[float] = None) -> bytes:
        """Output up to and including marker (all of it when the command exits first)."""
        m = marker.encode() if isinstance(marker, str) else marker
        buf = b""
        while m not in buf:
            b = self.read(timeout)
            if not b:
                break
            buf += b
        return buf

    def write(self, data: Union[bytes, str]) -> None:
        """Type data into the command."""
        self._loop.run(self._s.write(data))

    def resize(self, rows: int, cols: int) -> None:
        """Set the terminal's size (the command gets SIGWINCH)."""
        self._loop.run(self._s.resize(rows, cols))

    def close_input(self) -> None:
        """End its input (on a terminal: the end-of-file character)."""
        self._loop.run(self._s.close_input())

    def wait(self, timeout: Optional[float] = None) -> ProcessInfo:
        """Read (discarding) to its exit; its record."""
        return self._loop.run(self._s.wait(), timeout)

    def close(self) -> None:
        """Close the connection (the command runs on)."""
        self._loop.run(self._s.close())


class Files:
    """The sandbox's workspace files; paths are relative to /workspace."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._sb = sandbox

    def _kw(self, path: str, directory: bool = False) -> Dict[str, Any]:
        return {"id": self._sb.id, "path": file_path(path, directory)}

    def write(self, path: str, data: Data, *, mode: Optional[int] = None) -> None:
        """Write a file (parents made); all of data or nothing. IsDirectoryError, WorkspaceFullError, BodyTooLargeError."""
        content, headers = upload_content(data)
        headers["Content-Type"] = "application/octet-stream"
        if mode is not None:
            headers["X-File-Mode"] = format(mode & 0o777, "04o")
        self._sb.worker._send(routes.PUT_FILE, 204, content=content, headers=headers, **self._kw(path)).close()

    def read(self, path: str) -> bytes:
        """A file's content (PathNotFoundError, IsDirectoryError)."""
        return self._sb.worker._send(routes.GET_FILE, 200, **self._kw(path)).content

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        """A file's content as text."""
        return self.read(path).decode(encoding)

    def list(self, directory: str = "") -> List[FileEntry]:
        """A directory's entries ("" the workspace), sorted by name (NotDirectoryError)."""
        doc = self._sb.worker._json(routes.GET_FILE, **self._kw(directory, True))
        return [from_wire(FileEntry, x) for x in doc["items"]]

    def mkdir(self, directory: str, *, mode: Optional[int] = None) -> None:
        """Make a directory with its parents (ExistsError when a file is in its place)."""
        headers = {"X-File-Type": "directory"}
        if mode is not None:
            headers["X-File-Mode"] = format(mode & 0o777, "04o")
        self._sb.worker._send(routes.PUT_FILE, 204, headers=headers, **self._kw(directory, True)).close()

    def remove(self, path: str, *, recursive: bool = False) -> None:
        """Remove a file, a symlink or an empty directory (``recursive``: any directory; NotEmptyError)."""
        self._sb.worker._send(routes.DELETE_FILE, 204, params={"recursive": "1"} if recursive else None,
                              **self._kw(path)).close()


class Archive:
    """Trees of the sandbox's workspace as tar archives."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._sb = sandbox

    def upload(self, data: Data, directory: str = "") -> None:
        """Unpack a tar (or gzipped tar) into directory ("" the workspace), all or nothing (InvalidArchiveError, ExistsError)."""
        content, headers = upload_content(data)
        headers["Content-Type"] = "application/x-tar"
        self._sb.worker._send(routes.PUT_ARCHIVE, 204, content=content, headers=headers,
                              id=self._sb.id, path=file_path(directory, True)).close()

    def download(self, directory: str = "") -> bytes:
        """A tar of directory's tree ("" the workspace)."""
        return self._sb.worker._send(routes.GET_ARCHIVE, 200, id=self._sb.id, path=file_path(directory, True)).content

    def download_to(self, dst: IO[bytes], directory: str = "") -> int:
        """Stream a tar of directory's tree into dst; the bytes written."""
        resp = self._sb.worker._send(routes.GET_ARCHIVE, 200, stream=True, id=self._sb.id, path=file_path(directory, True))
        n = 0
        try:
            for chunk in resp.iter_bytes():
                dst.write(chunk)
                n += len(chunk)
        except httpx.TransportError as e:
            raise TransportError(f"download archive (what was written is not a whole archive): {e}") from e
        finally:
            resp.close()
        return n

"""What the sync and the async clients share: request bodies from
arguments, workspace paths, and reading a command's output events."""

from __future__ import annotations

import base64
import json
import math
import os
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Union

from ._errors import StreamEndedError, error_from_wire
from ._models import (
    BrowserRequest,
    CreateRequest,
    EgressPolicy,
    ExecEvent,
    ExecRequest,
    Image,
    Limits,
    ProcessInfo,
    RunResult,
    Secret,
    from_wire,
    to_wire,
)

#: Bytes a write or upload may be given as.
Data = Union[bytes, bytearray, memoryview, str, IO[bytes]]
#: An output callback: called with each piece of a stream's output, as text.
OutputCallback = Callable[[str], Any]

_CHUNK = 64 << 10


def create_body(
    *,
    time_box_minutes: Optional[int],
    limits: Union[Limits, Mapping[str, int], None],
    egress: Union[EgressPolicy, Mapping[str, Any], str, None],
    env: Optional[Mapping[str, str]],
    browser: Union[bool, str],
    image: Optional[str] = None,
    secrets: Optional[Mapping[str, Union[Secret, Mapping[str, Any]]]] = None,
) -> Dict[str, Any]:
    """The JSON of a create."""
    if isinstance(limits, Mapping):
        limits = Limits(**limits)
    if isinstance(egress, str):
        egress = EgressPolicy(mode=egress)
    elif isinstance(egress, Mapping):
        egress = EgressPolicy(**egress)
    if browser not in (False, True, "start"):
        raise ValueError("browser: give True, False or 'start' (start it at create)")
    br: Union[bool, BrowserRequest, None] = None
    if browser == "start":
        br = BrowserRequest(start=True)
    elif browser:
        br = True
    secs = {k: v if isinstance(v, Secret) else Secret(**v) for k, v in secrets.items()} if secrets else None
    req = CreateRequest(time_box_minutes=time_box_minutes, env=dict(env) if env else None, browser=br,
                        limits=limits, egress=egress, image=image or None, secrets=secs)
    return to_wire(req)  # type: ignore[no-any-return]


def find_image(images: List[Image], digest_or_ref: str) -> Optional[Image]:
    """The image of ``images`` with that digest, or pulled by that (canonical) reference."""
    for im in images:
        if digest_or_ref == im.digest or digest_or_ref in im.refs:
            return im
    return None


def exec_body(
    argv: Union[Sequence[str], str],
    *,
    env: Optional[Mapping[str, str]] = None,
    cwd: Optional[str] = None,
    stdin: Union[str, bytes, None] = None,
    timeout: Optional[float] = None,
    background: bool = False,
    tty: bool = False,
    rows: Optional[int] = None,
    cols: Optional[int] = None,
) -> Dict[str, Any]:
    """The JSON of an exec. A string argv runs in ``sh -c``."""
    if isinstance(argv, str):
        argv = ["sh", "-c", argv]
    req = ExecRequest(argv=list(argv), env=dict(env) if env else None, cwd=cwd or None,
                      background=background or None, tty=tty or None, rows=rows, cols=cols)
    if isinstance(stdin, str):
        req.stdin = stdin
    elif stdin is not None:
        try:
            req.stdin = bytes(stdin).decode("utf-8")
        except UnicodeDecodeError:
            req.stdin_base64 = base64.b64encode(bytes(stdin)).decode()
    if timeout:
        req.timeout_seconds = max(1, math.ceil(timeout))
    return to_wire(req)  # type: ignore[no-any-return]


def file_path(p: str, directory: bool = False) -> str:
    """A workspace path as the file routes take it: relative, each segment
    escaped (dot segments too, so the worker refuses them with a reason);
    a directory's ends in "/" ("" is the workspace)."""
    from urllib.parse import quote

    p = p.lstrip("/")
    if directory:
        p = p.rstrip("/")
    if not p:
        return ""
    segs = []
    for s in p.split("/"):
        segs.append("%2E" * len(s) if s and s.strip(".") == "" else quote(s, safe=""))
    out = "/".join(segs)
    return out + "/" if directory else out


def upload_content(data: Data) -> tuple[Any, Dict[str, str]]:
    """The body of an upload and its headers (a regular file's length)."""
    if isinstance(data, str):
        return data.encode(), {}
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data), {}
    headers: Dict[str, str] = {}
    try:
        st = os.fstat(data.fileno())
        import stat

        if stat.S_ISREG(st.st_mode):
            headers["Content-Length"] = str(st.st_size - data.tell())
    except (AttributeError, OSError, ValueError):
        pass
    return iter(lambda: data.read(_CHUNK), b""), headers


def parse_event(line: Union[str, bytes]) -> ExecEvent:
    """One NDJSON line of an output stream."""
    return from_wire(ExecEvent, json.loads(line))


def end_of(ev: ExecEvent) -> None:
    """Raise the error a stream's last event carries."""
    if ev.error is not None:
        raise error_from_wire(200, to_wire(ev.error))


def no_end() -> StreamEndedError:
    return StreamEndedError("the worker's stream ended before the command's exit")


@dataclass
class Collector:
    """Collects a command's output events into a RunResult, calling the
    callbacks with each piece as it arrives."""

    on_stdout: Optional[OutputCallback] = None
    on_stderr: Optional[OutputCallback] = None
    keep: bool = True
    out: List[bytes] = field(default_factory=list)
    err: List[bytes] = field(default_factory=list)
    dropped: int = 0

    def feed(self, ev: ExecEvent) -> None:
        if ev.dropped_bytes and not ev.is_last:
            self.dropped += ev.dropped_bytes
            return
        data = ev.bytes
        if not data:
            return
        stderr = ev.stream == "stderr"
        if self.keep:
            (self.err if stderr else self.out).append(data)
        cb = self.on_stderr if stderr else self.on_stdout
        if cb is not None:
            cb(ev.text)

    def result(self, last: ExecEvent) -> RunResult:
        end_of(last)
        code = last.exit_code
        if code is None and last.process is not None:
            code = last.process.exit_code
        return RunResult(exit_code=code if code is not None else -1, reason=last.reason or None,
                         stdout_bytes=b"".join(self.out), stderr_bytes=b"".join(self.err),
                         dropped_bytes=last.dropped_bytes or self.dropped)


def final_process(last: ExecEvent) -> ProcessInfo:
    end_of(last)
    if last.process is None:
        raise no_end()
    return last.process


def events(lines: Iterator[str]) -> Iterator[ExecEvent]:
    """The events of NDJSON lines, through the last; StreamEndedError when
    the lines stop before it."""
    for line in lines:
        if not line.strip():
            continue
        ev = parse_event(line)
        yield ev
        if ev.is_last:
            return
    raise no_end()


def auth_headers(token: str) -> Dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def ws_url(base: str, path: str) -> str:
    """The WebSocket URL of a path of the worker (ws:// or wss:// as base is http:// or https://)."""
    return "ws" + base[len("http"):] + path if base.startswith("http") else base + path

"""The API's request and answer types, as dataclasses.

Each class names the schema(s) of docs/openapi.yaml it stands for in
``__wire__``; a field's JSON name is its own unless its metadata says
otherwise (``wire``). ``to_wire`` and ``from_wire`` convert; the conformance
test keeps the fields equal to the document's.
"""

from __future__ import annotations

import base64
import dataclasses
import re
import typing
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, ClassVar, Dict, List, Mapping, Optional, Tuple, TypeVar, Union

T = TypeVar("T")

_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")


def parse_time(s: str) -> datetime:
    """An RFC 3339 time as the worker writes it (nanoseconds allowed) -> an aware datetime."""
    m = _TIME.match(s)
    if not m:
        raise ValueError(f"not an RFC 3339 time: {s!r}")
    base, frac, zone = m.groups()
    dt = datetime.strptime(base, "%Y-%m-%dT%H:%M:%S")
    if frac:
        dt = dt.replace(microsecond=int((frac + "000000")[:6]))
    if zone == "Z":
        return dt.replace(tzinfo=timezone.utc)
    sign = 1 if zone[0] == "+" else -1
    return dt.replace(tzinfo=timezone(sign * timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6]))))


def _wire_name(f: dataclasses.Field) -> str:  # type: ignore[type-arg]
    return str(f.metadata.get("wire", f.name))


def wire_fields(cls: type) -> Dict[str, str]:
    """The JSON name of each field of a wire dataclass -> its Python name."""
    return {_wire_name(f): f.name for f in dataclasses.fields(cls) if not f.metadata.get("local")}


_HINTS: Dict[type, Dict[str, Any]] = {}


def _hints(cls: type) -> Dict[str, Any]:
    h = _HINTS.get(cls)
    if h is None:
        h = typing.get_type_hints(cls)
        _HINTS[cls] = h
    return h


def _convert(tp: Any, v: Any) -> Any:
    if v is None:
        return None
    origin = typing.get_origin(tp)
    if origin is Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        for a in args:
            if dataclasses.is_dataclass(a) and isinstance(v, dict):
                return from_wire(a, v)
        return _convert(args[0], v) if len(args) == 1 else v
    if origin in (list, List):
        (item,) = typing.get_args(tp)
        return [_convert(item, x) for x in v]
    if origin in (dict, Dict):
        _, item = typing.get_args(tp)
        return {k: _convert(item, x) for k, x in v.items()}
    if tp is datetime:
        return parse_time(v)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return from_wire(tp, v)
    if tp is float and isinstance(v, int):
        return float(v)
    return v


def from_wire(cls: type[T], obj: Mapping[str, Any]) -> T:
    """Decode a JSON object into the dataclass cls (unknown keys are ignored,
    so a newer worker's additions do not break an older SDK)."""
    hints = _hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        name = _wire_name(f)
        if name in obj and not f.metadata.get("local"):
            kwargs[f.name] = _convert(hints[f.name], obj[name])
    return cls(**kwargs)


def to_wire(obj: Any) -> Any:
    """Encode a wire dataclass (or a value holding them) as JSON, leaving out
    fields that are None."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {}
        for f in dataclasses.fields(obj):
            v = getattr(obj, f.name)
            if v is not None and not f.metadata.get("local"):
                out[_wire_name(f)] = to_wire(v)
        return out
    if isinstance(obj, (list, tuple)):
        return [to_wire(x) for x in obj]
    if isinstance(obj, dict):
        return {k: to_wire(v) for k, v in obj.items()}
    if isinstance(obj, datetime):
        return obj.isoformat()
    return obj


# ---- the sandbox ----------------------------------------------------------


@dataclass
class Limits:
    """Limits a sandbox asks for at create, each within the worker's (0 or
    None: the worker's own)."""

    __wire__: ClassVar[Tuple[str, ...]] = ("RequestLimits",)
    memory_mb: Optional[int] = None
    disk_mb: Optional[int] = None
    pids: Optional[int] = None
    cpu_percent: Optional[int] = None


@dataclass
class EgressRule:
    """An ``allow`` entry with the HTTP methods and path prefixes requests to
    its host are held to (None: any; an empty list is refused). Others are
    refused 403 ``rule-denied`` before the host sees them; see docs/egress.md,
    Methods and paths."""

    __wire__: ClassVar[Tuple[str, ...]] = ("EgressRule",)
    host: str = ""
    methods: Optional[List[str]] = None
    paths: Optional[List[str]] = None


@dataclass
class EgressPolicy:
    """What a sandbox may reach: mode ``none``, ``public`` (less ``deny``) or
    ``allow`` (only ``allow``, less ``deny``); an ``allow`` entry is a host
    pattern or an EgressRule; see docs/egress.md."""

    __wire__: ClassVar[Tuple[str, ...]] = ("EgressPolicy",)
    mode: str = "public"
    allow: Optional[List[Union[str, EgressRule]]] = None
    deny: Optional[List[str]] = None


@dataclass
class BrowserRequest:
    """The object form of a create's ``browser``: start it at create."""

    start: bool = False


@dataclass
class Secret:
    """A credential the sandbox may use but never read: its environment gets a
    placeholder, and the worker's egress proxy puts ``value`` in place of it only
    in HTTPS requests to ``hosts`` (egress policy entries the sandbox's policy
    allows); see docs/egress.md. Its repr never shows the value."""

    __wire__: ClassVar[Tuple[str, ...]] = ("SecretRequest",)
    value: str = field(default="", repr=False)
    hosts: List[str] = field(default_factory=list)


@dataclass
class SecretInfo:
    """What a sandbox's answer shows of a secret: its hosts."""

    __wire__: ClassVar[Tuple[str, ...]] = ("SecretInfo",)
    hosts: List[str] = field(default_factory=list)


@dataclass
class CreateRequest:
    """The body of a create (``Worker.create`` builds it from its arguments)."""

    __wire__: ClassVar[Tuple[str, ...]] = ("CreateRequest",)
    time_box_minutes: Optional[int] = None
    env: Optional[Dict[str, str]] = None
    browser: Union[bool, BrowserRequest, None] = None
    limits: Optional[Limits] = None
    egress: Optional[EgressPolicy] = None
    image: Optional[str] = None
    secrets: Optional[Dict[str, Secret]] = None


@dataclass
class PatchRequest:
    """The body of a PATCH: a new time box, secrets to add or rotate, or both."""

    __wire__: ClassVar[Tuple[str, ...]] = ("PatchRequest",)
    time_box_minutes: Optional[int] = None
    secrets: Optional[Dict[str, Secret]] = None


@dataclass
class SandboxLimits:
    """The limits a sandbox runs under."""

    __wire__: ClassVar[Tuple[str, ...]] = ("Limits",)
    memory_mb: int = 0
    disk_mb: int = 0
    pids: int = 0
    cpu_percent: int = 0
    time_box_minutes: int = 0


@dataclass
class Usage:
    """What a sandbox uses now."""

    __wire__: ClassVar[Tuple[str, ...]] = ("Usage",)
    memory_bytes: int = 0
    memory_peak_bytes: int = 0
    cpu_seconds: float = 0.0
    pids: int = 0
    oom_kills: int = 0
    workspace_bytes: int = 0


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@dataclass
class SandboxInfo:
    """A sandbox as a create, a list or an extend answers it."""

    __wire__: ClassVar[Tuple[str, ...]] = ("Sandbox",)
    id: str = ""
    created_at: datetime = _EPOCH
    expires_at: datetime = _EPOCH
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    egress: EgressPolicy = field(default_factory=EgressPolicy)
    browser: bool = False
    #: The reference the sandbox's image was asked by; None: the host's view.
    image: Optional[str] = None
    #: The digest of the image's manifest (for an index, of this platform's variant).
    image_digest: Optional[str] = None
    secrets: Optional[Dict[str, SecretInfo]] = None
    #: In the answer to a PATCH with secrets only: the placeholder of each
    #: secret it gave, by name.
    secret_placeholders: Optional[Dict[str, str]] = None
    #: ``running``, or ``broken`` once its init stopped answering: every call
    #: but delete then raises SandboxBrokenError.
    state: str = "running"


@dataclass
class SandboxState(SandboxInfo):
    """A sandbox now: its description, its state and usage."""

    __wire__: ClassVar[Tuple[str, ...]] = ("SandboxState",)
    usage: Usage = field(default_factory=Usage)


@dataclass
class WipeReport:
    """A delete's answer: the wipe removed everything of the sandbox and checked."""

    __wire__: ClassVar[Tuple[str, ...]] = ("WipeReport",)
    verified: bool = False
    duration_ms: float = 0.0


# ---- commands -------------------------------------------------------------


@dataclass
class ExecRequest:
    """The body of an exec (``Sandbox.run``/``start``/``terminal`` build it)."""

    __wire__: ClassVar[Tuple[str, ...]] = ("ExecRequest",)
    argv: List[str] = field(default_factory=list)
    env: Optional[Dict[str, str]] = None
    cwd: Optional[str] = None
    stdin: Optional[str] = None
    stdin_base64: Optional[str] = None
    timeout_seconds: Optional[int] = None
    background: Optional[bool] = None
    tty: Optional[bool] = None
    rows: Optional[int] = None
    cols: Optional[int] = None


@dataclass
class ProcessInfo:
    """The record of a command of a sandbox."""

    __wire__: ClassVar[Tuple[str, ...]] = ("Process",)
    pid: int = 0
    argv: List[str] = field(default_factory=list)
    started_at: datetime = _EPOCH
    tty: bool = False
    background: bool = False
    state: str = "running"
    exit_code: Optional[int] = None
    reason: Optional[str] = None

    @property
    def running(self) -> bool:
        """Whether it had not exited when the record was taken."""
        return self.state == "running"


@dataclass
class SignalRequest:
    """The body of a signal."""

    __wire__: ClassVar[Tuple[str, ...]] = ("SignalRequest",)
    signal: str = "TERM"


@dataclass
class ErrorInfo:
    """The ``error`` of an answer or of a stream's last event."""

    __wire__: ClassVar[Tuple[str, ...]] = ("Error",)
    code: str = ""
    message: str = ""
    leftovers: Optional[List[str]] = None


@dataclass
class ExecEvent:
    """One NDJSON line of a command's output: output (``stream`` with
    ``data``/``data_base64``), a drop marker (``dropped_bytes``), or the last
    event (``exit_code``/``reason``, ``process``, or ``error``)."""

    __wire__: ClassVar[Tuple[str, ...]] = ("ExecEvent", "TextEvent", "BytesEvent", "DropEvent", "ExitEvent", "ErrorEvent")
    stream: Optional[str] = None
    data: Optional[str] = None
    data_base64: Optional[str] = None
    dropped_bytes: Optional[int] = None
    exit_code: Optional[int] = None
    reason: Optional[str] = None
    error: Optional[ErrorInfo] = None
    process: Optional[ProcessInfo] = None

    @property
    def is_last(self) -> bool:
        """Whether this event ends its stream."""
        return self.error is not None or self.exit_code is not None or self.process is not None

    @property
    def bytes(self) -> bytes:
        """The output's exact bytes (empty on a drop marker or the last event)."""
        if self.data_base64:
            return base64.b64decode(self.data_base64)
        return (self.data or "").encode()

    @property
    def text(self) -> str:
        """The output as text (bytes that are not UTF-8 replaced)."""
        if self.data_base64:
            return self.bytes.decode("utf-8", "replace")
        return self.data or ""


@dataclass
class AttachMessage:
    """A text message of the attach WebSocket."""

    __wire__: ClassVar[Tuple[str, ...]] = ("AttachMessage",)
    type: str = ""
    rows: Optional[int] = None
    cols: Optional[int] = None
    stream: Optional[str] = None
    bytes: Optional[int] = None
    process: Optional[ProcessInfo] = None
    error: Optional[ErrorInfo] = None


@dataclass
class RunResult:
    """How a command run with ``Sandbox.run`` ended, and its output."""

    exit_code: int
    #: The limit that ended it (timeout, time_box, memory, pids, deleted); None for a normal exit.
    reason: Optional[str] = None
    stdout_bytes: bytes = b""
    stderr_bytes: bytes = b""
    #: Output the worker dropped because the client read too slowly.
    dropped_bytes: int = 0

    @property
    def stdout(self) -> str:
        """Standard output as text (bytes that are not UTF-8 replaced)."""
        return self.stdout_bytes.decode("utf-8", "replace")

    @property
    def stderr(self) -> str:
        """Standard error as text."""
        return self.stderr_bytes.decode("utf-8", "replace")

    @property
    def ok(self) -> bool:
        """Whether it exited 0 by itself."""
        return self.exit_code == 0 and not self.reason


# ---- files ----------------------------------------------------------------


@dataclass
class FileEntry:
    """One entry of a workspace directory."""

    __wire__: ClassVar[Tuple[str, ...]] = ("FileEntry",)
    name: str = ""
    #: file, directory, symlink (the link itself) or other (a fifo, socket or device).
    type: str = "file"
    size: int = 0
    #: Permission bits in octal, e.g. "0644" (``mode_bits`` as an int).
    mode: str = "0644"
    mtime: datetime = _EPOCH

    @property
    def mode_bits(self) -> int:
        """The permission bits as an int."""
        return int(self.mode, 8)

    @property
    def is_dir(self) -> bool:
        """Whether it is a directory."""
        return self.type == "directory"


# ---- the worker -----------------------------------------------------------


@dataclass
class SelfTest:
    """The outcome of a worker's self-test."""

    __wire__: ClassVar[Tuple[str, ...]] = ("SelfTestSummary",)
    passed: bool = False
    checks: Dict[str, bool] = field(default_factory=dict)
    reasons: Optional[List[str]] = None
    checked_at: datetime = _EPOCH
    not_run: Optional[List[str]] = None


@dataclass
class WorkerStatus:
    """The worker's capacity, load and last self-test (None before the first)."""

    __wire__: ClassVar[Tuple[str, ...]] = ("Status",)
    capacity: int = 0
    active: int = 0
    self_test: Optional[SelfTest] = None
    pooled: int = 0
    slots_out_of_use: Optional[List[str]] = None


@dataclass
class BrowserVersion:
    """A browser sandbox's ``/json/version`` (Chromium's own)."""

    __wire__: ClassVar[Tuple[str, ...]] = ("BrowserVersion",)
    browser: str = field(default="", metadata={"wire": "Browser"})
    protocol_version: str = field(default="", metadata={"wire": "Protocol-Version"})
    user_agent: str = field(default="", metadata={"wire": "User-Agent"})
    v8_version: str = field(default="", metadata={"wire": "V8-Version"})
    webkit_version: str = field(default="", metadata={"wire": "WebKit-Version"})
    web_socket_debugger_url: str = field(default="", metadata={"wire": "webSocketDebuggerUrl"})


# ---- ports ------------------------------------------------------------------


@dataclass
class PreviewRequest:
    """How long a preview URL opens the port (seconds; 0: the worker's default, an hour)."""

    __wire__: ClassVar[Tuple[str, ...]] = ("PreviewRequest",)
    ttl_seconds: Optional[int] = None


@dataclass
class Preview:
    """A signed URL that opens one port of one sandbox in a browser (its own origin)."""

    __wire__: ClassVar[Tuple[str, ...]] = ("Preview",)
    url: str = ""
    origin: str = ""
    port: int = 0
    expires_at: datetime = _EPOCH


# ---- images -----------------------------------------------------------------


@dataclass
class ImageRequest:
    """The body of a pull: the reference to pull (a tag is resolved again)."""

    __wire__: ClassVar[Tuple[str, ...]] = ("ImageRequest",)
    image: str = ""


@dataclass
class Image:
    """An image of the worker's store (docs/images.md)."""

    __wire__: ClassVar[Tuple[str, ...]] = ("Image",)
    #: The manifest's digest, ``sha256:…`` (for an index, of this platform's variant).
    digest: str = ""
    #: The references it was pulled by, canonical (``python:3.12`` is ``index.docker.io/library/python:3.12``).
    refs: List[str] = field(default_factory=list)
    #: Bytes its layers take unpacked (layers shared with other images counted in each).
    size: int = 0
    layers: int = 0
    #: e.g. ``linux/amd64``.
    platform: str = ""
    pulled: datetime = _EPOCH
    last_used: datetime = _EPOCH
    #: Sandboxes running on it now; an image in use is never evicted.
    in_use: int = 0


#: Every wire dataclass, for the conformance test.
WIRE_TYPES: Tuple[type, ...] = (
    Limits, EgressRule, EgressPolicy, Secret, SecretInfo, CreateRequest, PatchRequest, SandboxLimits, Usage, SandboxInfo, SandboxState,
    WipeReport, ExecRequest, ProcessInfo, SignalRequest, ErrorInfo, ExecEvent, AttachMessage, FileEntry,
    SelfTest, WorkerStatus, BrowserVersion, PreviewRequest, Preview, ImageRequest, Image,
)

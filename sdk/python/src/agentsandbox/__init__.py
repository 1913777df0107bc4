"""agentsandbox: the Python SDK of the codes-sandbox worker API.

    from agentsandbox import Worker

    with Worker("http://127.0.0.1:8088", token) as w:
        with w.create(time_box_minutes=10, limits={"memory_mb": 512}) as sb:
            r = sb.run(["python3", "-c", "print(1)"])
            print(r.exit_code, r.stdout)

``Worker`` and ``AsyncWorker`` have the same surface; errors are
:class:`APIError` subclasses matched on the API's error codes.
"""

from ._async_client import (
    AsyncArchive,
    AsyncFiles,
    AsyncImages,
    AsyncOutputStream,
    AsyncProcess,
    AsyncSandbox,
    AsyncTerminal,
    AsyncWorker,
)
from ._client import Archive, Files, Images, OutputStream, Process, Sandbox, Terminal, Worker
from ._errors import (
    ERROR_CLASSES,
    AgentSandboxError,
    APIError,
    AtCapacityError,
    BodyTooLargeError,
    BrowserBusyError,
    ConflictError,
    ExistsError,
    HostUnsupportedError,
    ImageCacheFullError,
    ImageInUseError,
    ImageNotAllowedError,
    ImageNotFoundError,
    ImagesUnavailableError,
    ImageUnauthorizedError,
    InternalError,
    InvalidArchiveError,
    InvalidEgressPolicyError,
    InvalidImageError,
    InvalidRequestError,
    IsDirectoryError,
    LimitsUnavailableError,
    MethodNotAllowedError,
    NoBrowserError,
    NoEgressError,
    NoPreviewError,
    NoSelfTestError,
    NotDirectoryError,
    NotEmptyError,
    NotFoundError,
    PathNotFoundError,
    PortClosedError,
    PortFailedError,
    PortTimeoutError,
    PreviewForbiddenError,
    ProcessExitedError,
    SandboxBrokenError,
    ProcessNotFoundError,
    RegistryUnavailableError,
    SandboxNotFoundError,
    StreamEndedError,
    TooManyConnectionsError,
    TransportError,
    UnauthorizedError,
    UnsupportedMediaTypeError,
    WipeUnverifiedError,
    WorkspaceFullError,
)
from ._models import (
    BrowserVersion,
    EgressPolicy,
    EgressRule,
    ExecEvent,
    FileEntry,
    Image,
    Limits,
    Preview,
    ProcessInfo,
    RunResult,
    SandboxInfo,
    SandboxLimits,
    SandboxState,
    Secret,
    SecretInfo,
    SelfTest,
    Usage,
    WipeReport,
    WorkerStatus,
)

__version__ = "0.1.0"

__all__ = [name for name in dir() if not name.startswith("_")]

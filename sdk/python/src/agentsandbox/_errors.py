"""The SDK's exceptions: one small hierarchy, matched on the API's error codes."""

from __future__ import annotations

import json
from typing import Any, Mapping, Optional, Sequence


class AgentSandboxError(Exception):
    """Every error the SDK raises."""


class TransportError(AgentSandboxError):
    """No answer arrived: the worker could not be reached, or the connection broke."""


class StreamEndedError(AgentSandboxError):
    """A stream (a command's output, a terminal) ended before its last event."""


class APIError(AgentSandboxError):
    """An error answer of the worker: its HTTP status and ``{"error": {code, message}}``.

    Catch a subclass to match a code (``except SandboxNotFoundError``); never
    match the message, which is for a person.
    """

    #: The API's error codes this class stands for (the first is its own).
    codes: Sequence[str] = ()

    def __init__(
        self,
        message: str,
        *,
        status: int = 0,
        code: str = "",
        leftovers: Optional[Sequence[str]] = None,
        retry_after: Optional[float] = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}" if code else f"{status}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.leftovers = list(leftovers or [])
        self.retry_after = retry_after


class InvalidRequestError(APIError):
    """400: the request is wrong as given; the message says what to fix."""

    codes = ("invalid_request",)


class InvalidEgressPolicyError(InvalidRequestError):
    """400: the egress policy names an entry the worker cannot take."""

    codes = ("invalid_egress_policy",)


class NoEgressError(InvalidRequestError):
    """400: the worker has no egress proxy; create with egress mode ``none``."""

    codes = ("no_egress",)


class IsDirectoryError(InvalidRequestError):
    """400: a file operation on a directory."""

    codes = ("is_directory",)


class NotDirectoryError(InvalidRequestError):
    """400: a directory operation on a file (or a file on the path)."""

    codes = ("not_directory",)


class InvalidArchiveError(InvalidRequestError):
    """400: the archive was refused (the message names the entry); nothing was written."""

    codes = ("invalid_archive",)


class NoBrowserError(InvalidRequestError):
    """400: no browser on this worker, or the sandbox was created without one."""

    codes = ("no_browser",)


class ImageNotAllowedError(InvalidRequestError):
    """400: the image's registry is not one the worker pulls from (its ``--image-registry``)."""

    codes = ("image_not_allowed",)


class InvalidImageError(InvalidRequestError):
    """400: a bad image reference or image, or no variant for the worker's platform."""

    codes = ("invalid_image",)


class PreviewForbiddenError(APIError):
    """403 (the preview listener's): the preview link expired, is altered, or is another sandbox's or port's."""

    codes = ("preview_forbidden",)


class UnauthorizedError(APIError):
    """401: the worker refused the token."""

    codes = ("unauthorized",)


class ImageUnauthorizedError(APIError):
    """403: the registry refused the worker's credentials for the image (the operator's ``--image-auth-file``)."""

    codes = ("image_unauthorized",)


class NotFoundError(APIError):
    """404: no such thing (the subclasses say which)."""

    codes = ("not_found", "no_route")


class SandboxNotFoundError(NotFoundError):
    """404: no such sandbox (deleted, or its time box ended)."""

    codes = ("sandbox_not_found",)


class PathNotFoundError(NotFoundError):
    """404: no such file or directory in the workspace."""

    codes = ("file_not_found",)


class ProcessNotFoundError(NotFoundError):
    """404: no such process in the sandbox (or it has exited)."""

    codes = ("process_not_found",)


class ImageNotFoundError(NotFoundError):
    """404: the registry has no such repository, tag or digest, or the worker holds no such image."""

    codes = ("image_not_found",)


class MethodNotAllowedError(APIError):
    """405: the route does not take this method."""

    codes = ("method_not_allowed",)


class ConflictError(APIError):
    """409: something is in the way (the subclasses say what)."""

    codes = ()


class ExistsError(ConflictError):
    """409: a file is where a directory should be, or the other way round."""

    codes = ("exists",)


class NotEmptyError(ConflictError):
    """409: a directory with entries, removed without ``recursive``."""

    codes = ("not_empty",)


class ProcessExitedError(ConflictError):
    """409: the process has exited, so it takes no signal or stdin; its record says how it ended."""

    codes = ("process_exited",)


class SandboxBrokenError(ConflictError):
    """409: the sandbox's init stopped answering, so it takes no more calls; delete it and create another."""

    codes = ("sandbox_broken",)


class BrowserBusyError(ConflictError):
    """409: another connection drives the sandbox's browser (one per sandbox)."""

    codes = ("browser_busy",)


class ImageInUseError(ConflictError):
    """409: a sandbox runs on the image, so it is not removed."""

    codes = ("image_in_use",)


class BodyTooLargeError(APIError):
    """413: the body is larger than the worker takes."""

    codes = ("body_too_large",)


class UnsupportedMediaTypeError(APIError):
    """415: the body's Content-Type is not one the route takes."""

    codes = ("unsupported_media_type",)


class AtCapacityError(APIError):
    """429: every sandbox slot is in use; ``retry_after`` says when to retry."""

    codes = ("at_capacity",)


class TooManyConnectionsError(APIError):
    """429: the sandbox has as many exchanges with its ports open as the worker allows; ``retry_after``."""

    codes = ("too_many_connections",)


class InternalError(APIError):
    """500: the worker failed; its log says why."""

    codes = ("internal",)


class WipeUnverifiedError(InternalError):
    """500: the sandbox was deleted but its wipe could not be verified (see ``leftovers``)."""

    codes = ("wipe_unverified",)


class NoSelfTestError(APIError):
    """501: the worker cannot run its self-test on demand."""

    codes = ("no_selftest",)


class NoPreviewError(APIError):
    """501: the worker serves no previews (it was started without ``--preview-listen``)."""

    codes = ("no_preview",)


class PortClosedError(APIError):
    """502: nothing listens on the port inside the sandbox (the message names it)."""

    codes = ("port_closed",)


class PortFailedError(APIError):
    """502: the sandbox's server broke the exchange (closed, not HTTP/1.1, or over a bound)."""

    codes = ("port_failed",)


class PortTimeoutError(APIError):
    """504: the sandbox's server did not answer in time, or the exchange passed a time bound."""

    codes = ("port_timeout",)


class RegistryUnavailableError(APIError):
    """502: the image's registry did not answer in time, answered 429 or 5xx, or is at an address the worker refuses."""

    codes = ("registry_unavailable",)


class LimitsUnavailableError(APIError):
    """503: the worker cannot enforce sandbox limits; the message names the fix."""

    codes = ("limits_unavailable",)


class HostUnsupportedError(APIError):
    """503: the host (or the worker's container) cannot run sandboxes; the message names each problem and its fix."""

    codes = ("host_unsupported",)


class ImagesUnavailableError(APIError):
    """503: this worker cannot start image sandboxes (it has no image store)."""

    codes = ("images_unavailable",)


class WorkspaceFullError(APIError):
    """507: the sandbox's disk or file limit is reached; nothing was written."""

    codes = ("workspace_full",)


class ImageCacheFullError(APIError):
    """507: the image does not fit the worker's image cache beside the images in use, or the store's disk is full."""

    codes = ("image_cache_full",)


def _classes() -> Mapping[str, type[APIError]]:
    table: dict[str, type[APIError]] = {}
    todo: list[type[APIError]] = [APIError]
    while todo:
        cls = todo.pop()
        for code in cls.codes:
            table[code] = cls
        todo.extend(cls.__subclasses__())
    return table


#: The one table from an API error code to its exception class.
ERROR_CLASSES: Mapping[str, type[APIError]] = _classes()

_BY_STATUS: Mapping[int, type[APIError]] = {
    400: InvalidRequestError,
    401: UnauthorizedError,
    404: NotFoundError,
    405: MethodNotAllowedError,
    409: ConflictError,
    413: BodyTooLargeError,
    415: UnsupportedMediaTypeError,
    429: AtCapacityError,
    500: InternalError,
    501: NoSelfTestError,
    503: LimitsUnavailableError,
    507: WorkspaceFullError,
}


def error_from_wire(status: int, error: Mapping[str, Any], retry_after: Optional[float] = None) -> APIError:
    """The exception of an ``Error`` object (an answer's or a stream's last event)."""
    code = str(error.get("code", ""))
    cls = ERROR_CLASSES.get(code, APIError)
    return cls(
        str(error.get("message", "")),
        status=status,
        code=code,
        leftovers=error.get("leftovers") or None,
        retry_after=retry_after,
    )


def error_from_answer(status: int, body: bytes, retry_after_header: Optional[str] = None) -> APIError:
    """The exception of a non-2xx answer: its ``{"error": {...}}``, or (from
    something that is not the worker, such as a proxy) its status and text."""
    retry_after: Optional[float] = None
    if retry_after_header and retry_after_header.strip().isdigit():
        retry_after = float(retry_after_header.strip())
    try:
        doc = json.loads(body)
    except ValueError:
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("error"), dict) and doc["error"].get("code"):
        return error_from_wire(status, doc["error"], retry_after)
    cls = _BY_STATUS.get(status, APIError)
    text = body[:200].decode("utf-8", "replace").strip()
    return cls(text or f"HTTP {status}", status=status, retry_after=retry_after)

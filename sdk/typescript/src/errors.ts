// The SDK's errors: one small hierarchy, matched on the API's error codes
// (never on messages, which are for a person).

/** Every error the SDK throws. */
export class AgentSandboxError extends Error {
  override name = "AgentSandboxError";
}

/** No answer arrived: the worker could not be reached, or the connection broke. */
export class TransportError extends AgentSandboxError {
  override name = "TransportError";
}

/** A stream (a command's output, a terminal) ended before its last event. */
export class StreamEndedError extends AgentSandboxError {
  override name = "StreamEndedError";
}

/** What an APIError is made of. */
export interface APIErrorInit {
  status: number;
  code: string;
  leftovers?: string[];
  retryAfter?: number;
}

/**
 * An error answer of the worker: its HTTP status and `{"error":{code,message}}`.
 * Catch a subclass (`err instanceof SandboxNotFoundError`) or compare `code`.
 */
export class APIError extends AgentSandboxError {
  /** The API codes this class stands for (the first is its own). */
  static codes: readonly string[] = [];
  override name = "APIError";
  readonly status: number;
  readonly code: string;
  /** With wipe_unverified: what the wipe could not remove. */
  readonly leftovers: string[];
  /** Seconds to wait before retrying (at_capacity), when the worker said. */
  readonly retryAfter: number | undefined;

  constructor(message: string, init: APIErrorInit) {
    super(init.code ? `${init.status} ${init.code}: ${message}` : `${init.status}: ${message}`);
    this.status = init.status;
    this.code = init.code;
    this.leftovers = init.leftovers ?? [];
    this.retryAfter = init.retryAfter;
  }
}

function kind(name: string, base: typeof APIError, codes: string[]): typeof APIError {
  const cls = class extends base {
    static override codes = codes;
    override name = name;
  };
  Object.defineProperty(cls, "name", { value: name });
  return cls;
}

/** 400 invalid_request: the request is wrong as given; the message says what to fix. */
export const InvalidRequestError = kind("InvalidRequestError", APIError, ["invalid_request"]);
/** 400 invalid_egress_policy: the policy names an entry the worker cannot take. */
export const InvalidEgressPolicyError = kind("InvalidEgressPolicyError", InvalidRequestError, ["invalid_egress_policy"]);
/** 400 no_egress: the worker has no egress proxy; create with egress mode none. */
export const NoEgressError = kind("NoEgressError", InvalidRequestError, ["no_egress"]);
/** 400 is_directory: a file operation on a directory. */
export const IsDirectoryError = kind("IsDirectoryError", InvalidRequestError, ["is_directory"]);
/** 400 not_directory: a directory operation on a file. */
export const NotDirectoryError = kind("NotDirectoryError", InvalidRequestError, ["not_directory"]);
/** 400 invalid_archive: the archive was refused (the message names the entry); nothing written. */
export const InvalidArchiveError = kind("InvalidArchiveError", InvalidRequestError, ["invalid_archive"]);
/** 400 no_browser: no browser on this worker, or the sandbox has none. */
export const NoBrowserError = kind("NoBrowserError", InvalidRequestError, ["no_browser"]);
/** 400 image_not_allowed: the image's registry is not one the worker pulls from (its --image-registry). */
export const ImageNotAllowedError = kind("ImageNotAllowedError", InvalidRequestError, ["image_not_allowed"]);
/** 400 invalid_image: a bad image reference or image, or no variant for the worker's platform. */
export const InvalidImageError = kind("InvalidImageError", InvalidRequestError, ["invalid_image"]);
/** 401 unauthorized: the token was refused. */
export const UnauthorizedError = kind("UnauthorizedError", APIError, ["unauthorized"]);
/** 403 image_unauthorized: the registry refused the worker's credentials for the image (the operator's --image-auth-file). */
export const ImageUnauthorizedError = kind("ImageUnauthorizedError", APIError, ["image_unauthorized"]);
/** 403 preview_forbidden (the preview listener's): the link expired, is altered, or is another sandbox's or port's. */
export const PreviewForbiddenError = kind("PreviewForbiddenError", APIError, ["preview_forbidden"]);
/** 404: no such thing (the subclasses say which). */
export const NotFoundError = kind("NotFoundError", APIError, ["not_found", "no_route"]);
/** 404 sandbox_not_found: deleted, or its time box ended. */
export const SandboxNotFoundError = kind("SandboxNotFoundError", NotFoundError, ["sandbox_not_found"]);
/** 404 file_not_found: no such file or directory in the workspace. */
export const PathNotFoundError = kind("PathNotFoundError", NotFoundError, ["file_not_found"]);
/** 404 process_not_found: no such process (or it has exited). */
export const ProcessNotFoundError = kind("ProcessNotFoundError", NotFoundError, ["process_not_found"]);
/** 404 image_not_found: the registry has no such repository, tag or digest, or the worker holds no such image. */
export const ImageNotFoundError = kind("ImageNotFoundError", NotFoundError, ["image_not_found"]);
/** 405 method_not_allowed. */
export const MethodNotAllowedError = kind("MethodNotAllowedError", APIError, ["method_not_allowed"]);
/** 409: something is in the way. */
export const ConflictError = kind("ConflictError", APIError, []);
/** 409 exists: a file where a directory should be, or the other way round. */
export const ExistsError = kind("ExistsError", ConflictError, ["exists"]);
/** 409 not_empty: a directory with entries, removed without recursive. */
export const NotEmptyError = kind("NotEmptyError", ConflictError, ["not_empty"]);
/** 409 process_exited: the process has exited, so it takes no signal or stdin. */
export const ProcessExitedError = kind("ProcessExitedError", ConflictError, ["process_exited"]);
/** 409 sandbox_broken: the sandbox's init stopped answering, so it takes no more calls; delete it. */
export const SandboxBrokenError = kind("SandboxBrokenError", ConflictError, ["sandbox_broken"]);
/** 409 browser_busy: another connection drives the sandbox's browser. */
export const BrowserBusyError = kind("BrowserBusyError", ConflictError, ["browser_busy"]);
/** 409 image_in_use: a sandbox runs on the image, so it is not removed. */
export const ImageInUseError = kind("ImageInUseError", ConflictError, ["image_in_use"]);
/** 413 body_too_large. */
export const BodyTooLargeError = kind("BodyTooLargeError", APIError, ["body_too_large"]);
/** 415 unsupported_media_type. */
export const UnsupportedMediaTypeError = kind("UnsupportedMediaTypeError", APIError, ["unsupported_media_type"]);
/** 429 at_capacity: every slot is in use; see retryAfter. */
export const AtCapacityError = kind("AtCapacityError", APIError, ["at_capacity"]);
/** 429 too_many_connections: the sandbox has as many exchanges with its ports open as the worker allows. */
export const TooManyConnectionsError = kind("TooManyConnectionsError", APIError, ["too_many_connections"]);
/** 500 internal: the worker failed; its log says why. */
export const InternalError = kind("InternalError", APIError, ["internal"]);
/** 500 wipe_unverified: deleted, but the wipe could not be verified (see leftovers). */
export const WipeUnverifiedError = kind("WipeUnverifiedError", InternalError, ["wipe_unverified"]);
/** 501 no_selftest: the worker cannot run its self-test on demand. */
export const NoSelfTestError = kind("NoSelfTestError", APIError, ["no_selftest"]);
/** 501 no_preview: the worker serves no previews (started without --preview-listen). */
export const NoPreviewError = kind("NoPreviewError", APIError, ["no_preview"]);
/** 502 port_closed: nothing listens on the port inside the sandbox (the message names it). */
export const PortClosedError = kind("PortClosedError", APIError, ["port_closed"]);
/** 502 port_failed: the sandbox's server broke the exchange (closed, not HTTP/1.1, or over a bound). */
export const PortFailedError = kind("PortFailedError", APIError, ["port_failed"]);
/** 504 port_timeout: the sandbox's server did not answer in time, or the exchange passed a time bound. */
export const PortTimeoutError = kind("PortTimeoutError", APIError, ["port_timeout"]);
/** 502 registry_unavailable: the image's registry did not answer in time, answered 429 or 5xx, or is at an address the worker refuses. */
export const RegistryUnavailableError = kind("RegistryUnavailableError", APIError, ["registry_unavailable"]);
/** 503 limits_unavailable: the worker cannot enforce sandbox limits. */
export const LimitsUnavailableError = kind("LimitsUnavailableError", APIError, ["limits_unavailable"]);
/** 503 host_unsupported: the host (or the worker's container) cannot run sandboxes; the message names each problem and its fix. */
export const HostUnsupportedError = kind("HostUnsupportedError", APIError, ["host_unsupported"]);
/** 503 images_unavailable: this worker cannot start image sandboxes (it has no image store). */
export const ImagesUnavailableError = kind("ImagesUnavailableError", APIError, ["images_unavailable"]);
/** 507 workspace_full: the disk or file limit is reached; nothing written. */
export const WorkspaceFullError = kind("WorkspaceFullError", APIError, ["workspace_full"]);
/** 507 image_cache_full: the image does not fit the worker's image cache beside the images in use, or the store's disk is full. */
export const ImageCacheFullError = kind("ImageCacheFullError", APIError, ["image_cache_full"]);

const ALL = [
  InvalidRequestError, InvalidEgressPolicyError, NoEgressError, IsDirectoryError, NotDirectoryError,
  InvalidArchiveError, NoBrowserError, UnauthorizedError, NotFoundError, SandboxNotFoundError, PathNotFoundError,
  ProcessNotFoundError, MethodNotAllowedError, ConflictError, ExistsError, NotEmptyError, ProcessExitedError, SandboxBrokenError,
  BrowserBusyError, BodyTooLargeError, UnsupportedMediaTypeError, AtCapacityError, InternalError, WipeUnverifiedError,
  NoSelfTestError, LimitsUnavailableError, WorkspaceFullError, PreviewForbiddenError, TooManyConnectionsError,
  NoPreviewError, PortClosedError, PortFailedError, PortTimeoutError, ImageNotAllowedError, InvalidImageError,
  ImageUnauthorizedError, ImageNotFoundError, ImageInUseError, RegistryUnavailableError, HostUnsupportedError,
  ImagesUnavailableError, ImageCacheFullError,
];

/** The one table from an API error code to its class. */
export const ERROR_CLASSES: ReadonlyMap<string, typeof APIError> = new Map(
  ALL.flatMap((cls) => cls.codes.map((code) => [code, cls] as const)),
);

const BY_STATUS: ReadonlyMap<number, typeof APIError> = new Map([
  [400, InvalidRequestError], [401, UnauthorizedError], [404, NotFoundError], [405, MethodNotAllowedError],
  [409, ConflictError], [413, BodyTooLargeError], [415, UnsupportedMediaTypeError], [429, AtCapacityError],
  [500, InternalError], [501, NoSelfTestError], [503, LimitsUnavailableError], [507, WorkspaceFullError],
]);

/** The error object of an answer or of a stream's last event. */
export interface WireError {
  code: string;
  message: string;
  leftovers?: string[];
}

/** The APIError of an Error object. */
export function errorFromWire(status: number, e: Partial<WireError>, retryAfter?: number): APIError {
  const code = e.code ?? "";
  const Cls = ERROR_CLASSES.get(code) ?? APIError;
  return new Cls(e.message ?? "", { status, code, leftovers: e.leftovers ?? [], retryAfter });
}

/** The APIError of a non-2xx answer: its `{"error":{...}}`, or (from something
 * that is not the worker, such as a proxy) its status and text. */
export function errorFromAnswer(status: number, body: Buffer, retryAfterHeader?: string): APIError {
  const ra = retryAfterHeader && /^\d+$/.test(retryAfterHeader.trim()) ? Number(retryAfterHeader) : undefined;
  try {
    const doc = JSON.parse(body.toString("utf8"));
    if (doc && typeof doc.error === "object" && doc.error?.code) return errorFromWire(status, doc.error, ra);
  } catch {
    // not the worker's JSON
  }
  const Cls = BY_STATUS.get(status) ?? APIError;
  const text = body.subarray(0, 200).toString("utf8").trim();
  return new Cls(text || `HTTP ${status}`, { status, code: "", retryAfter: ra });
}

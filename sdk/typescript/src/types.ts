// The API's request and answer types, with the API's own (snake_case) field
// names, as JSON carries them. WIRE_FIELDS lists each type's fields for the
// conformance test; tsc checks that each list is exactly its interface's keys.

/** Limits a sandbox asks for at create, each within the worker's (absent or 0: the worker's). */
export interface RequestLimits {
  memory_mb?: number;
  disk_mb?: number;
  pids?: number;
  cpu_percent?: number;
}

/**
 * An `allow` entry with the HTTP methods and path prefixes requests to its host are held to (absent: any;
 * an empty list is refused). Others are refused 403 `rule-denied` before the host sees them (docs/egress.md,
 * Methods and paths).
 */
export interface EgressRule {
  host: string;
  methods?: string[];
  paths?: string[];
}

/** What a sandbox may reach through the egress proxy (docs/egress.md); an `allow` entry is a host pattern or an EgressRule. */
export interface EgressPolicy {
  mode: "none" | "public" | "allow";
  allow?: (string | EgressRule)[];
  deny?: string[];
}

/**
 * A credential the sandbox may use but never read: its environment gets a placeholder, and the worker's
 * egress proxy puts `value` in place of it only in HTTPS requests to `hosts` (docs/egress.md).
 */
export interface SecretRequest {
  value: string;
  hosts: string[];
}

/** What a sandbox's answer shows of a secret: its hosts. */
export interface SecretInfo {
  hosts: string[];
}

/** The body of a create. `browser`: true, or {start: true} to start it at create. */
export interface CreateRequest {
  time_box_minutes?: number;
  env?: Record<string, string>;
  secrets?: Record<string, SecretRequest>;
  browser?: boolean | { start?: boolean };
  limits?: RequestLimits;
  egress?: EgressPolicy;
  /** The image to run on instead of the host's view (a reference from a registry the worker allows). */
  image?: string;
}

/** The body of a PATCH: a new time box, secrets to add or rotate (docs/egress.md), or both. */
export interface PatchRequest {
  time_box_minutes?: number;
  secrets?: Record<string, SecretRequest>;
}

/** The limits a sandbox runs under. */
export interface Limits {
  memory_mb: number;
  disk_mb: number;
  pids: number;
  cpu_percent: number;
  time_box_minutes: number;
}

/** What a sandbox uses now. */
export interface Usage {
  memory_bytes: number;
  memory_peak_bytes: number;
  cpu_seconds: number;
  pids: number;
  oom_kills: number;
  workspace_bytes: number;
}

/** A sandbox as a create, a list or an extend answers it (times in RFC 3339). */
export interface SandboxInfo {
  id: string;
  created_at: string;
  expires_at: string;
  limits: Limits;
  egress: EgressPolicy;
  browser: boolean;
  /** The reference the sandbox's image was asked by (absent: the host's view). */
  image?: string;
  /** The digest of the image's manifest (for an index, of this platform's variant). */
  image_digest?: string;
  /** Its secrets' names and hosts, never a value (absent: none). */
  secrets?: Record<string, SecretInfo>;
  /** In the answer to a PATCH with secrets only: the placeholder of each secret it gave, by name. */
  secret_placeholders?: Record<string, string>;
  /** "broken" once its init stopped answering: every call but delete throws SandboxBrokenError. */
  state: "running" | "broken";
}

/** A sandbox now: its description, its state and usage. */
export interface SandboxState extends SandboxInfo {
  usage: Usage;
}

/** A delete's answer: the wipe removed everything of the sandbox and checked. */
export interface WipeReport {
  verified: boolean;
  duration_ms: number;
}

/** The body of an exec. */
export interface ExecRequest {
  argv: string[];
  env?: Record<string, string>;
  cwd?: string;
  stdin?: string;
  stdin_base64?: string;
  timeout_seconds?: number;
  background?: boolean;
  tty?: boolean;
  rows?: number;
  cols?: number;
}

/** The record of a command of a sandbox. */
export interface ProcessInfo {
  pid: number;
  argv: string[];
  started_at: string;
  tty: boolean;
  background: boolean;
  state: "running" | "exited";
  exit_code?: number;
  reason?: string;
}

/** The body of a signal. */
export interface SignalRequest {
  signal: string;
}

/** The `error` of an answer or of a stream's last event. */
export interface ErrorInfo {
  code: string;
  message: string;
  leftovers?: string[];
}

/** One NDJSON line of a command's output: output, a drop marker, or the last event. */
export interface ExecEvent {
  stream?: "stdout" | "stderr";
  data?: string;
  data_base64?: string;
  dropped_bytes?: number;
  exit_code?: number;
  reason?: string;
  error?: ErrorInfo;
  process?: ProcessInfo;
}

/** A text message of the attach WebSocket. */
export interface AttachMessage {
  type: "resize" | "eof" | "dropped" | "exit" | "error";
  rows?: number;
  cols?: number;
  stream?: "stdout" | "stderr";
  bytes?: number;
  process?: ProcessInfo;
  error?: ErrorInfo;
}

/** One entry of a workspace directory. */
export interface FileEntry {
  name: string;
  type: "file" | "directory" | "symlink" | "other";
  size: number;
  /** Permission bits in octal, e.g. "0644". */
  mode: string;
  mtime: string;
}

/** The outcome of a worker's self-test. */
export interface SelfTest {
  passed: boolean;
  checks: Record<string, boolean>;
  reasons: string[] | null;
  checked_at: string;
  not_run?: string[];
}

/** The worker's capacity, load and last self-test (null before the first). */
export interface WorkerStatus {
  capacity: number;
  active: number;
  self_test: SelfTest | null;
  pooled: number;
  slots_out_of_use?: string[];
}

/** A browser sandbox's /json/version (Chromium's own field names). */
export interface BrowserVersion {
  Browser: string;
  "Protocol-Version": string;
  "User-Agent": string;
  "V8-Version": string;
  "WebKit-Version": string;
  webSocketDebuggerUrl: string;
}

/** The body of POST …/ports/{port}/preview. */
export interface PreviewRequest {
  /** How long the URL opens the port: 1..86400 seconds (absent: an hour). */
  ttl_seconds?: number;
}

/** A signed URL that opens one port of one sandbox in a browser (its own origin). */
export interface Preview {
  url: string;
  origin: string;
  port: number;
  expires_at: string;
}

/** The body of POST /v1/images: the reference to pull (a tag is resolved again). */
export interface ImageRequest {
  image: string;
}

/** An image of the worker's store (docs/images.md; times in RFC 3339). */
export interface Image {
  /** The manifest's digest, sha256:… (for an index, of this platform's variant). */
  digest: string;
  /** The references it was pulled by, canonical (python:3.12 is index.docker.io/library/python:3.12). */
  refs: string[];
  /** Bytes its layers take unpacked (layers shared with other images counted in each). */
  size: number;
  layers: number;
  /** e.g. linux/amd64. */
  platform: string;
  pulled: string;
  last_used: string;
  /** Sandboxes running on it now; an image in use is never evicted. */
  in_use: number;
}

type Keys<T> = { readonly [K in keyof Required<T>]: true };

function keys<T>(k: Keys<T>): string[] {
  return Object.keys(k);
}

/** Each wire type's fields, by the schema(s) of docs/openapi.yaml it stands for. */
export const WIRE_FIELDS: ReadonlyArray<{ type: string; schemas: string[]; fields: string[] }> = [
  { type: "RequestLimits", schemas: ["RequestLimits"], fields: keys<RequestLimits>({ memory_mb: true, disk_mb: true, pids: true, cpu_percent: true }) },
  { type: "EgressPolicy", schemas: ["EgressPolicy"], fields: keys<EgressPolicy>({ mode: true, allow: true, deny: true }) },
  { type: "EgressRule", schemas: ["EgressRule"], fields: keys<EgressRule>({ host: true, methods: true, paths: true }) },
  {
    type: "CreateRequest", schemas: ["CreateRequest"],
    fields: keys<CreateRequest>({ time_box_minutes: true, env: true, secrets: true, browser: true, limits: true, egress: true, image: true }),
  },
  { type: "SecretRequest", schemas: ["SecretRequest"], fields: keys<SecretRequest>({ value: true, hosts: true }) },
  { type: "SecretInfo", schemas: ["SecretInfo"], fields: keys<SecretInfo>({ hosts: true }) },
  { type: "PatchRequest", schemas: ["PatchRequest"], fields: keys<PatchRequest>({ time_box_minutes: true, secrets: true }) },
  {
    type: "Limits", schemas: ["Limits"],
    fields: keys<Limits>({ memory_mb: true, disk_mb: true, pids: true, cpu_percent: true, time_box_minutes: true }),
  },
  {
    type: "Usage", schemas: ["Usage"],
    fields: keys<Usage>({ memory_bytes: true, memory_peak_bytes: true, cpu_seconds: true, pids: true, oom_kills: true, workspace_bytes: true }),
  },
  {
    type: "SandboxInfo", schemas: ["Sandbox"],
    fields: keys<SandboxInfo>({
      id: true, created_at: true, expires_at: true, limits: true, egress: true, browser: true, image: true, image_digest: true, secrets: true,
      secret_placeholders: true, state: true,
    }),
  },
  {
    type: "SandboxState", schemas: ["SandboxState"],
    fields: keys<SandboxState>({
      id: true, created_at: true, expires_at: true, limits: true, egress: true, browser: true, image: true, image_digest: true, secrets: true,
      secret_placeholders: true, state: true, usage: true,
    }),
  },
  { type: "WipeReport", schemas: ["WipeReport"], fields: keys<WipeReport>({ verified: true, duration_ms: true }) },
  {
    type: "ExecRequest", schemas: ["ExecRequest"],
    fields: keys<ExecRequest>({
      argv: true, env: true, cwd: true, stdin: true, stdin_base64: true, timeout_seconds: true, background: true, tty: true, rows: true, cols: true,
    }),
  },
  {
    type: "ProcessInfo", schemas: ["Process"],
    fields: keys<ProcessInfo>({ pid: true, argv: true, started_at: true, tty: true, background: true, state: true, exit_code: true, reason: true }),
  },
  { type: "SignalRequest", schemas: ["SignalRequest"], fields: keys<SignalRequest>({ signal: true }) },
  { type: "ErrorInfo", schemas: ["Error"], fields: keys<ErrorInfo>({ code: true, message: true, leftovers: true }) },
  {
    type: "ExecEvent", schemas: ["ExecEvent", "TextEvent", "BytesEvent", "DropEvent", "ExitEvent", "ErrorEvent"],
    fields: keys<ExecEvent>({
      stream: true, data: true, data_base64: true, dropped_bytes: true, exit_code: true, reason: true, error: true, process: true,
    }),
  },
  {
    type: "AttachMessage", schemas: ["AttachMessage"],
    fields: keys<AttachMessage>({ type: true, rows: true, cols: true, stream: true, bytes: true, process: true, error: true }),
  },
  { type: "FileEntry", schemas: ["FileEntry"], fields: keys<FileEntry>({ name: true, type: true, size: true, mode: true, mtime: true }) },
  {
    type: "SelfTest", schemas: ["SelfTestSummary"],
    fields: keys<SelfTest>({ passed: true, checks: true, reasons: true, checked_at: true, not_run: true }),
  },
  {
    type: "WorkerStatus", schemas: ["Status"],
    fields: keys<WorkerStatus>({ capacity: true, active: true, self_test: true, pooled: true, slots_out_of_use: true }),
  },
  { type: "PreviewRequest", schemas: ["PreviewRequest"], fields: keys<PreviewRequest>({ ttl_seconds: true }) },
  { type: "Preview", schemas: ["Preview"], fields: keys<Preview>({ url: true, origin: true, port: true, expires_at: true }) },
  { type: "ImageRequest", schemas: ["ImageRequest"], fields: keys<ImageRequest>({ image: true }) },
  {
    type: "Image", schemas: ["Image"],
    fields: keys<Image>({ digest: true, refs: true, size: true, layers: true, platform: true, pulled: true, last_used: true, in_use: true }),
  },
  {
    type: "BrowserVersion", schemas: ["BrowserVersion"],
    fields: keys<BrowserVersion>({
      Browser: true, "Protocol-Version": true, "User-Agent": true, "V8-Version": true, "WebKit-Version": true, webSocketDebuggerUrl: true,
    }),
  },
];

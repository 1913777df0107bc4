// The client: Worker, and its handles Sandbox, Process, Terminal, Files, Archive.

import type http from "node:http";
import { Readable } from "node:stream";

import WebSocket from "ws";

import { APIError, SandboxNotFoundError, StreamEndedError, TransportError, errorFromWire } from "./errors.js";
import { type Body, type CallOptions, Transport, eventBytes, isLast, readAll, throwIfError } from "./http.js";
import { filePath, routes } from "./routes.js";
import type {
  AttachMessage, BrowserVersion, CreateRequest, EgressPolicy, ExecEvent, ExecRequest, FileEntry, Image, ImageRequest, PatchRequest, Preview, PreviewRequest,
  ProcessInfo, RequestLimits, SandboxInfo, SandboxState, SecretRequest, SelfTest, SignalRequest, Usage, WipeReport, WorkerStatus,
} from "./types.js";

/** How to reach a worker. */
export interface WorkerOptions {
  /** The worker's base URL, e.g. http://127.0.0.1:8088. */
  url: string;
  /** Its API token (sent as a Bearer credential, to url only: redirects are never followed). */
  token: string;
  /** How long a call waits for an answer to begin (default 60 s); a streamed answer may then run on. */
  timeoutMs?: number;
  /** An http(s).Agent of your own (default: one that keeps connections alive). */
  agent?: http.Agent;
}

/** The settings of a new sandbox (CreateRequest, with browser: "start" for {start: true}). */
export interface CreateOptions extends CallOptions {
  time_box_minutes?: number;
  limits?: RequestLimits;
  egress?: EgressPolicy | EgressPolicy["mode"];
  env?: Record<string, string>;
  /** By variable name: the sandbox gets a placeholder, the proxy puts the value in for those hosts only (docs/egress.md). */
  secrets?: Record<string, SecretRequest>;
  browser?: boolean | "start";
  /** The image to run on instead of the host's view: a reference (registry.example/team/py:3.12,
   * or …@sha256:…) from a registry the worker allows, pulled first when the worker does not hold
   * it; not with browser. ImageNotAllowedError (images off, or a registry not allowed),
   * InvalidImageError, ImageNotFoundError, ImageUnauthorizedError, RegistryUnavailableError,
   * ImageCacheFullError, ImagesUnavailableError. */
  image?: string;
}

/** How to run a command. */
export interface RunOptions extends CallOptions {
  /** Its whole standard input. */
  stdin?: string | Uint8Array;
  env?: Record<string, string>;
  /** Working directory relative to /workspace. */
  cwd?: string;
  /** Ends the command (not the sandbox) after this many seconds. */
  timeoutSeconds?: number;
  /** Each piece of standard output as it arrives. */
  onStdout?: (text: string) => void;
  /** Each piece of standard error as it arrives. */
  onStderr?: (text: string) => void;
}

/** How a command run with Sandbox.run ended, and its output. */
export interface RunResult {
  exitCode: number;
  /** The limit that ended it (timeout, time_box, memory, pids, deleted); undefined for a normal exit. */
  reason?: string;
  stdout: string;
  stderr: string;
  stdoutBytes: Buffer;
  stderrBytes: Buffer;
  /** Output the worker dropped because the client read too slowly. */
  droppedBytes: number;
}

/** How to start a background command. */
export interface StartOptions extends CallOptions {
  env?: Record<string, string>;
  cwd?: string;
  tty?: boolean;
  rows?: number;
  cols?: number;
}

/** An argv, or a string run by sh -c. */
export type Argv = string[] | string;

function argvOf(argv: Argv): string[] {
  return typeof argv === "string" ? ["sh", "-c", argv] : [...argv];
}

function execBody(argv: Argv, o: RunOptions & StartOptions & { background?: boolean }): ExecRequest {
  const req: ExecRequest = { argv: argvOf(argv) };
  if (o.env && Object.keys(o.env).length) req.env = o.env;
  if (o.cwd) req.cwd = o.cwd;
  if (typeof o.stdin === "string") req.stdin = o.stdin;
  else if (o.stdin !== undefined) {
    const b = Buffer.from(o.stdin);
    const text = b.toString("utf8");
    if (Buffer.from(text, "utf8").equals(b)) req.stdin = text;
    else req.stdin_base64 = b.toString("base64");
  }
  if (o.timeoutSeconds) req.timeout_seconds = Math.max(1, Math.ceil(o.timeoutSeconds));
  if (o.background) req.background = true;
  if (o.tty) req.tty = true;
  if (o.rows) req.rows = o.rows;
  if (o.cols) req.cols = o.cols;
  return req;
}

/**
 * A client of one sandbox worker's API (docs/openapi.yaml). Its methods
 * reject with an APIError subclass for an error answer (matched on the API's
 * code) and TransportError when no answer came.
 */
export class Worker {
  /** @internal */
  readonly t: Transport;
  readonly url: string;
  /** The worker's image store: pull, list, get, delete. */
  readonly images: Images;

  constructor(opts: WorkerOptions) {
    this.url = opts.url.replace(/\/+$/, "");
    this.t = new Transport(opts.url, opts.token, opts.timeoutMs ?? 60_000, opts.agent);
    this.images = new Images(this);
  }

  /** Close kept-alive connections (sandboxes run on). */
  close(): void {
    this.t.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }

  /** Create a sandbox; `await using sb = await worker.create(...)` deletes it at the scope's end. */
  async create(o: CreateOptions = {}): Promise<Sandbox> {
    const body: CreateRequest = {};
    if (o.time_box_minutes !== undefined) body.time_box_minutes = o.time_box_minutes;
    if (o.env && Object.keys(o.env).length) body.env = o.env;
    if (o.secrets && Object.keys(o.secrets).length) body.secrets = o.secrets;
    if (o.browser === "start") body.browser = { start: true };
    else if (o.browser) body.browser = true;
    if (o.limits) body.limits = o.limits;
    if (o.egress) body.egress = typeof o.egress === "string" ? { mode: o.egress } : o.egress;
    if (o.image) body.image = o.image;
    const info = await this.t.json<SandboxInfo>(routes.create, 201, { json: body, signal: o.signal });
    return new Sandbox(this, info.id, info);
  }

  /** The handle of an existing sandbox (nothing is asked of the worker). */
  sandbox(id: string): Sandbox {
    return new Sandbox(this, id);
  }

  /** The worker's sandboxes. */
  async list(o: CallOptions = {}): Promise<SandboxInfo[]> {
    return (await this.t.json<{ items: SandboxInfo[] }>(routes.list, 200, o)).items;
  }

  /** Capacity, load and the last self-test. */
  async status(o: CallOptions = {}): Promise<WorkerStatus> {
    return this.t.json<WorkerStatus>(routes.status, 200, o);
  }

  /** Run the self-test now (NoSelfTestError where the worker cannot). */
  async runSelfTest(o: CallOptions = {}): Promise<SelfTest> {
    return this.t.json<SelfTest>(routes.selfTest, 200, o);
  }
}

/**
 * The worker's image store (worker.images; docs/images.md). On a worker
 * without --image-registry images are off: list() is empty and the others
 * reject with ImageNotAllowedError.
 */
export class Images {
  constructor(private readonly worker: Worker) {}

  /** Pull `ref` into the store ahead of the creates that use it (a tag is resolved again); the
   * image. ImageNotAllowedError, InvalidImageError, ImageUnauthorizedError, ImageNotFoundError,
   * RegistryUnavailableError, ImageCacheFullError. */
  async pull(ref: string, o: CallOptions = {}): Promise<Image> {
    const body: ImageRequest = { image: ref };
    return this.worker.t.json<Image>(routes.pullImage, 200, { ...o, json: body });
  }

  /** The images the store holds, most recently used first. */
  async list(o: CallOptions = {}): Promise<Image[]> {
    return (await this.worker.t.json<{ items: Image[] }>(routes.listImages, 200, o)).items;
  }

  /** The image of that digest, or of a canonical reference it was pulled by, from list() (the
   * API has no route for one image); undefined when the store does not hold it. */
  async get(digestOrRef: string, o: CallOptions = {}): Promise<Image | undefined> {
    return (await this.list(o)).find((im) => im.digest === digestOrRef || im.refs.includes(digestOrRef));
  }

  /** Evict the image (its digest, or a reference it was pulled by) with the layers no other
   * image uses; the image as it was. ImageNotFoundError, ImageInUseError while a sandbox runs on it. */
  async delete(digestOrRef: string, o: CallOptions = {}): Promise<Image> {
    return this.worker.t.json<Image>(routes.deleteImage, 200, { ...o, params: { digest: digestOrRef } });
  }
}

/** A handle of one sandbox. Its methods reject with SandboxNotFoundError once it is gone. */
export class Sandbox {
  /** The wipe's report, once deleted through this handle. */
  wipeReport: WipeReport | undefined;
  readonly files: Files;
  readonly archive: Archive;

  constructor(
    readonly worker: Worker,
    readonly id: string,
    /** The description from the create (or the last extend). */
    public info?: SandboxInfo,
  ) {
    this.files = new Files(this);
    this.archive = new Archive(this);
  }

  /** Deletes the sandbox unless it was (for `await using`). */
  async [Symbol.asyncDispose](): Promise<void> {
    if (this.wipeReport) return;
    try {
      await this.delete();
    } catch (e) {
      if (!(e instanceof SandboxNotFoundError)) throw e;
    }
  }

  /** The sandbox now: description, state and usage. */
  async state(o: CallOptions = {}): Promise<SandboxState> {
    return this.worker.t.json<SandboxState>(routes.get, 200, { ...o, params: { id: this.id } });
  }

  /** What the sandbox uses now. */
  async usage(o: CallOptions = {}): Promise<Usage> {
    return (await this.state(o)).usage;
  }

  /** Set the time box anew (5..30 minutes counted from the start). */
  async extend(timeBoxMinutes: number, o: CallOptions = {}): Promise<SandboxInfo> {
    const body: PatchRequest = { time_box_minutes: timeBoxMinutes };
    this.info = await this.worker.t.json<SandboxInfo>(routes.extend, 200, { ...o, json: body, params: { id: this.id } });
    return this.info;
  }

  /**
   * Add or rotate secrets, by name (PATCH with secrets): a name the sandbox has keeps its placeholder and the
   * proxy puts the new value in from the next request on; a new name gets a new placeholder, set for the commands
   * started after. Returns the placeholder of each secret given, by name. The sandbox must have been created with
   * secrets or an egress allow entry with methods or paths, and the hosts must be within those (InvalidRequestError).
   */
  async updateSecrets(secrets: Record<string, SecretRequest>, o: CallOptions = {}): Promise<Record<string, string>> {
    const body: PatchRequest = { secrets };
    const info = await this.worker.t.json<SandboxInfo>(routes.extend, 200, { ...o, json: body, params: { id: this.id } });
    const placeholders = info.secret_placeholders ?? {};
    delete info.secret_placeholders;
    this.info = info;
    return placeholders;
  }

  /** Wipe the sandbox; the report (WipeUnverifiedError, with leftovers, when it could not verify itself). */
  async delete(o: CallOptions = {}): Promise<WipeReport> {
    this.wipeReport = await this.worker.t.json<WipeReport>(routes.delete, 200, { ...o, params: { id: this.id } });
    return this.wipeReport;
  }

  /**
   * Run a command to its end: exit code, reason and output. A non-zero exit
   * is a result, not an error. Aborting the signal ends the request, which
   * kills the command.
   */
  async run(argv: Argv, o: RunOptions = {}): Promise<RunResult> {
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let dropped = 0;
    for await (const ev of this.worker.t.events(routes.exec, { json: execBody(argv, o), params: { id: this.id }, signal: o.signal })) {
      if (isLast(ev)) {
        throwIfError(ev);
        const stdoutBytes = Buffer.concat(out);
        const stderrBytes = Buffer.concat(err);
        return {
          exitCode: ev.exit_code ?? -1, reason: ev.reason || undefined, stdoutBytes, stderrBytes,
          stdout: stdoutBytes.toString("utf8"), stderr: stderrBytes.toString("utf8"),
          droppedBytes: ev.dropped_bytes ?? dropped,
        };
      }
      if (ev.dropped_bytes) {
        dropped += ev.dropped_bytes;
        continue;
      }
      const b = eventBytes(ev);
      if (ev.stream === "stderr") {
        err.push(b);
        o.onStderr?.(b.toString("utf8"));
      } else {
        out.push(b);
        o.onStdout?.(b.toString("utf8"));
      }
    }
    throw new StreamEndedError("the worker's stream ended before the command's exit");
  }

  /** Start a command in the background; it runs on, its output kept, until it exits or is signalled. */
  async start(argv: Argv, o: StartOptions = {}): Promise<Process> {
    const info = await this.worker.t.json<ProcessInfo>(routes.exec, 201, {
      json: execBody(argv, { ...o, background: true }), params: { id: this.id }, signal: o.signal,
    });
    return new Process(this, info.pid, info);
  }

  /** Every command of the sandbox, oldest first. */
  async processes(o: CallOptions = {}): Promise<ProcessInfo[]> {
    return (await this.worker.t.json<{ items: ProcessInfo[] }>(routes.processes, 200, { ...o, params: { id: this.id } })).items;
  }

  /** The handle of command pid. */
  process(pid: number): Process {
    return new Process(this, pid);
  }

  /** Start a command on a terminal of the sandbox's own and attach to it. */
  async terminal(argv: Argv = ["bash"], o: StartOptions = {}): Promise<Terminal> {
    const p = await this.start(argv, { rows: 24, cols: 80, ...o, tty: true });
    try {
      return await p.attach(o);
    } catch (e) {
      await p.signal("KILL").catch(() => undefined);
      throw e;
    }
  }

  /** The CDP WebSocket URL of the sandbox's browser: give it with browserHeaders() to
   * Playwright's chromium.connectOverCDP(url, {headers}). */
  browserWsUrl(): string {
    return wsUrl(this.worker.url, routes.browser.path({ id: this.id }));
  }

  /** The headers a CDP client must send with browserWsUrl() (the token). */
  browserHeaders(): Record<string, string> {
    return { ...this.worker.t.headers };
  }

  /** The browser's /json/version (starting it unless it runs); NoBrowserError, BrowserBusyError. */
  async browserVersion(o: CallOptions = {}): Promise<BrowserVersion> {
    return this.worker.t.json<BrowserVersion>(routes.browserVersion, 200, { ...o, params: { id: this.id } });
  }

  /** The URL through which the worker forwards requests to `port` of the sandbox
   * (127.0.0.1:port inside it), with the server's own `path` after it (no leading "/", a
   * query allowed). Send portHeaders() with every request (a WebSocket's too, with
   * ws/wss for http/https); the worker removes them before the request enters the sandbox. */
  portUrl(port: number, path = ""): string {
    return this.worker.url + routes.port.path({ id: this.id, port, path: path.replace(/^\/+/, "") });
  }

  /** The headers a request to portUrl() must carry (the token). */
  portHeaders(): Record<string, string> {
    return { ...this.worker.t.headers };
  }

  /** A signed URL that opens `port` of the sandbox in a person's browser, on the worker's
   * preview listener (its own origin), for `ttlSeconds` (1..86400; absent: an hour). It dies
   * sooner with the sandbox or the worker's restart; NoPreviewError without previews. */
  async preview(port: number, o: CallOptions & { ttlSeconds?: number } = {}): Promise<Preview> {
    const body: PreviewRequest = o.ttlSeconds === undefined ? {} : { ttl_seconds: o.ttlSeconds };
    return this.worker.t.json<Preview>(routes.preview, 200, { ...o, json: body, params: { id: this.id, port } });
  }
}

function wsUrl(base: string, path: string): string {
  return base.replace(/^http/, "ws") + path;
}

/** A process's output events (output and drop markers), iterated once; `process` after the last. */
export class OutputStream implements AsyncIterable<ExecEvent> {
  /** The process's record, once the stream ended. */
  process: ProcessInfo | undefined;

  constructor(private readonly src: AsyncIterable<ExecEvent>) {}

  async *[Symbol.asyncIterator](): AsyncIterator<ExecEvent> {
    for await (const ev of this.src) {
      if (isLast(ev)) {
        throwIfError(ev);
        this.process = ev.process;
        return;
      }
      yield ev;
    }
  }
}

/** A handle of one command of a sandbox (from Sandbox.start or Sandbox.process). */
export class Process {
  constructor(
    readonly sandbox: Sandbox,
    readonly pid: number,
    /** The record at its start, when this handle came from start. */
    readonly infoAtStart?: ProcessInfo,
  ) {}

  private get params(): Record<string, string | number> {
    return { id: this.sandbox.id, pid: this.pid };
  }

  /** Its record now (ProcessNotFoundError for an unknown pid). */
  async info(o: CallOptions = {}): Promise<ProcessInfo> {
    return this.sandbox.worker.t.json<ProcessInfo>(routes.process, 200, { ...o, params: this.params });
  }

  /** Its output: what its buffer holds, then (follow) everything to its exit. */
  output(o: CallOptions & { follow?: boolean } = {}): OutputStream {
    return new OutputStream(this.sandbox.worker.t.events(routes.output, {
      params: this.params, query: o.follow ? { follow: "1" } : {}, signal: o.signal,
    }));
  }

  /** Follow its output (discarding it) to its exit; its record. */
  async wait(o: CallOptions = {}): Promise<ProcessInfo> {
    const s = this.output({ ...o, follow: true });
    for await (const _ of s) {
      // discarded
    }
    if (!s.process) throw new StreamEndedError("the output ended without the process's record");
    return s.process;
  }

  /** Write to its stdin (a stream is sent as it is read); close closes it after. */
  async writeStdin(data: Body, o: CallOptions & { close?: boolean } = {}): Promise<void> {
    const res = await this.sandbox.worker.t.send(routes.stdin, 204, {
      params: this.params, body: data, headers: { "Content-Type": "application/octet-stream" },
      query: o.close ? { close: "1" } : {}, signal: o.signal,
    });
    res.resume();
  }

  /** Close its stdin (on a terminal: type the end-of-file character). */
  async closeStdin(o: CallOptions = {}): Promise<void> {
    await this.writeStdin("", { ...o, close: true });
  }

  /** Signal its process group: TERM, KILL, INT, HUP, QUIT, USR1, USR2, STOP, CONT or WINCH. */
  async signal(sig = "TERM", o: CallOptions = {}): Promise<void> {
    const body: SignalRequest = { signal: sig };
    const res = await this.sandbox.worker.t.send(routes.signal, 204, { ...o, json: body, params: this.params });
    res.resume();
  }

  /** Attach to it over a WebSocket: its output (from what its buffer holds) and its input. */
  async attach(o: CallOptions = {}): Promise<Terminal> {
    const w = this.sandbox.worker;
    const ws = new WebSocket(wsUrl(w.url, routes.attach.path(this.params)), {
      headers: w.t.headers, maxPayload: 2 << 20, handshakeTimeout: 60_000,
    });
    const term = new Terminal(this, ws);
    try {
      await new Promise<void>((resolve, reject) => {
        const abort = (): void => {
          ws.terminate();
          reject(o.signal?.reason);
        };
        o.signal?.addEventListener("abort", abort, { once: true });
        ws.once("open", () => {
          o.signal?.removeEventListener("abort", abort);
          resolve();
        });
        ws.once("unexpected-response", (_req, res) => {
          void readAll(res).then((raw) => reject(errorFromAnswerOf(res, raw)), reject);
        });
        ws.once("error", (e) => reject(new TransportError(`attach ${this.pid}: ${e.message}`, { cause: e })));
      });
    } catch (e) {
      ws.terminate();
      throw e;
    }
    return term;
  }
}

function errorFromAnswerOf(res: http.IncomingMessage, raw: Buffer): APIError {
  try {
    const doc = JSON.parse(raw.toString("utf8"));
    if (doc?.error?.code) return errorFromWire(res.statusCode ?? 0, doc.error);
  } catch {
    // not JSON
  }
  return errorFromWire(res.statusCode ?? 0, { code: "", message: raw.toString("utf8").slice(0, 200) });
}

/**
 * An attached session with a command: read its output (`for await`, read()),
 * write to it, resize, closeInput, wait for its exit. close() (or `using`)
 * closes the connection; the command runs on.
 */
export class Terminal implements AsyncIterable<Buffer> {
  /** Output the worker dropped because the reader was too slow. */
  dropped = 0;
  /** The command's record, once it exited. */
  exit: ProcessInfo | undefined;
  private readonly queue: Buffer[] = [];
  private waiter: (() => void) | undefined;
  private ended = false;
  private error: Error | undefined;

  constructor(
    readonly process: Process,
    private readonly ws: WebSocket,
  ) {
    ws.on("message", (data: Buffer, isBinary: boolean) => this.onMessage(data, isBinary));
    ws.on("close", () => this.finish());
    ws.on("error", (e) => this.finish(new TransportError(`terminal: ${e.message}`, { cause: e })));
  }

  private onMessage(data: Buffer, isBinary: boolean): void {
    if (isBinary) {
      if (data.length > 1 && (data[0] === 1 || data[0] === 2)) this.queue.push(data.subarray(1));
    } else {
      const msg = JSON.parse(data.toString("utf8")) as AttachMessage;
      if (msg.type === "dropped") this.dropped += msg.bytes ?? 0;
      else if (msg.type === "exit") {
        this.exit = msg.process;
        this.finish();
      } else if (msg.type === "error") this.finish(errorFromWire(101, msg.error ?? {}));
    }
    this.wake();
  }

  private finish(err?: Error): void {
    if (this.ended) return;
    this.ended = true;
    if (err) this.error = err;
    else if (!this.exit) this.error = new StreamEndedError("the terminal's connection ended before the command's exit");
    this.wake();
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  }

  /** The next piece of output; an empty buffer once the command exited. */
  async read(): Promise<Buffer> {
    for (;;) {
      const b = this.queue.shift();
      if (b) return b;
      if (this.ended) {
        if (this.error) throw this.error;
        return Buffer.alloc(0);
      }
      await new Promise<void>((r) => (this.waiter = r));
    }
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Buffer> {
    for (;;) {
      const b = await this.read();
      if (!b.length) return;
      yield b;
    }
  }

  /** Output up to and including marker (all of it when the command exits first). */
  async readUntil(marker: string): Promise<string> {
    let s = "";
    while (!s.includes(marker)) {
      const b = await this.read();
      if (!b.length) break;
      s += b.toString("utf8");
    }
    return s;
  }

  /** Type data into the command. */
  async write(data: string | Uint8Array): Promise<void> {
    const b = Buffer.from(data);
    for (let i = 0; i < b.length; i += 32 << 10) await this.sendRaw(b.subarray(i, i + (32 << 10)), true);
  }

  /** Set the terminal's size (the command gets SIGWINCH). */
  async resize(rows: number, cols: number): Promise<void> {
    const msg: AttachMessage = { type: "resize", rows, cols };
    await this.sendRaw(JSON.stringify(msg), false);
  }

  /** End its input (on a terminal: the end-of-file character). */
  async closeInput(): Promise<void> {
    const msg: AttachMessage = { type: "eof" };
    await this.sendRaw(JSON.stringify(msg), false);
  }

  private sendRaw(data: Buffer | string, binary: boolean): Promise<void> {
    return new Promise((resolve, reject) =>
      this.ws.send(data, { binary }, (e) => (e ? reject(new TransportError(`terminal: ${e.message}`, { cause: e })) : resolve())),
    );
  }

  /** Read (discarding) to its exit; its record. */
  async wait(): Promise<ProcessInfo> {
    while ((await this.read()).length) {
      // discarded
    }
    if (!this.exit) throw new StreamEndedError("the terminal ended without the command's exit");
    return this.exit;
  }

  /** Close the connection (the command runs on). */
  close(): void {
    this.ws.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

/** The sandbox's workspace files; paths are relative to /workspace. */
export class Files {
  constructor(private readonly sb: Sandbox) {}

  private params(path: string, directory = false): Record<string, string> {
    return { id: this.sb.id, path: filePath(path, directory) };
  }

  /** Write a file (parents made); all of data or nothing. IsDirectoryError, WorkspaceFullError, BodyTooLargeError. */
  async write(path: string, data: Body, o: CallOptions & { mode?: number } = {}): Promise<void> {
    const headers: Record<string, string> = { "Content-Type": "application/octet-stream" };
    if (o.mode !== undefined) headers["X-File-Mode"] = (o.mode & 0o777).toString(8).padStart(4, "0");
    const res = await this.sb.worker.t.send(routes.putFile, 204, { params: this.params(path), body: data, headers, signal: o.signal });
    res.resume();
  }

  /** A file's content (PathNotFoundError, IsDirectoryError). */
  async read(path: string, o: CallOptions = {}): Promise<Buffer> {
    return this.sb.worker.t.bytes(routes.getFile, 200, { ...o, params: this.params(path) });
  }

  /** A file's content as UTF-8 text. */
  async readText(path: string, o: CallOptions = {}): Promise<string> {
    return (await this.read(path, o)).toString("utf8");
  }

  /** A file's content as a stream. */
  async readStream(path: string, o: CallOptions = {}): Promise<Readable> {
    return this.sb.worker.t.send(routes.getFile, 200, { ...o, params: this.params(path), stream: true });
  }

  /** A directory's entries ("" the workspace), sorted by name (NotDirectoryError). */
  async list(directory = "", o: CallOptions = {}): Promise<FileEntry[]> {
    return (await this.sb.worker.t.json<{ items: FileEntry[] }>(routes.getFile, 200, { ...o, params: this.params(directory, true) })).items;
  }

  /** Make a directory with its parents (ExistsError when a file is in its place). */
  async mkdir(directory: string, o: CallOptions & { mode?: number } = {}): Promise<void> {
    const headers: Record<string, string> = { "X-File-Type": "directory" };
    if (o.mode !== undefined) headers["X-File-Mode"] = (o.mode & 0o777).toString(8).padStart(4, "0");
    const res = await this.sb.worker.t.send(routes.putFile, 204, { params: this.params(directory, true), headers, signal: o.signal });
    res.resume();
  }

  /** Remove a file, a symlink or an empty directory (recursive: any directory; NotEmptyError). */
  async remove(path: string, o: CallOptions & { recursive?: boolean } = {}): Promise<void> {
    const res = await this.sb.worker.t.send(routes.deleteFile, 204, {
      params: this.params(path), query: o.recursive ? { recursive: "1" } : {}, signal: o.signal,
    });
    res.resume();
  }
}

/** Trees of the sandbox's workspace as tar archives. */
export class Archive {
  constructor(private readonly sb: Sandbox) {}

  /** Unpack a tar (or gzipped tar) into directory ("" the workspace), all or nothing (InvalidArchiveError, ExistsError). */
  async upload(data: Body, directory = "", o: CallOptions = {}): Promise<void> {
    const res = await this.sb.worker.t.send(routes.putArchive, 204, {
      ...o, params: { id: this.sb.id, path: filePath(directory, true) }, body: data, headers: { "Content-Type": "application/x-tar" },
    });
    res.resume();
  }

  /** A tar of directory's tree ("" the workspace). */
  async download(directory = "", o: CallOptions = {}): Promise<Buffer> {
    return this.sb.worker.t.bytes(routes.getArchive, 200, { ...o, params: { id: this.sb.id, path: filePath(directory, true) } });
  }

  /** A tar of directory's tree as a stream (an error midway means it is not a whole archive). */
  async downloadStream(directory = "", o: CallOptions = {}): Promise<Readable> {
    return this.sb.worker.t.send(routes.getArchive, 200, { ...o, params: { id: this.sb.id, path: filePath(directory, true) }, stream: true });
  }
}

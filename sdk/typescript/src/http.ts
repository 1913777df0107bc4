// The transport: node:http(s) with kept-alive connections, the token on
// every request, redirects never followed, error answers read into APIErrors.

import http from "node:http";
import https from "node:https";
import { Readable } from "node:stream";

import { APIError, StreamEndedError, TransportError, errorFromAnswer, errorFromWire } from "./errors.js";
import type { Route } from "./routes.js";
import type { ExecEvent } from "./types.js";

/** A request body: bytes, text, or a stream of bytes (sent as it is read). */
export type Body = string | Uint8Array | Readable | AsyncIterable<Uint8Array>;

/** Options of every call: an AbortSignal ends it (a command's request too, which kills the command). */
export interface CallOptions {
  signal?: AbortSignal;
}

export interface SendOptions extends CallOptions {
  params?: Record<string, string | number>;
  query?: Record<string, string>;
  json?: unknown;
  body?: Body;
  headers?: Record<string, string>;
  /** A streamed answer: no idle timeout once it began. */
  stream?: boolean;
}

export class Transport {
  readonly base: URL;
  readonly headers: Record<string, string>;
  private readonly agent: http.Agent;
  private readonly mod: typeof http | typeof https;

  constructor(
    url: string,
    token: string,
    private readonly timeoutMs: number,
    agent?: http.Agent,
  ) {
    this.base = new URL(url.replace(/\/+$/, ""));
    this.headers = { Authorization: `Bearer ${token}` };
    const secure = this.base.protocol === "https:";
    this.mod = secure ? https : http;
    this.agent = agent ?? new (secure ? https.Agent : http.Agent)({ keepAlive: true });
  }

  close(): void {
    this.agent.destroy();
  }

  /** The answer when its status is expect; any other status is read into an APIError. */
  async send(route: Route, expect: number, o: SendOptions = {}): Promise<http.IncomingMessage> {
    // The path is passed as it is: a URL object would resolve a workspace
    // path's escaped dot segments, which the worker refuses with a reason.
    const query = new URLSearchParams(o.query ?? {}).toString();
    const path = this.base.pathname.replace(/\/$/, "") + route.path(o.params) + (query ? `?${query}` : "");
    const headers: Record<string, string> = { ...this.headers, ...o.headers };
    let body: Body | undefined = o.body;
    if (o.json !== undefined) {
      body = JSON.stringify(o.json);
      headers["Content-Type"] = "application/json";
    }
    if (typeof body === "string" || body instanceof Uint8Array) {
      headers["Content-Length"] = String(Buffer.byteLength(body));
    }
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      const req = this.mod.request({
        protocol: this.base.protocol, hostname: this.base.hostname.replace(/^\[|\]$/g, ""), port: this.base.port, path,
        method: route.method, headers, agent: this.agent, signal: o.signal,
      }, resolve);
      req.setTimeout(this.timeoutMs, () => req.destroy(new Error(`no answer within ${this.timeoutMs} ms`)));
      req.on("error", (e) => reject(o.signal?.aborted ? o.signal.reason ?? e : new TransportError(`${route.method} ${path}: ${e.message}`, { cause: e })));
      if (body === undefined || typeof body === "string" || body instanceof Uint8Array) {
        req.end(body);
      } else {
        const src = body instanceof Readable ? body : Readable.from(body);
        src.on("error", (e) => req.destroy(e));
        src.pipe(req);
      }
    });
    if (o.stream) res.setTimeout(0);
    if (res.statusCode !== expect) {
      const raw = await readAll(res).catch(() => Buffer.alloc(0));
      throw errorFromAnswer(res.statusCode ?? 0, raw, header(res, "retry-after"));
    }
    return res;
  }

  /** The answer's JSON (undefined for an empty one). */
  async json<T>(route: Route, expect: number, o: SendOptions = {}): Promise<T> {
    const raw = await readAll(await this.send(route, expect, o));
    return (raw.length ? JSON.parse(raw.toString("utf8")) : undefined) as T;
  }

  /** The answer's bytes. */
  async bytes(route: Route, expect: number, o: SendOptions = {}): Promise<Buffer> {
    return readAll(await this.send(route, expect, o));
  }

  /** The NDJSON events of an answer, through the last one. The answer is
   * read to its end after the last event, so its connection is kept alive. */
  async *events(route: Route, o: SendOptions = {}): AsyncGenerator<ExecEvent, void, undefined> {
    const res = await this.send(route, 200, { ...o, stream: true, headers: { ...o.headers, Accept: "application/x-ndjson" } });
    const lines = new LineQueue(res);
    let done = false;
    try {
      for (;;) {
        const line = await lines.next();
        if (line === undefined) break;
        if (!line.trim()) continue;
        const ev = JSON.parse(line) as ExecEvent;
        if (isLast(ev)) {
          await lines.end();
          done = true;
          yield ev;
          return;
        }
        yield ev;
      }
    } catch (e) {
      if (o.signal?.aborted) throw o.signal.reason ?? e;
      if (e instanceof APIError) throw e;
      throw new TransportError(`read stream: ${(e as Error).message}`, { cause: e });
    } finally {
      if (!done) res.destroy();
    }
    throw new StreamEndedError("the worker's stream ended before the command's exit");
  }
}

/** The lines of a response as they arrive; it pauses the response while
 * many lines wait to be taken. */
class LineQueue {
  private readonly lines: string[] = [];
  private buf = "";
  private ended = false;
  private error: Error | undefined;
  private wake: (() => void) | undefined;

  constructor(private readonly res: http.IncomingMessage) {
    res.setEncoding("utf8");
    res.on("data", (chunk: string) => {
      this.buf += chunk;
      let nl: number;
      while ((nl = this.buf.indexOf("\n")) >= 0) {
        this.lines.push(this.buf.slice(0, nl));
        this.buf = this.buf.slice(nl + 1);
      }
      if (this.lines.length > 256) res.pause();
      this.notify();
    });
    res.on("end", () => {
      this.ended = true;
      this.notify();
    });
    res.on("error", (e) => {
      this.error = e;
      this.notify();
    });
    res.on("close", () => {
      if (!this.ended && !this.error) this.error = new Error("the connection closed mid-answer");
      this.notify();
    });
  }

  private notify(): void {
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  private wait(): Promise<void> {
    return new Promise((r) => (this.wake = r));
  }

  /** The next line; undefined at the answer's end. */
  async next(): Promise<string | undefined> {
    for (;;) {
      const line = this.lines.shift();
      if (line !== undefined) {
        if (this.lines.length < 64 && this.res.isPaused()) this.res.resume();
        return line;
      }
      if (this.error) throw this.error;
      if (this.ended) {
        const rest = this.buf;
        this.buf = "";
        return rest || undefined;
      }
      await this.wait();
    }
  }

  /** Waits for the answer's end. */
  async end(): Promise<void> {
    this.res.resume();
    while (!this.ended) {
      if (this.error) throw this.error;
      await this.wait();
    }
  }
}

function header(res: http.IncomingMessage, name: string): string | undefined {
  const v = res.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** All of a response's body. */
export async function readAll(res: http.IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  try {
    for await (const c of res) chunks.push(c as Buffer);
  } catch (e) {
    throw new TransportError(`read answer: ${(e as Error).message}`, { cause: e });
  }
  return Buffer.concat(chunks);
}

/** Whether ev ends its stream. */
export function isLast(ev: ExecEvent): boolean {
  return ev.error !== undefined || ev.exit_code !== undefined || ev.process !== undefined;
}

/** Throw the error a stream's last event carries. */
export function throwIfError(ev: ExecEvent): void {
  if (ev.error) throw errorFromWire(200, ev.error);
}

/** An output event's exact bytes. */
export function eventBytes(ev: ExecEvent): Buffer {
  if (ev.data_base64) return Buffer.from(ev.data_base64, "base64");
  return Buffer.from(ev.data ?? "", "utf8");
}

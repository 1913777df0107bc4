/**
 * @openvibe/agentsandbox: the TypeScript SDK of the codes-sandbox worker API.
 *
 * ```ts
 * import { Worker } from "@openvibe/agentsandbox";
 * const worker = new Worker({ url: "http://127.0.0.1:8088", token });
 * await using sb = await worker.create({ time_box_minutes: 10, limits: { memory_mb: 512 } });
 * const r = await sb.run(["python3", "-c", "print(1)"]);
 * ```
 * @packageDocumentation
 */
export * from "./errors.js";
export type { Body, CallOptions } from "./http.js";
export { Route, filePath, routes } from "./routes.js";
export * from "./types.js";
export * from "./worker.js";

// The worker API's routes as the SDK calls them: every request goes through
// one of these, and the conformance test compares them with docs/openapi.yaml.

/** One operation: a method and a path template ({id}, {pid}, {port}, {path}, {digest}). */
export class Route {
  constructor(
    readonly method: string,
    readonly template: string,
  ) {}

  /** The template with each parameter escaped; `path`, a workspace path,
   * comes escaped already (see filePath). */
  path(params: Record<string, string | number> = {}): string {
    let out = this.template;
    for (const [k, v] of Object.entries(params)) {
      out = out.replace(`{${k}}`, k === "path" ? String(v) : encodeURIComponent(String(v)));
    }
    return out;
  }
}

export const routes = {
  create: new Route("POST", "/v1/sandboxes"),
  list: new Route("GET", "/v1/sandboxes"),
  get: new Route("GET", "/v1/sandboxes/{id}"),
  extend: new Route("PATCH", "/v1/sandboxes/{id}"),
  delete: new Route("DELETE", "/v1/sandboxes/{id}"),
  exec: new Route("POST", "/v1/sandboxes/{id}/exec"),
  processes: new Route("GET", "/v1/sandboxes/{id}/processes"),
  process: new Route("GET", "/v1/sandboxes/{id}/processes/{pid}"),
  output: new Route("GET", "/v1/sandboxes/{id}/processes/{pid}/output"),
  signal: new Route("POST", "/v1/sandboxes/{id}/processes/{pid}/signal"),
  stdin: new Route("POST", "/v1/sandboxes/{id}/processes/{pid}/stdin"),
  attach: new Route("GET", "/v1/sandboxes/{id}/processes/{pid}/attach"),
  browser: new Route("GET", "/v1/sandboxes/{id}/browser"),
  browserVersion: new Route("GET", "/v1/sandboxes/{id}/browser/json/version"),
  putFile: new Route("PUT", "/v1/sandboxes/{id}/files/{path}"),
  getFile: new Route("GET", "/v1/sandboxes/{id}/files/{path}"),
  deleteFile: new Route("DELETE", "/v1/sandboxes/{id}/files/{path}"),
  getArchive: new Route("GET", "/v1/sandboxes/{id}/archive/{path}"),
  putArchive: new Route("PUT", "/v1/sandboxes/{id}/archive/{path}"),
  port: new Route("GET", "/v1/sandboxes/{id}/ports/{port}/{path}"),
  preview: new Route("POST", "/v1/sandboxes/{id}/ports/{port}/preview"),
  pullImage: new Route("POST", "/v1/images"),
  listImages: new Route("GET", "/v1/images"),
  deleteImage: new Route("DELETE", "/v1/images/{digest}"),
  status: new Route("GET", "/v1/status"),
  selfTest: new Route("POST", "/v1/selftest"),
} as const;

/** A workspace path as the file routes take it: relative, each segment
 * escaped (dot segments too, so the worker refuses them with a reason); a
 * directory's ends in "/" ("" is the workspace). */
export function filePath(p: string, directory = false): string {
  p = p.replace(/^\/+/, "");
  if (directory) p = p.replace(/\/+$/, "");
  if (!p) return "";
  const out = p
    .split("/")
    .map((s) => (s && /^\.+$/.test(s) ? "%2E".repeat(s.length) : encodeURIComponent(s)))
    .join("/");
  return directory ? out + "/" : out;
}

// The worker's MCP endpoint (/v1/mcp) driven by the TypeScript MCP SDK's
// client (@modelcontextprotocol/sdk): the tools, a command in a real
// sandbox, tool errors, a preview of a server in it, and the session's
// sandbox wiped when it ends.
import assert from "node:assert/strict";
import http from "node:http";
import { test } from "node:test";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

import { Worker } from "../dist/index.js";
import { workerEnv } from "./worker.mjs";

test("MCP over Streamable HTTP with @modelcontextprotocol/sdk", async (t) => {
  const env = await workerEnv(t);
  if (!env) return;
  const transport = new StreamableHTTPClientTransport(new URL(env.url + "/v1/mcp"), {
    requestInit: { headers: { Authorization: `Bearer ${env.token}` } },
  });
  const mcp = new Client({ name: "node-test", version: "1.0.0" });
  await mcp.connect(transport);
  const worker = new Worker(env);
  try {
    const { tools } = await mcp.listTools();
    const names = tools.map((x) => x.name);
    for (const want of ["create_sandbox", "run_command", "start_process", "read_output", "write_file", "read_file", "list_files",
      "upload_archive", "download_archive", "extend_sandbox", "delete_sandbox", "preview_port", "browser_navigate", "browser_screenshot",
      "browser_page_text"]) {
      assert.ok(names.includes(want), `${want} in ${names}`);
    }
    assert.ok(tools.every((x) => x.description && x.inputSchema?.type === "object"));

    const created = await mcp.callTool({ name: "create_sandbox", arguments: { egress: "none" } });
    assert.ok(!created.isError, JSON.stringify(created));
    const id = created.structuredContent.sandbox_id;
    const run = await mcp.callTool({ name: "run_command", arguments: { sandbox_id: id, command: "echo from node; exit 4" } });
    assert.deepEqual([run.structuredContent.exit_code, run.structuredContent.stdout], [4, "from node\n"]);
    const bad = await mcp.callTool({ name: "read_file", arguments: { sandbox_id: id, path: "missing.txt" } });
    assert.equal(bad.isError, true);
    assert.match(bad.content[0].text, /file_not_found/);

    // An image on a worker without --image-registry: a tool error that says what to fix.
    const imaged = await mcp.callTool({ name: "create_sandbox", arguments: { image: "registry.example/team/py:3.12" } });
    assert.equal(imaged.isError, true);
    assert.match(imaged.content[0].text, /image_not_allowed.*--image-registry/);

    // A server in the sandbox, opened through preview_port's URL on the preview listener.
    await callOK(mcp, "write_file", { sandbox_id: id, path: "site/hello.txt", content: "hello, preview\n" });
    await callOK(mcp, "start_process", { sandbox_id: id, argv: ["python3", "-m", "http.server", "8000", "--bind", "127.0.0.1", "--directory", "site"] });
    const pv = (await callOK(mcp, "preview_port", { sandbox_id: id, port: 8000, ttl_seconds: 60 })).structuredContent;
    assert.equal(pv.port, 8000);
    assert.ok(pv.url.startsWith(`${pv.origin}/?sandbox_preview_token=`), pv.url);
    const left = Date.parse(pv.expires_at) - Date.now();
    assert.ok(left > 50_000 && left <= 61_000, `expires in ${left} ms`);
    const first = await previewGet(pv.url);
    assert.equal(first.status, 303);
    const cookie = first.headers["set-cookie"][0].split(";")[0];
    let page;
    for (let i = 0; i < 600; i++) {
      page = await previewGet(pv.origin + "/hello.txt", cookie);
      if (page.status === 200) break;
      await new Promise((r) => setTimeout(r, 100)); // the server starts
    }
    assert.deepEqual([page.status, page.body], [200, "hello, preview\n"]);
    const badTTL = await mcp.callTool({ name: "preview_port", arguments: { sandbox_id: id, port: 8000, ttl_seconds: 1e6 } });
    assert.equal(badTTL.isError, true);
    assert.match(badTTL.content[0].text, /invalid_request/);

    assert.ok((await worker.list()).some((s) => s.id === id));
    await transport.terminateSession();
    for (let i = 0; i < 300; i++) {
      if (!(await worker.list()).some((s) => s.id === id)) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.fail("the session's sandbox was not wiped when the session ended");
  } finally {
    await mcp.close();
    worker.close();
  }
});

/** Calls a tool that must answer without a tool error. */
async function callOK(mcp, name, args) {
  const res = await mcp.callTool({ name, arguments: args });
  assert.ok(!res.isError, `${name}: ${JSON.stringify(res.content)}`);
  return res;
}

/** GET url on the preview listener: connects to its loopback address (the
 * URL's port on 127.0.0.1) with the URL's host name in Host, so no name is
 * resolved. */
function previewGet(url, cookie) {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.get({ host: "127.0.0.1", port: u.port, path: u.pathname + u.search, headers: { Host: u.host, ...(cookie ? { Cookie: cookie } : {}) } }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString() }));
    });
    req.on("error", reject);
  });
}

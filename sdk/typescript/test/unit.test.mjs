// What needs no worker: errors by code, paths.
import assert from "node:assert/strict";
import { test } from "node:test";

import * as sdk from "../dist/index.js";

test("errors by code", () => {
  const cases = [
    [404, '{"error":{"code":"sandbox_not_found","message":"m"}}', sdk.SandboxNotFoundError, "sandbox_not_found"],
    [404, '{"error":{"code":"file_not_found","message":"m"}}', sdk.PathNotFoundError, "file_not_found"],
    [429, '{"error":{"code":"at_capacity","message":"m"}}', sdk.AtCapacityError, "at_capacity"],
    [500, '{"error":{"code":"wipe_unverified","message":"m","leftovers":["x"]}}', sdk.WipeUnverifiedError, "wipe_unverified"],
    [418, '{"error":{"code":"a_new_code","message":"m"}}', sdk.APIError, "a_new_code"],
    [502, "bad gateway", sdk.APIError, ""],
    [404, "not json", sdk.NotFoundError, ""],
  ];
  for (const [status, body, cls, code] of cases) {
    const e = sdk.errorFromAnswer(status, Buffer.from(body), "5");
    assert.equal(e.constructor, cls, body);
    assert.deepEqual([e.code, e.status, e.retryAfter], [code, status, 5]);
    assert.ok(e instanceof sdk.APIError && e instanceof sdk.AgentSandboxError && e instanceof Error);
  }
  assert.ok(new sdk.SandboxNotFoundError("m", { status: 404, code: "sandbox_not_found" }) instanceof sdk.NotFoundError);
  assert.equal(sdk.SandboxNotFoundError.name, "SandboxNotFoundError");
});

test("file paths", () => {
  for (const [p, dir, want] of [
    ["a/b.txt", false, "a/b.txt"], ["/a b/c", false, "a%20b/c"], ["../x", false, "%2E%2E/x"],
    ["", true, ""], ["dir/", true, "dir/"], ["a/./b", false, "a/%2E/b"],
  ]) assert.equal(sdk.filePath(p, dir), want, p);
  assert.equal(sdk.routes.output.path({ id: "a/b", pid: 3 }), "/v1/sandboxes/a%2Fb/processes/3/output");
});

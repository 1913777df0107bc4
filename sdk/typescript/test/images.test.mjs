// Images: create with `image` and the store's surface (pull, list, get,
// delete). The session's worker has no image registry (scripts/sdk-test.sh
// starts it without one: the repository's registry helper is Go's,
// image/registrytest), so against it the surface is exercised on its error
// paths; the requests' shapes and the typed answers are checked against a
// loopback server that records what it is sent and answers as the API
// documents.
import assert from "node:assert/strict";
import http from "node:http";
import { describe, test } from "node:test";

import * as sdk from "../dist/index.js";
import { workerEnv } from "./worker.mjs";

const DIGEST = "sha256:" + "ab".repeat(32);
const REF = "registry.example/team/py:3.12";
const IMAGE = {
  digest: DIGEST, refs: [REF], size: 4096, layers: 2, platform: "linux/amd64",
  pulled: "2026-12-03T19:14:47.5Z", last_used: "2026-12-03T20:00:00Z", in_use: 1,
};
const SANDBOX = {
  id: "sb1", created_at: "2026-12-03T19:14:47Z", expires_at: "2026-12-03T19:19:47Z",
  limits: { memory_mb: 512, disk_mb: 1024, pids: 256, cpu_percent: 100, time_box_minutes: 5 },
  egress: { mode: "public" }, browser: false, image: REF, image_digest: DIGEST,
};
const ANSWERS = new Map([
  ["POST /v1/images", [200, IMAGE]],
  ["GET /v1/images", [200, { items: [IMAGE] }]],
  [`DELETE /v1/images/sha256%3A${"ab".repeat(32)}`, [200, IMAGE]],
  ["POST /v1/sandboxes", [201, SANDBOX]],
]);

/** A loopback server answering ANSWERS (else image_not_found) and recording each request. */
async function recordingAPI(t) {
  const seen = [];
  const srv = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const raw = Buffer.concat(chunks).toString();
      seen.push({ method: req.method, path: req.url, body: raw ? JSON.parse(raw) : undefined });
      const [status, doc] = ANSWERS.get(`${req.method} ${req.url}`) ?? [404, { error: { code: "image_not_found", message: "no such image" } }];
      res.writeHead(status, { "Content-Type": "application/json" }).end(JSON.stringify(doc));
    });
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  t.after(() => new Promise((r) => srv.close(r)));
  return { url: `http://127.0.0.1:${srv.address().port}`, seen };
}

test("images: the requests and the typed answers", async (t) => {
  const api = await recordingAPI(t);
  const w = new sdk.Worker({ url: api.url, token: "t" });
  try {
    const sb = await w.create({ image: REF, time_box_minutes: 6 });
    assert.deepEqual([sb.info.image, sb.info.image_digest], [REF, DIGEST]);
    assert.deepEqual(await w.images.pull(REF), IMAGE);
    assert.deepEqual(await w.images.list(), [IMAGE]);
    assert.deepEqual(await w.images.get(DIGEST), IMAGE);
    assert.deepEqual(await w.images.get(REF), IMAGE);
    assert.equal(await w.images.get("registry.example/team/other:1"), undefined);
    assert.deepEqual(await w.images.delete(DIGEST), IMAGE);
    await assert.rejects(w.images.delete(REF), (e) => e instanceof sdk.ImageNotFoundError && e.status === 404);
  } finally {
    w.close();
  }
  assert.deepEqual(api.seen, [
    { method: "POST", path: "/v1/sandboxes", body: { time_box_minutes: 6, image: REF } },
    { method: "POST", path: "/v1/images", body: { image: REF } },
    ...Array(4).fill({ method: "GET", path: "/v1/images", body: undefined }), // list, then each get
    { method: "DELETE", path: `/v1/images/sha256%3A${"ab".repeat(32)}`, body: undefined },
    { method: "DELETE", path: "/v1/images/registry.example%2Fteam%2Fpy%3A3.12", body: undefined },
  ]);
});

describe("images on the session's worker (no --image-registry)", () => {
  test("a host-view sandbox has no image; every image request is refused with what to fix", async (t) => {
    const env = await workerEnv(t);
    if (!env) return;
    const w = new sdk.Worker(env);
    try {
      const sb = await w.create();
      try {
        assert.deepEqual([sb.info.image, sb.info.image_digest], [undefined, undefined]);
        const st = await sb.state();
        assert.deepEqual([st.image, st.image_digest], [undefined, undefined]);
      } finally {
        await sb[Symbol.asyncDispose]();
      }
      assert.deepEqual(await w.images.list(), []);
      assert.equal(await w.images.get(REF), undefined);
      for (const call of [() => w.create({ image: REF }), () => w.images.pull(REF), () => w.images.delete(DIGEST)]) {
        await assert.rejects(call(), (e) =>
          e instanceof sdk.ImageNotAllowedError && e.status === 400 && e.code === "image_not_allowed" && e.message.includes("--image-registry"));
      }
      assert.ok((await w.list()).every((s) => s.image === undefined));
    } finally {
      w.close();
    }
  });
});

// The SDK against a real worker.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { before, describe, test } from "node:test";

import WebSocket from "ws";

import * as sdk from "../dist/index.js";
import { workerEnv } from "./worker.mjs";

describe("worker", () => {
  let env;
  let worker;
  before(async (t) => {
    env = await workerEnv(t);
    if (env) worker = new sdk.Worker(env);
  });
  const it = (name, fn) => test(name, async (t) => (env ? fn(t) : t.skip("no worker")));

  /** A sandbox for fn, deleted after (Symbol.asyncDispose, as `await using` calls it). */
  async function withSandbox(fn, opts = { limits: { memory_mb: 512 } }) {
    const sb = await worker.create(opts);
    try {
      return await fn(sb);
    } finally {
      await sb[Symbol.asyncDispose]();
    }
  }

  it("create with a secret: a placeholder inside, names and hosts in the info", async () => {
    const value = "sk-sdk-test-never-inside";
    await withSandbox(async (sb) => {
      assert.deepEqual(sb.info.secrets, { API_KEY: { hosts: ["api.example.com"] } });
      const out = (await sb.run("echo $API_KEY; echo $NODE_EXTRA_CA_CERTS")).stdout.split("\n");
      assert.ok(out[0].startsWith("agentsandbox-secret-"), out[0]);
      assert.equal(out[1], "/etc/ssl/certs/ca-certificates.crt");
      assert.ok(!(await sb.run("cat /proc/*/environ | tr '\\0' '\\n'")).stdout.includes(value));
      assert.deepEqual(await sb.updateSecrets({ API_KEY: { value: "sk-rotated", hosts: ["api.example.com"] } }), { API_KEY: out[0] });
      const added = await sb.updateSecrets({ NEW_KEY: { value: "sk-added", hosts: ["api.example.com"] } });
      assert.ok(added.NEW_KEY.startsWith("agentsandbox-secret-") && added.NEW_KEY !== out[0], added.NEW_KEY);
      assert.equal((await sb.run("echo $NEW_KEY")).stdout.trim(), added.NEW_KEY);
      assert.deepEqual(Object.keys(sb.info.secrets ?? {}).sort(), ["API_KEY", "NEW_KEY"]);
      await assert.rejects(sb.updateSecrets({ K: { value: "v", hosts: ["other.example.org"] } }), sdk.InvalidRequestError);
    }, { secrets: { API_KEY: { value, hosts: ["api.example.com"] } } });
  });

  it("create, dispose deletes", async () => {
    const sb = await worker.create({ time_box_minutes: 6, limits: { pids: 64 }, env: { GREETING: "hi" }, egress: "none" });
    try {
      assert.equal(sb.info.limits.time_box_minutes, 6);
      assert.equal(sb.info.limits.pids, 64);
      assert.equal(sb.info.egress.mode, "none");
      assert.ok((await worker.list()).some((s) => s.id === sb.id));
      assert.equal((await sb.run("echo $GREETING")).stdout, "hi\n");
    } finally {
      await sb[Symbol.asyncDispose]();
    }
    assert.equal(sb.wipeReport.verified, true);
    await assert.rejects(sb.state(), (e) => e instanceof sdk.SandboxNotFoundError && e.status === 404 && e.code === "sandbox_not_found");
  });

  it("run", () =>
    withSandbox(async (sb) => {
      const seen = [];
      const r = await sb.run(["sh", "-c", "echo out; echo err >&2; exit 3"], { onStdout: (s) => seen.push(s) });
      assert.deepEqual([r.exitCode, r.reason, r.stdout, r.stderr], [3, undefined, "out\n", "err\n"]);
      assert.deepEqual(seen, ["out\n"]);
      assert.equal((await sb.run(["cat"], { stdin: "typed\n" })).stdout, "typed\n");
      assert.deepEqual((await sb.run(["od", "-An", "-tx1"], { stdin: new Uint8Array([0xff, 0]) })).stdout.trim().split(/\s+/), ["ff", "00"]);
      assert.deepEqual([...(await sb.run("printf '\\377\\376'")).stdoutBytes], [0xff, 0xfe]);
      const timed = await sb.run(["sleep", "30"], { timeoutSeconds: 1 });
      assert.equal(timed.reason, "timeout");
      await assert.rejects(sb.run(["true"], { cwd: "missing-dir" }), sdk.InvalidRequestError);
    }));

  it("run aborted by a signal kills the command", () =>
    withSandbox(async (sb) => {
      const ac = new AbortController();
      const started = Date.now();
      setTimeout(() => ac.abort(new Error("stop")), 300);
      await assert.rejects(sb.run(["sleep", "30"], { signal: ac.signal }), /stop/);
      assert.ok(Date.now() - started < 20_000);
      for (let i = 0; i < 100; i++) {
        const ps = await sb.processes();
        if (ps.every((p) => p.state === "exited")) return;
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.fail("the aborted command still runs");
    }));

  it("background process: stdin, output, wait, signal", () =>
    withSandbox(async (sb) => {
      const p = await sb.start(["sh", "-c", "read line; echo got $line; echo bye >&2"]);
      assert.equal((await p.info()).state, "running");
      await p.writeStdin("hello\n", { close: true });
      const rec = await p.wait();
      assert.deepEqual([rec.state, rec.exit_code], ["exited", 0]);
      const out = p.output();
      const evs = [];
      for await (const ev of out) evs.push(ev);
      assert.equal(evs.filter((e) => e.stream === "stdout").map((e) => e.data).join(""), "got hello\n");
      assert.equal(evs.filter((e) => e.stream === "stderr").map((e) => e.data).join(""), "bye\n");
      assert.equal(out.process.pid, p.pid);
      const s = await sb.start(["sleep", "60"]);
      await s.signal("TERM");
      assert.equal((await s.wait()).exit_code, 128 + 15);
      await assert.rejects(s.signal("TERM"), (e) => e instanceof sdk.ProcessExitedError && e.status === 409);
      await assert.rejects(sb.process(99999).info(), sdk.ProcessNotFoundError);
      assert.ok((await sb.processes()).some((x) => x.pid === p.pid));
    }));

  it("terminal", () =>
    withSandbox(async (sb) => {
      const t = await sb.terminal(["sh"], { rows: 30, cols: 100 });
      try {
        await t.write("stty size\n");
        assert.match(await t.readUntil("30 100"), /30 100/);
        await t.resize(40, 120);
        await t.write("stty size; exit 7\n");
        let seen = "";
        for await (const chunk of t) seen += chunk.toString();
        assert.match(seen, /40 120/);
        assert.equal(t.exit.exit_code, 7);
        assert.equal(t.exit.tty, true);
      } finally {
        t.close();
      }
      await assert.rejects(sb.process(99999).attach(), sdk.ProcessNotFoundError);
    }));

  it("files", () =>
    withSandbox(async (sb) => {
      await sb.files.write("dir/a.txt", "alpha", { mode: 0o600 });
      await sb.files.write("dir/b.bin", Buffer.alloc(2000, 1));
      assert.equal(await sb.files.readText("dir/a.txt"), "alpha");
      assert.equal((await sb.files.read("dir/b.bin")).length, 2000);
      const entries = await sb.files.list("dir");
      assert.deepEqual(entries.map((e) => [e.name, e.type, e.size, e.mode]), [["a.txt", "file", 5, "0600"], ["b.bin", "file", 2000, "0644"]]);
      await sb.files.mkdir("made/deep");
      assert.equal((await sb.run("test -d made/deep")).exitCode, 0);
      await assert.rejects(sb.files.read("dir"), sdk.IsDirectoryError);
      await assert.rejects(sb.files.remove("dir"), sdk.NotEmptyError);
      await assert.rejects(sb.files.read("nope.txt"), sdk.PathNotFoundError);
      await assert.rejects(sb.files.read("../etc/passwd"), sdk.InvalidRequestError);
      let streamed = "";
      for await (const c of await sb.files.readStream("dir/a.txt")) streamed += c;
      assert.equal(streamed, "alpha");
      await sb.files.remove("dir", { recursive: true });
      assert.deepEqual((await sb.files.list()).map((e) => e.name), ["made"]);
    }));

  it("archive", () =>
    withSandbox(async (sb) => {
      const dir = mkdtempSync(join(tmpdir(), "sdk-tar-"));
      writeFileSync(join(dir, "main.py"), "print('from the archive')\n");
      const tar = execFileSync("tar", ["-C", dir, "-cf", "-", "main.py"]);
      await sb.archive.upload(tar, "proj");
      assert.equal((await sb.run(["python3", "proj/main.py"])).stdout, "from the archive\n");
      const back = await sb.archive.download("proj");
      assert.match(execFileSync("tar", ["-tf", "-"], { input: back }).toString(), /main\.py/);
      let n = 0;
      for await (const c of await sb.archive.downloadStream()) n += c.length;
      assert.ok(n > 0);
      await assert.rejects(sb.archive.upload(Buffer.from("not a tar at all, not gzip either".repeat(20))), sdk.InvalidArchiveError);
    }));

  it("state, usage, extend", () =>
    withSandbox(async (sb) => {
      const st = await sb.state();
      assert.equal(st.state, "running");
      assert.ok((await sb.usage()).pids >= 1);
      assert.equal((await sb.extend(12)).limits.time_box_minutes, 12);
      await assert.rejects(sb.extend(99), sdk.InvalidRequestError);
    }));

  it("worker status and errors", async () => {
    const st = await worker.status();
    assert.ok(st.capacity >= 1 && Object.keys(st.self_test.checks).length > 0);
    const bad = new sdk.Worker({ url: env.url, token: "wrong" });
    await assert.rejects(bad.list(), (e) => e instanceof sdk.UnauthorizedError && e.status === 401);
    bad.close();
    await assert.rejects(worker.create({ time_box_minutes: 99 }), sdk.InvalidRequestError);
    await assert.rejects(worker.create({ egress: { mode: "allow", allow: ["bad name!"] } }), sdk.InvalidEgressPolicyError);
    await assert.rejects(worker.sandbox("no-such-sandbox").run("true"), sdk.SandboxNotFoundError);
    const gone = new sdk.Worker({ url: "http://127.0.0.1:1", token: "t" });
    await assert.rejects(gone.status(), sdk.TransportError);
  });

  it("ports: a server in the sandbox through portUrl(), a preview URL of its own origin", () =>
    withSandbox(async (sb) => {
      await sb.files.write("site/hello.txt", "hello, port\n");
      await sb.start(["python3", "-m", "http.server", "8000", "--bind", "127.0.0.1", "--directory", "site"]);
      assert.ok(sb.portUrl(8000, "/a?b=1").endsWith(`/v1/sandboxes/${sb.id}/ports/8000/a?b=1`));
      const deadline = Date.now() + 60_000;
      let res;
      for (;;) {
        res = await fetch(sb.portUrl(8000, "hello.txt"), { headers: sb.portHeaders() });
        if (res.status === 200 || Date.now() > deadline) break;
        assert.equal((await res.json()).error.code, "port_closed"); // while it starts
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.deepEqual([res.status, await res.text()], [200, "hello, port\n"]);
      const p = await sb.preview(8000, { ttlSeconds: 60 });
      assert.equal(p.port, 8000);
      assert.ok(p.origin.startsWith(`http://8000-${sb.id}.localhost:`) && p.url.startsWith(`${p.origin}/?sandbox_preview_token=`));
      const left = Date.parse(p.expires_at) - Date.now();
      assert.ok(left > 50_000 && left <= 61_000, `expires in ${left} ms`);
      await assert.rejects(sb.preview(8000, { ttlSeconds: 1e6 }), sdk.InvalidRequestError);
    }));

  it("browser", async () => {
    if (!env.browser) {
      await assert.rejects(worker.create({ browser: true }), sdk.NoBrowserError);
      return;
    }
    await withSandbox(async (sb) => {
      const v = await sb.browserVersion();
      assert.match(v.Browser, /Chrome/);
      assert.equal(v.webSocketDebuggerUrl, sb.browserWsUrl());
      const ws = new WebSocket(sb.browserWsUrl(), { headers: sb.browserHeaders() });
      await new Promise((r, j) => (ws.once("open", r), ws.once("error", j)));
      ws.send(JSON.stringify({ id: 1, method: "Browser.getVersion" }));
      const msg = JSON.parse(await new Promise((r) => ws.once("message", r)));
      ws.close();
      assert.match(msg.result.userAgent, /HeadlessChrome/);
    }, { browser: true });
  });

  test("close", () => worker?.close());
});

test("the README's example runs as written", async (t) => {
  const env = await workerEnv(t);
  if (!env) return;
  const { execFile } = await import("node:child_process");
  const dir = mkdtempSync(join(tmpdir(), "sdk-example-"));
  writeFileSync(join(dir, "token"), env.token);
  const here = new URL("..", import.meta.url).pathname;
  const out = await new Promise((res, rej) =>
    execFile("node", ["examples/quickstart.mjs"], {
      cwd: here, timeout: 120_000,
      env: { ...process.env, AGENTSANDBOX_URL: env.url, AGENTSANDBOX_TOKEN_FILE: join(dir, "token") },
    }, (err, stdout, stderr) => (err ? rej(new Error(`${err.message}\n${stderr}`)) : res(stdout))),
  );
  for (const want of ["exit 0 stdout 42", "live: hello world", "bg: tick 3", "terminal exit 0", "error code file_not_found", "wiped true"]) {
    assert.ok(out.includes(want), `${want} not in:\n${out}`);
  }
});

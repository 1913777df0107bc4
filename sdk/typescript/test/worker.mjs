// The tests' worker: AGENTSANDBOX_TEST_WORKER (with AGENTSANDBOX_TEST_TOKEN_FILE),
// as `make sdk-test` shares one between the suites, or a real `codes-sandbox
// serve` this file starts on loopback with a token file and a temp state dir.
import { spawn, execFileSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { after } from "node:test";

import { NoBrowserError, Worker } from "../dist/index.js";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");

/** Skip, or throw when CI is set (there a missing component is a defect). */
function missing(t, reason) {
  if (process.env.CI) throw new Error(`CI is set, so this test must run, but: ${reason}`);
  t.skip(reason);
  return undefined;
}

function which(cmd) {
  try {
    return execFileSync("sh", ["-c", `command -v ${cmd}`]).toString().trim();
  } catch {
    return "";
  }
}

let started;
let stop;

// The worker is stopped (and its sandboxes wiped) when the test file's tests are done.
after(async () => stop?.());

/** { url, token, browser } of the session's worker, or undefined when the test was skipped. */
export async function workerEnv(t) {
  if (process.env.AGENTSANDBOX_TEST_WORKER) {
    const token = readFileSync(process.env.AGENTSANDBOX_TEST_TOKEN_FILE, "utf8").trim();
    return withBrowser({ url: process.env.AGENTSANDBOX_TEST_WORKER, token });
  }
  if (started) return started;
  if (process.getuid() !== 0) return missing(t, "the worker runs sandboxes as root (or set AGENTSANDBOX_TEST_WORKER)");
  if (!which("bwrap")) return missing(t, "bubblewrap is not installed (apt-get install bubblewrap)");
  const tmp = mkdtempSync(join(tmpdir(), "agentsandbox-nodetest-"));
  chmodSync(tmp, 0o755); // the sandbox uids traverse the state directory below it
  let bin = process.env.AGENTSANDBOX_BIN;
  if (!bin) {
    bin = join(tmp, "bin");
    const go = which("go") || "/usr/local/go/bin/go";
    execFileSync(go, ["build", "-o", bin + "/", "./cmd/codes-sandbox", "./cmd/codes-sandbox-worker", "./cmd/codes-sandbox-init"], { cwd: repo, stdio: "inherit" });
  }
  const tokenFile = join(tmp, "api.token");
  writeFileSync(tokenFile, "node-api-token\n", { mode: 0o600 });
  const addrFile = join(tmp, "addr");
  const child = spawn(join(bin, "codes-sandbox"), [
    "serve", "--listen", "127.0.0.1:0", "--addr-file", addrFile, "--api-token-file", tokenFile, "--capacity", "4", "--preview-listen", "127.0.0.1:0",
    "--state-dir", join(tmp, "state"), "--browser", which("chromium") ? "auto" : "off",
  ], { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  child.stderr.on("data", (d) => (log = (log + d).slice(-8000)));
  const exited = new Promise((r) => child.once("exit", r));
  stop = async () => {
    child.kill("SIGTERM");
    await Promise.race([exited, new Promise((r) => setTimeout(r, 60_000))]);
    rmSync(tmp, { recursive: true, force: true });
  };
  const deadline = Date.now() + 120_000;
  while (!(existsSync(addrFile) && readFileSync(addrFile, "utf8").trim())) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`the worker did not start:\n${log}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  started = await withBrowser({ url: "http://" + readFileSync(addrFile, "utf8").trim(), token: "node-api-token" });
  return started;
}

/** env, with whether the worker makes browser sandboxes (it has Chromium). */
async function withBrowser(env) {
  const w = new Worker(env);
  try {
    await (await w.create({ browser: true })).delete();
    return { ...env, browser: true };
  } catch (e) {
    if (e instanceof NoBrowserError) return { ...env, browser: false };
    throw e;
  } finally {
    w.close();
  }
}

// scripts/bench-sdk.sh's TypeScript side: for each line on stdin, run `true`
// once in sandbox $SANDBOX through the SDK and print the call's wall time in
// nanoseconds, and the process's CPU time.
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";

import { Worker } from "../../sdk/typescript/dist/index.js";

const w = new Worker({ url: process.env.WORKER, token: readFileSync(process.env.TOKEN_FILE, "utf8").trim() });
const sb = w.sandbox(process.env.SANDBOX);
for await (const _ of createInterface({ input: process.stdin })) {
  const c = process.cpuUsage();
  const t = process.hrtime.bigint();
  const r = await sb.run(["true"]);
  const d = process.hrtime.bigint() - t;
  const cu = process.cpuUsage(c);
  if (r.exitCode !== 0) throw new Error(`exit ${r.exitCode}`);
  process.stdout.write(`${d} ${(cu.user + cu.system) * 1000}\n`);
}
w.close();

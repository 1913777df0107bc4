// The README's example: a sandbox, a command, a file, a background process,
// a terminal, then the wipe.
//
//   AGENTSANDBOX_URL=http://127.0.0.1:8088 AGENTSANDBOX_TOKEN_FILE=/etc/codes-sandbox/api.token node examples/quickstart.mjs
import { readFileSync } from "node:fs";

import { PathNotFoundError, Worker } from "@openvibe/agentsandbox";

const worker = new Worker({
  url: process.env.AGENTSANDBOX_URL ?? "http://127.0.0.1:8088",
  token: readFileSync(process.env.AGENTSANDBOX_TOKEN_FILE, "utf8").trim(),
});
const sb = await worker.create({ time_box_minutes: 10, limits: { memory_mb: 512 }, egress: "none" });
try {
  const r = await sb.run(["python3", "-c", "print(6 * 7)"]);
  console.log("exit", r.exitCode, "stdout", r.stdout.trim());

  await sb.files.write("app/main.py", "import sys\nprint('hello', sys.argv[1])\n");
  await sb.run(["python3", "app/main.py", "world"], { onStdout: (s) => process.stdout.write("live: " + s) });
  console.log((await sb.files.list("app")).map((e) => e.name));

  const ticker = await sb.start(["sh", "-c", "for i in 1 2 3; do echo tick $i; sleep 0.1; done"]);
  for await (const ev of ticker.output({ follow: true })) process.stdout.write("bg: " + ev.data);

  const term = await sb.terminal(["sh"]);
  await term.write("echo $((1 + 2)); exit\n");
  console.log("terminal exit", (await term.wait()).exit_code);
  term.close();

  try {
    await sb.files.read("missing.txt");
  } catch (e) {
    if (!(e instanceof PathNotFoundError)) throw e;
    console.log("error code", e.code);
  }
} finally {
  await sb[Symbol.asyncDispose](); // what `await using sb = …` does in TypeScript
  worker.close();
}
console.log("wiped", sb.wipeReport?.verified);

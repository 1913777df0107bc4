// The SDK keeps to docs/openapi.yaml: every route, schema and field of the
// document has a counterpart here, or sdk/conformance.json names it as left
// out (with why) or pending (with the issue it lands with); and nothing here
// is missing from the document.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import * as sdk from "../dist/index.js";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../../..");
const doc = JSON.parse(readFileSync(resolve(root, "docs/openapi.yaml"), "utf8"));
const rules = JSON.parse(readFileSync(resolve(root, "sdk/conformance.json"), "utf8"));
const source = ["worker.ts", "http.ts"].map((f) => readFileSync(resolve(here, "../src", f), "utf8")).join("\n");

function glob(pattern) {
  return new RegExp("^" + pattern.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".") + "$");
}

/** Why key is left out or pending, or "". */
function excused(key) {
  for (const table of [rules.left_out, rules.pending]) {
    for (const [pattern, why] of Object.entries(table)) if (glob(pattern).test(key)) return why;
  }
  return "";
}

const docRoutes = new Set(
  Object.entries(doc.paths).flatMap(([p, item]) => Object.keys(item).filter((m) => m !== "parameters").map((m) => `${m.toUpperCase()} ${p}`)),
);

test("routes", () => {
  const ours = new Set(Object.values(sdk.routes).map((r) => `${r.method} ${r.template}`));
  assert.deepEqual([...docRoutes].filter((r) => !ours.has(r) && !excused(r)), [], "routes of docs/openapi.yaml the SDK does not call");
  assert.deepEqual([...ours].filter((r) => !docRoutes.has(r)), [], "routes the SDK calls that docs/openapi.yaml lacks");
  const unused = Object.keys(sdk.routes).filter((name) => !source.includes(`routes.${name}`));
  assert.deepEqual(unused, [], "routes the client never calls");
});

test("schemas and fields", () => {
  const bySchema = new Map();
  for (const w of sdk.WIRE_FIELDS) for (const s of w.schemas) bySchema.set(s, w);
  const problems = [];
  for (const [name, schema] of Object.entries(doc.components.schemas)) {
    const w = bySchema.get(name);
    if (!w) {
      if (!excused(name)) problems.push(`schema ${name} has no type (or an entry in sdk/conformance.json)`);
      continue;
    }
    const theirs = new Set(w.schemas.flatMap((s) => Object.keys(doc.components.schemas[s].properties ?? {})));
    for (const f of theirs) if (!w.fields.includes(f) && !excused(`${name}.${f}`)) problems.push(`${name}.${f} has no field in ${w.type}`);
    for (const f of w.fields) if (!theirs.has(f)) problems.push(`${w.type}.${f} is not in ${w.schemas.join("/")}`);
    void schema;
  }
  for (const s of bySchema.keys()) if (!doc.components.schemas[s]) problems.push(`${s} is not a schema of the document`);
  assert.deepEqual(problems, []);
});

test("error codes", () => {
  const desc = doc.components.schemas.Error.properties.code.description;
  const codes = desc.split(":")[1].split(".")[0].split(",").map((c) => c.trim().replace(/\s*\(\d+\)$/, ""));
  assert.ok(codes.includes("sandbox_not_found") && codes.includes("workspace_full"), String(codes));
  assert.deepEqual(codes.filter((c) => !sdk.ERROR_CLASSES.has(c)), [], "error codes without a class");
  for (const [code, cls] of sdk.ERROR_CLASSES) {
    assert.ok(desc.includes(code), `${cls.name} stands for ${code}, which docs/openapi.yaml does not list`);
    assert.equal(sdk[cls.name], cls, `${cls.name} is exported`);
  }
});

test("parameters", () => {
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      if (method === "parameters") continue;
      for (const prm of op.parameters ?? []) {
        const key = `${method.toUpperCase()} ${path} ${prm.in} ${prm.name}`;
        assert.ok(source.includes(`"${prm.name}"`) || source.includes(`${prm.name}:`) || excused(key), `${key} is never sent`);
      }
    }
  }
});

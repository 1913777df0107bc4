// golden.mjs — the reference verdicts for contract/testdata/golden.
//
// For every contract/testdata/golden/NAME.json it validates each case's input
// against contract/schemas/NAME.json with the reference implementation the JS
// SDK uses (ajv 8, Ajv2020 for draft 2020-12, allErrors, ajv-formats) and
// writes the verdict into the case as the SDK shapes it:
// {valid, errors: [{path: instancePath, message}]}, sorted by (path, message).
//
// A case is {"name", "input": <JSON value>} or {"name", "raw": "<JSON text>"}
// (raw keeps number spellings such as 2.0 that a JSON value would lose).
//
// Usage (node >= 18, from this folder, after `npm ci`):
//   node golden.mjs           rewrite the expected verdicts from the inputs
//   node golden.mjs --check   exit 1 and list the cases whose stored verdict
//                             differs from ajv's (nothing is written)
import {readFileSync, readdirSync, writeFileSync} from "node:fs";
import {dirname, join} from "node:path";
import {fileURLToPath} from "node:url";
import {createRequire} from "node:module";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..", "..");
const schemaDir = join(root, "contract", "schemas");
const goldenDir = join(root, "contract", "testdata", "golden");
const require = createRequire(import.meta.url);
const reference = `ajv ${require("ajv/package.json").version} (Ajv2020, allErrors) + ajv-formats ${require("ajv-formats/package.json").version}`;

const check = process.argv.includes("--check");
if (process.argv.slice(2).some((a) => a !== "--check")) {
  console.error("usage: node golden.mjs [--check]");
  process.exit(2);
}

// verdict is what the JS SDK's contracts.validate returns.
function verdict(validate, input) {
  const valid = validate(input);
  const errors = (validate.errors ?? []).map((e) => ({path: e.instancePath, message: e.message}));
  errors.sort((a, b) => cmp(a.path, b.path) || cmp(a.message, b.message));
  return {valid, errors};
}

function cmp(a, b) {
  return a < b ? -1 : a > b ? 1 : 0;
}

// format writes one case per line, so that a diff shows the cases that changed.
function format(doc) {
  const cases = doc.cases.map((c) => "    " + JSON.stringify(c)).join(",\n");
  return `{\n  "contract": ${JSON.stringify(doc.contract)},\n  "reference": ${JSON.stringify(doc.reference)},\n  "cases": [\n${cases}\n  ]\n}\n`;
}

let differ = 0;
for (const file of readdirSync(goldenDir).filter((f) => f.endsWith(".json")).sort()) {
  const name = file.slice(0, -".json".length);
  // strictTypes off only silences ajv's warning about the untyped `minimum`
  // branches of capacity/active (see the schema's $comment); verdicts are the same.
  const ajv = new Ajv2020({allErrors: true, strictTypes: false});
  addFormats(ajv);
  const validate = ajv.compile(JSON.parse(readFileSync(join(schemaDir, file), "utf8")));
  const path = join(goldenDir, file);
  const doc = JSON.parse(readFileSync(path, "utf8"));
  if (doc.contract !== name) throw new Error(`${path}: "contract" must be ${JSON.stringify(name)}`);
  const names = new Set();
  const cases = doc.cases.map((c) => {
    if (names.has(c.name)) throw new Error(`${path}: duplicate case name ${JSON.stringify(c.name)}`);
    names.add(c.name);
    const input = "raw" in c ? JSON.parse(c.raw) : c.input;
    const {valid, errors} = verdict(validate, input);
    const {name: caseName, input: value, raw} = c;
    const out = "raw" in c ? {name: caseName, raw, valid, errors} : {name: caseName, input: value, valid, errors};
    if (JSON.stringify({valid: c.valid, errors: c.errors}) !== JSON.stringify({valid, errors})) {
      differ++;
      if (check) console.error(`${file}: ${c.name}: stored ${JSON.stringify({valid: c.valid, errors: c.errors})}, ajv says ${JSON.stringify({valid, errors})}`);
    }
    return out;
  });
  const text = format({contract: name, reference, cases});
  if (check) {
    if (doc.reference !== reference) console.warn(`${file}: note: made with ${doc.reference}, checked with ${reference}`);
  } else {
    writeFileSync(path, text);
  }
  console.log(`${file}: ${cases.length} cases`);
}
if (check && differ > 0) {
  console.error(`${differ} difference(s): run "node golden.mjs" to regenerate, then "go test ./contract"`);
  process.exit(1);
}

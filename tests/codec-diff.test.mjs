// The codec against Node's JSON.parse on the codec fuzz corpus plus generated numbers,
// strings and dates (scripts/codec-diff.mjs; `npm run fuzz:codec-diff` prints the report).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");

test("codec round trip agrees with JSON.parse (differential corpus check)", () => {
  const r = spawnSync(process.execPath, ["scripts/codec-diff.mjs"], { cwd: ROOT, encoding: "utf8", timeout: 300_000 });
  const report = `${r.stdout}${r.stderr}`;
  assert.equal(r.status, 0, report);
  assert.match(report, / 0 divergences/);
});

// `wrangler deploy --dry-run` bundles the worker offline (it runs the [build] command too).

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { ROOT } from "./lib/harness.mjs";

test("wrangler deploy --dry-run bundles the worker", { timeout: 10 * 60 * 1000 }, () => {
  const require = createRequire(join(ROOT, "package.json"));
  const wrangler = join(dirname(require.resolve("wrangler/package.json")), "bin", "wrangler.js");
  const outdir = mkdtempSync(join(tmpdir(), "world-celld-dryrun-"));
  try {
    const r = spawnSync(process.execPath, [wrangler, "deploy", "--dry-run", "--outdir", outdir], {
      cwd: ROOT,
      encoding: "utf8",
      env: { ...process.env, WRANGLER_SEND_METRICS: "false", CI: "true" },
    });
    const out = `${r.stdout}\n${r.stderr}`;
    assert.equal(r.status, 0, `wrangler deploy --dry-run failed:\n${out.slice(-4000)}`);
    assert.match(out, /--dry-run: exiting now/);
    const files = readdirSync(outdir);
    assert.ok(files.includes("index.js"), `no index.js in the bundle: ${files.join(", ")}`);
    const wasm = files.filter((f) => f.endsWith(".wasm"));
    assert.ok(wasm.length >= 1, `no .wasm module in the bundle: ${files.join(", ")}`);
    for (const f of wasm) assert.ok(statSync(join(outdir, f)).size > 1000, `${f} is suspiciously small`);
    // The durable object bindings made it into the summary.
    for (const b of ["WORKFLOW_DB", "WORKFLOW_STREAMS", "WORKFLOW_INDEX", "WORKFLOW_QUEUE"]) {
      assert.match(out, new RegExp(b), `binding ${b} missing from the dry-run summary`);
    }
  } finally {
    if (existsSync(outdir)) rmSync(outdir, { recursive: true, force: true });
  }
});

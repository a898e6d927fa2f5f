// IndexDO `index` (the pre-upgrade archive) is on no run's path (issue #54): a run's start
// and status changes through the 0.3 facade never ask about it; on a fresh deployment an
// isolate's first call that needs to know finds it migrated (no cron tick needed, which
// `wrangler dev` never runs); WORKFLOW_INDEX_ARCHIVE=none keeps every run, listing, hook and
// expiry off it. Miniflare persists each object it instantiates as its own SQLite file (a
// read alone creates it), which is how "touched" is seen here.

import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startWorker, STANDARD_VARS } from "./lib/harness.mjs";

/** Every file name under `dir`, recursively. */
function files(dir) {
  return readdirSync(dir).flatMap((f) => (statSync(join(dir, f)).isDirectory() ? files(join(dir, f)) : [f]));
}

/** Whether IndexDO `index` has been instantiated (its SQLite file exists). */
async function archiveTouched(w, dir) {
  const ns = await w.mf.getDurableObjectNamespace("WORKFLOW_INDEX");
  const id = ns.idFromName("index").toString();
  return files(dir).some((f) => f.startsWith(id));
}

/** A 0.3 run's index writes: its start and two status changes (the client's putOwned). */
async function runKeys(w, runId) {
  for (const key of [`run:wf:0000000000001:${runId}`, `runall:0000000000001:${runId}`, `correlation:c:0000000000001:evnt_1:${runId}`, `run:wf:0000000000002:${runId}`]) {
    assert.deepEqual(await w.rpc("index", "index", "putOwned", [runId, key, "{}"]), { stored: true }, key);
  }
}

test("a fresh deployment: a run's start never touches the archive; the first read finds it migrated", { timeout: 60_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "celld-archive-"));
  const w = await startWorker({ persistDir: dir });
  try {
    for (let i = 0; i < 5; i++) await runKeys(w, `wrun_fresh${i}`);
    assert.equal(await archiveTouched(w, dir), false, "IndexDO index instantiated by a run's start");
    // A listing reads it once: an empty archive reads as migrated, nothing is written, and
    // this isolate asks no more (a hook reservation and a run's expiry go to the shards).
    assert.equal((await w.rpc("index", "index", "list", [{ prefix: "runall:" }])).keys.length, 5);
    assert.equal(await archiveTouched(w, dir), true);
    assert.deepEqual(await w.rpc("index", "index", "list", [{ prefix: "celld" }]), { keys: [], list_complete: true }, "no key written in the archive");
    assert.equal((await w.rpc("index", "index", "reserveHookToken", ["tok_f", { runId: "wrun_fresh0", hookId: "hook_f" }])).claimed, true);
    const expired = await w.rpc("index", "index", "expireRun", [{ runId: "wrun_fresh1", keys: ["runall:0000000000001:wrun_fresh1"], hooks: [], expiredAt: 1 }]);
    assert.deepEqual(expired, { deleted: 1 });
    assert.deepEqual(await w.rpc("index", "index", "list", [{ prefix: "expired:" }]), { keys: [], list_complete: true }, "no expiry fence in the archive");
  } finally {
    await w.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("WORKFLOW_INDEX_ARCHIVE=none: reads, hooks and expiry answered without ever touching the archive; a bad value is refused", { timeout: 60_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "celld-archive-none-"));
  const w = await startWorker({ persistDir: dir, vars: { ...STANDARD_VARS, WORKFLOW_INDEX_ARCHIVE: "none" } });
  try {
    const runId = "wrun_none";
    await runKeys(w, runId);
    assert.equal((await w.rpc("index", "index", "list", [{ prefix: "runall:" }])).keys.length, 1);
    assert.equal(await w.rpc("index", "index", "get", [`runall:0000000000001:${runId}`]), "{}");
    assert.equal(await w.rpc("index", "index", "get", ["hook:tok_none"]), null);
    const owner = { runId, hookId: "hook_none" };
    assert.equal((await w.rpc("index", "index", "reserveHookToken", ["tok_none", owner])).claimed, true);
    const expired = await w.rpc("index", "index", "expireRun", [{ runId, keys: [`runall:0000000000001:${runId}`], hooks: [], expiredAt: 1 }]);
    assert.deepEqual(expired, { deleted: 1 });
    const bad = await w.rpc.raw("index", "index", "expireRun", [null]);
    assert.equal(bad.status, 500);
    assert.equal(bad.value.error.name, "TypeError");
    assert.equal(await archiveTouched(w, dir), false, "IndexDO index instantiated");
  } finally {
    await w.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
  const wrong = await startWorker({ vars: { ...STANDARD_VARS, WORKFLOW_INDEX_ARCHIVE: "off" } });
  try {
    const r = await wrong.rpc.raw("index", "index", "list", [{}]);
    assert.equal(r.status, 500);
    assert.match(r.value.error.message, /WORKFLOW_INDEX_ARCHIVE must be "auto" or "none"/);
    // A run's start does not depend on it and still works.
    assert.deepEqual(await wrong.rpc("index", "index", "putOwned", ["wrun_w", "runall:0000000000001:wrun_w", "{}"]), { stored: true });
  } finally {
    await wrong.dispose();
  }
});

// Each object's read cache (src/store/cached.rs, src/shell/kv.rs `ObjectStorage`) follows
// every way the object writes its storage, over the wire: the buffered writes of the
// synchronous calls (which update it), and the writes that bypass it and must empty it:
// a call too large to buffer (run again with direct writes inside `transactionSync`), and
// the asynchronous paths that write inside their own transactions (the run's retention
// cleanup, the catalog's expiry fence). Each test first makes the object read (and so
// cache) the keys the bypassing write then changes, and then reads them back.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { STANDARD_VARS, startWorker } from "./lib/harness.mjs";
import { worldClient } from "./lib/world-client.mjs";

let w;
before(async () => {
  // The catalog fence test writes `correlation:` keys, which only the 0.3.0 reference's
  // correlation index stores.
  w = await startWorker({ vars: { ...STANDARD_VARS, WORKFLOW_CORRELATION_INDEX: "on" } });
});
after(async () => {
  await w?.dispose();
});

const runs = (runId, method, args = []) => w.rpc("runs", runId, method, args);
const ix = (method, args = []) => w.rpc("index", "index", method, args);
const slot = (n) => `evnt_${String(n).padStart(26, "0")}`;
const client = (opts) => worldClient(w.rpc, opts);

async function startedRun(c, runId) {
  await c.createEvent(runId, { eventType: "run_created", specVersion: 6, eventData: { deploymentId: "dep", workflowName: "wf-cache", input: new Uint8Array([1]) } });
  return c.createEvent(runId, { eventType: "run_started", specVersion: 6 });
}

test("a call too large to buffer (direct writes in a transaction) is seen by the next calls", async () => {
  const c = client();
  const id = "wrun_cache_direct";
  await startedRun(c, id);
  // The step's key and the event sequence are read (and cached) by the buffered attempt
  // before the call falls back to direct writes: a 2.1 MB record is over the buffered
  // bound (2 000 000 bytes, src/store/buffered.rs) and under the platform's row limit.
  const payload = new Uint8Array(2_100_000).fill(7);
  const big = await c.createEvent(id, { eventType: "step_created", specVersion: 6, correlationId: "big", eventData: { stepName: "s", input: payload } });
  assert.equal(big.event.eventId, slot(3));
  const started = await c.createEvent(id, { eventType: "step_started", specVersion: 6, correlationId: "big" });
  assert.equal(started.ok, true, JSON.stringify(started));
  assert.equal(started.event.eventId, slot(4), "the event sequence the direct call wrote");
  assert.equal(started.step.status, "running");
  assert.equal(started.step.attempt, 1);
  // A direct call the platform refuses rolls back: the sequence is where it was.
  const tooBig = await w.rpc.raw("runs", id, "applyEvent", [
    { runId: id, data: { eventType: "step_created", specVersion: 6, correlationId: "huge", eventData: { stepName: "s", input: new Uint8Array(2_300_000) } }, cleanup: { retentionMs: 0, queueShards: 1 } },
  ]);
  assert.equal(tooBig.status, 500);
  const next = await c.createEvent(id, { eventType: "step_completed", specVersion: 6, correlationId: "big", eventData: { result: new Uint8Array([9]) } });
  assert.equal(next.event.eventId, slot(5));
  assert.equal((await runs(id, "getStep", ["huge"])).value, null);
  const ids = (await runs(id, "listEvents", [{ limit: 10, sortOrder: "asc" }])).value.data.map((e) => e.eventId);
  assert.deepEqual(ids, [1, 2, 3, 4, 5].map(slot));
});

test("the retention cleanup's own transactions are seen by the reads that follow", async () => {
  const c = client({ retentionMs: 1, queueShards: 1 });
  const id = "wrun_cache_cleanup";
  await startedRun(c, id);
  const done = await c.createEvent(id, { eventType: "run_completed", specVersion: 6, eventData: { output: new Uint8Array([2]) } });
  assert.equal(done.run.status, "completed");
  // Cache the cleanup record and the tombstone as they are before the cleanup runs.
  const before = await runs(id, "getCleanupStatus");
  assert.notEqual(before.phase, "tombstoned");
  await runs(id, "getRun");
  // cleanupNow runs the cleanup's first steps (each its own transaction) before it
  // answers; the alarm finishes the rest. Every read after it sees at least that far.
  const record = await runs(id, "cleanupNow", [{ retentionMs: 1, queueShards: 1 }]);
  assert.ok(record.generation > before.generation, JSON.stringify({ before, record }));
  const after = await runs(id, "getCleanupStatus");
  assert.ok(after.generation >= record.generation, JSON.stringify({ record, after }));
  let status = after;
  for (const deadline = Date.now() + 10_000; status.phase !== "tombstoned"; status = await runs(id, "getCleanupStatus")) {
    assert.ok(Date.now() < deadline, `not tombstoned: ${JSON.stringify(status)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const run = await runs(id, "getRun");
  assert.equal(run.code, "RUN_EXPIRED");
  assert.equal(run.tombstone.cleanup.phase, "tombstoned");
  assert.equal(run.tombstone.cleanup.deletedPayloadKeys, status.deletedPayloadKeys);
  assert.ok(status.deletedPayloadKeys > 0);
});

test("the catalog's expiry fence, written by its asynchronous expireRun, refuses the next putOwned", async () => {
  const run = "wrun_cache_fence";
  const key = (n) => `correlation:c${n}:1796000000000:${slot(n)}:${run}`;
  // Two writes: the second answers the fence check from the cache.
  assert.deepEqual(await ix("putOwned", [run, key(1), "{}"]), { stored: true });
  assert.deepEqual(await ix("putOwned", [run, key(2), "{}"]), { stored: true });
  assert.deepEqual(await ix("expireRun", [{ runId: run, keys: [key(1), key(2)], hooks: [], expiredAt: 946684800000 }]), { deleted: 2 });
  assert.deepEqual(await ix("putOwned", [run, key(3), "{}"]), { stored: false });
  assert.equal(await ix("get", [key(3)]), null);
});

// Terminal-run retention end to end on Miniflare with real alarms (spec retention.md):
// 100 terminal runs, each with events, steps, a hook, a stream and a delayed queue message,
// retained for 1 s, are tombstoned everywhere; nothing can resurrect them; and a cleanup
// interrupted by a runtime restart over persisted state finishes.

import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { STANDARD_VARS, startWorker } from "./lib/harness.mjs";
import { worldClient } from "./lib/world-client.mjs";

const RETENTION_MS = 1000;
const QUEUE_SHARDS = 2;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function pool(items, concurrency, fn) {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < items.length) await fn(items[next++]);
    }),
  );
}

/** One run's whole life as the client would drive it, ending terminal. */
async function liveAndDie(w, client, runId, i, { queue = true } = {}) {
  const c = client;
  const input = new Uint8Array([1, 2, 3, i & 0xff]);
  await c.createEvent(runId, { eventType: "run_created", specVersion: 6, eventData: { deploymentId: "dep", workflowName: "wf-ret", input } });
  await c.createEvent(runId, { eventType: "run_started", specVersion: 6 });
  await c.createEvent(runId, { eventType: "step_created", specVersion: 6, correlationId: "s1", eventData: { stepName: "st", input } });
  await c.createEvent(runId, { eventType: "step_completed", specVersion: 6, correlationId: "s1", eventData: { result: input } });
  const hook = await c.createEvent(runId, { eventType: "hook_created", specVersion: 6, correlationId: "h1", eventData: { token: `tok-${runId}` } });
  assert.equal(hook.ok, true);
  await c.writeToStream(runId, `out-${runId}`, input);
  await w.rpc("streams", `stream:out-${runId}`, "closeStream", [runId]);
  const queued = !queue ? { ok: true } : await c.enqueue({
    messageId: `msg_${runId}`,
    queueName: "__wkf_workflow_wf-ret",
    body: JSON.stringify({ runId }),
    runId,
    delaySeconds: 3600,
    targetBaseUrl: "http://127.0.0.1:9",
  });
  assert.equal(queued.ok, true, JSON.stringify(queued));
  const done = await c.createEvent(runId, { eventType: i % 2 ? "run_failed" : "run_completed", specVersion: 6, eventData: i % 2 ? { error: "x" } : { output: input } });
  assert.equal(done.ok, true);
  assert.ok(done.run.expiredAt instanceof Date, "terminal outcome carries expiredAt");
}

async function waitTombstoned(w, runIds, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const statuses = await Promise.all(runIds.map((id) => w.rpc("runs", id, "getCleanupStatus", [])));
    const pending = statuses.filter((s) => s?.phase !== "tombstoned");
    if (pending.length === 0) return statuses;
    if (Date.now() > deadline) {
      throw new Error(`${pending.length} runs not tombstoned, e.g. ${JSON.stringify(pending[0])}`);
    }
    await sleep(250);
  }
}

test("100 terminal runs with retention 1 s are tombstoned everywhere and stay dead", { timeout: 180_000 }, async () => {
  const w = await startWorker();
  try {
    const client = worldClient(w.rpc, { retentionMs: RETENTION_MS, queueShards: QUEUE_SHARDS });
    const runIds = Array.from({ length: 100 }, (_, i) => `wrun_ret_${String(i).padStart(3, "0")}`);
    await pool(runIds.map((id, i) => [id, i]), 8, ([id, i]) => liveAndDie(w, client, id, i));
    // (The early runs are already being cleaned up while the late ones are created, so the
    // per-run counters below, not a queue total here, prove each run's message existed.)
    const statuses = await waitTombstoned(w, runIds, 90_000);
    for (const s of statuses) {
      assert.equal(s.deletedStreams, 1, JSON.stringify(s));
      assert.equal(s.deletedQueueMessages, 1, JSON.stringify(s));
      assert.ok(s.deletedPayloadKeys > 10, JSON.stringify(s));
      assert.equal(s.attempts, 0);
      assert.ok(s.tombstonedAt instanceof Date);
    }

    for (const id of runIds.slice(0, 10)) {
      const read = await w.rpc("runs", id, "getRun", []);
      assert.equal(read.code, "RUN_EXPIRED");
      assert.equal(read.tombstone.runId, id);
      assert.ok(!("input" in read.tombstone) && !("output" in read.tombstone));
      for (const method of ["listEvents", "listSteps", "listHooks"]) {
        assert.equal((await w.rpc("runs", id, method, [{}])).code, "RUN_EXPIRED", method);
      }
    }

    // Both queue shards are empty; nothing is left in the index (the fences that refuse late
    // writes are the shards' own: the pre-upgrade archive is on no run's path).
    for (const s of [0, 1]) {
      const stats = await w.rpc("queue", `q:${s}`, "stats", []);
      assert.deepEqual([stats.pending, stats.inflight, stats.deadLetters], [0, 0, 0], `q:${s}`);
    }
    const index = await w.rpc("index", "index", "list", [{ limit: 1000 }]);
    assert.deepEqual(index.keys, []);
    assert.equal(await w.rpc("index", "index", "get", [`hook:tok-${runIds[0]}`]), null);

    // Late writes cannot resurrect anything.
    const client2 = worldClient(w.rpc, { retentionMs: RETENTION_MS, queueShards: QUEUE_SHARDS });
    for (const id of runIds.slice(0, 5)) {
      const late = await w.rpc("runs", id, "applyEvent", [{ runId: id, data: { eventType: "run_started", specVersion: 6 }, cleanup: { retentionMs: 0, queueShards: 2 } }]);
      assert.equal(late.code, "RUN_EXPIRED");
      const stored = await w.rpc("index", "index", "putOwned", [id, `run:wf-ret:0000000000001:${id}`, "{}"]);
      assert.equal(stored.stored, false);
      const enq = await client2.enqueue({ messageId: `late_${id}`, queueName: "q", body: "{}", runId: id, targetBaseUrl: "http://127.0.0.1:9" });
      assert.equal(enq.code, "RUN_EXPIRED");
      const write = await w.rpc.raw("streams", `stream:out-${id}`, "writeChunk", [id, new Uint8Array([9])]);
      assert.equal(write.status, 500);
      assert.match(write.value.error.message, /expired/);
      const register = await w.rpc.raw("streams", `run-streams:${id}`, "registerStream", [id, "fresh"]);
      assert.equal(register.status, 500);
    }
  } finally {
    await w.dispose();
  }
});

test("cleanups interrupted by a runtime restart finish over the persisted state", { timeout: 180_000 }, async () => {
  // Deterministic interruption: the first runtime has no WORKFLOW_QUEUE binding, so every
  // cleanup of group A fails in its queues phase (recorded, retried with backoff) after the
  // index and streams phases committed; group B is still retained, its alarm pending.
  // The restarted runtime (all bindings, same persisted state) must finish both groups.
  const dir = mkdtempSync(join(tmpdir(), "celld-retention-"));
  let w = await startWorker({ persistDir: dir, omitBindings: ["WORKFLOW_QUEUE"] });
  try {
    const groupA = Array.from({ length: 20 }, (_, i) => `wrun_rsa_${String(i).padStart(2, "0")}`);
    const groupB = Array.from({ length: 20 }, (_, i) => `wrun_rsb_${String(i).padStart(2, "0")}`);
    const clientA = worldClient(w.rpc, { retentionMs: RETENTION_MS, queueShards: QUEUE_SHARDS });
    const clientB = worldClient(w.rpc, { retentionMs: 60_000, queueShards: QUEUE_SHARDS });
    await pool(groupA.map((id, i) => [id, i]), 8, ([id, i]) => liveAndDie(w, clientA, id, i, { queue: false }));
    await pool(groupB.map((id, i) => [id, i]), 8, ([id, i]) => liveAndDie(w, clientB, id, i, { queue: false }));
    const deadline = Date.now() + 30_000;
    for (;;) {
      const stuck = await Promise.all(groupA.map((id) => w.rpc("runs", id, "getCleanupStatus", [])));
      if (stuck.every((s) => s.phase === "queues" && s.attempts >= 1)) {
        assert.equal(stuck[0].lastError, "world-celld retention missing binding WORKFLOW_QUEUE");
        assert.equal(stuck[0].deletedStreams, 1);
        break;
      }
      assert.ok(Date.now() < deadline, `group A did not reach the queues phase: ${JSON.stringify(stuck[0])}`);
      await sleep(200);
    }
    for (const id of groupB) assert.equal((await w.rpc("runs", id, "getCleanupStatus", [])).phase, "retained");
    await w.dispose();

    w = await startWorker({ persistDir: dir });
    const a = await waitTombstoned(w, groupA, 60_000);
    assert.ok(a.every((s) => s.deletedStreams === 1 && s.attempts === 0 && s.lastError === undefined));
    // Group B: bring its due time forward; its alarm, armed before the restart, is
    // re-armed by cleanupNow, which runs one page on a scheduled run (spec-0.4: retained ->
    // index); the alarm pages the rest.
    for (const id of groupB) {
      const r = await w.rpc("runs", id, "cleanupNow", [{ retentionMs: 60_000, queueShards: QUEUE_SHARDS }]);
      assert.ok(["index", "tombstoned"].includes(r.phase), JSON.stringify(r));
    }
    await waitTombstoned(w, groupB, 60_000);
    const index = await w.rpc("index", "index", "list", [{ limit: 1000 }]);
    assert.ok(index.keys.every((k) => k.name.startsWith("expired:")));
  } finally {
    await w.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a retained run's alarm survives a runtime restart", { timeout: 60_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "celld-retention-"));
  let w = await startWorker({ persistDir: dir });
  try {
    const client = worldClient(w.rpc, { retentionMs: 2500, queueShards: QUEUE_SHARDS });
    const runIds = ["wrun_alarm_0", "wrun_alarm_1", "wrun_alarm_2"];
    for (const [i, id] of runIds.entries()) await liveAndDie(w, client, id, i);
    for (const id of runIds) assert.equal((await w.rpc("runs", id, "getCleanupStatus", [])).phase, "retained");
    await w.dispose();
    w = await startWorker({ persistDir: dir });
    const statuses = await waitTombstoned(w, runIds, 30_000);
    assert.ok(statuses.every((s) => s.deletedQueueMessages === 1));
  } finally {
    await w.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
});

/** Run the worker's `scheduled` handler for the hourly retention cron (Miniflare's trigger). */
async function sweep(w) {
  const res = await fetch(new URL("/cdn-cgi/handler/scheduled?cron=0+*+*+*+*", w.url));
  assert.equal(res.status, 200, await res.text());
}

test("the hourly sweep expires runs older than WORKFLOW_RETENTION_MS, oldest first, in batches", { timeout: 90_000 }, async () => {
  const vars = { ...STANDARD_VARS, WORKFLOW_RETENTION_MS: "3000", WORKFLOW_RETENTION_BATCH_SIZE: "2", WORKFLOW_RETENTION_QUEUE_SHARDS: "2" };
  const w = await startWorker({ vars, unsafeTriggerHandlers: true });
  try {
    // A 0.3 client with terminal retention off: pending, running and completed runs.
    const c = worldClient(w.rpc, { retentionMs: 0, queueShards: QUEUE_SHARDS });
    const old = ["wrun_age_0", "wrun_age_1", "wrun_age_2"];
    for (const [i, runId] of old.entries()) {
      await c.createEvent(runId, { eventType: "run_created", specVersion: 6, eventData: { deploymentId: "dep", workflowName: "wf-age", input: null } });
      if (i >= 1) await c.createEvent(runId, { eventType: "run_started", specVersion: 6 });
      if (i === 2) await c.createEvent(runId, { eventType: "run_completed", specVersion: 6, eventData: { output: null } });
    }
    await sweep(w); // every run is younger than 3 s: nothing happens
    for (const runId of old) assert.notEqual(await w.rpc("runs", runId, "getLifecycleStatus", []), "expired");
    await sleep(3500);
    const young = "wrun_age_young";
    await c.createEvent(young, { eventType: "run_created", specVersion: 6, eventData: { deploymentId: "dep", workflowName: "wf-age", input: null } });

    await sweep(w); // batch of 2: the two oldest
    const states = await Promise.all(old.map((id) => w.rpc("runs", id, "getLifecycleStatus", [])));
    assert.deepEqual(states, ["expired", "expired", "terminal"]);
    await sweep(w); // the third
    assert.equal(await w.rpc("runs", old[2], "getLifecycleStatus", []), "expired");
    assert.equal(await w.rpc("runs", young, "getLifecycleStatus", []), "active");

    const done = await waitTombstoned(w, old, 30_000);
    for (const [i, record] of done.entries()) {
      assert.equal(record.reason, "maximum-age");
      assert.equal(record.status, ["pending", "running", "completed"][i]);
      assert.equal(record.queueShards, 2, "the sweep's fallback: these runs recorded none");
    }
    const listed = await w.rpc("index", "index", "list", [{ prefix: "runall:" }]);
    assert.deepEqual(listed.keys.map((k) => k.name.split(":").pop()), [young]);
    await sweep(w); // idle
    assert.equal(await w.rpc("runs", young, "getLifecycleStatus", []), "active");
  } finally {
    await w.dispose();
  }
});

// The in-place upgrade (issue #9): data in the pre-upgrade layout — run, correlation and
// hook entries and open claims in IndexDO `index`, as today's release writes them — stays
// visible and keeps blocking through the facade; the cron-driven migration moves it into
// the shards in bounded steps, survives restarts in the middle, and leaves no live entry
// in the archive.
//
// The pre-upgrade layout is written by the IndexDO class itself (unchanged by the upgrade)
// on instance `index`, called over its internal hop exactly as the previous release's
// router forwarded the 0.3 client's calls; runs, streams and queue messages are written
// through the public RPC. State persists across restarts in a temporary directory.

import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startWorker, STANDARD_VARS } from "./lib/harness.mjs";
import { enqueueRequest } from "./lib/queue-target.mjs";

const VARS = { ...STANDARD_VARS, WORKFLOW_INDEX_MIGRATION_BUDGET: "4" };

/** A call on IndexDO `index` itself (the pre-upgrade router's forward). */
async function archive(w, method, args = []) {
  const ns = await w.mf.getDurableObjectNamespace("WORKFLOW_INDEX");
  const res = await ns.get(ns.idFromName("index")).fetch("https://celld.internal/rpc", {
    method: "POST",
    headers: { "x-celld-method": method, "x-celld-name": "index" },
    body: JSON.stringify(args),
  });
  const text = await res.text();
  assert.equal(res.status, 200, `${method}: ${text}`);
  return JSON.parse(text);
}

async function apply(w, runId, data, extra = {}) {
  const request = { runId, data: { specVersion: 6, ...data }, ...extra, cleanup: { retentionMs: 0, queueShards: 1 } };
  const out = await w.rpc("runs", runId, "applyEvent", [request]);
  assert.equal(out.ok, true, JSON.stringify(out));
  return out;
}

const ix = (w, method, args) => w.rpc("index", "index", method, args);

async function tick(w) {
  const worker = await w.mf.getWorker();
  await worker.scheduled({ cron: "*/10 * * * *" });
  return archive(w, "get", ["celld-migration:v1"]);
}

test("pre-upgrade index data: visible, blocking, migrated across restarts, archive emptied", { timeout: 240_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "celld-upgrade-"));
  let w = await startWorker({ persistDir: dir, vars: VARS });
  try {
    // ---- the previous release's layout --------------------------------------------------
    const runs = [];
    const statuses = ["pending", "running", "completed", "failed", "cancelled"];
    for (const [i, status] of statuses.entries()) {
      const runId = `wrun_up_${i}`;
      const created = await apply(w, runId, {
        eventType: "run_created",
        eventData: { deploymentId: "dep", workflowName: "wf-up", input: new Uint8Array([i]) },
      });
      const ms = String(created.run.createdAt.getTime()).padStart(13, "0");
      const meta = JSON.stringify({ runId, status });
      for (const key of [`run:wf-up:${ms}:${runId}`, `runall:${ms}:${runId}`]) {
        assert.deepEqual(await archive(w, "putOwned", [runId, key, meta]), { stored: true });
      }
      await archive(w, "putOwned", [runId, `correlation:c${i}:${ms}:evnt_${i}:${runId}`, meta]);
      if (status !== "pending") await apply(w, runId, { eventType: "run_started" });
      runs.push({ runId, ms, status });
    }
    // Hooks of the running run: one published, one reserved (open claim).
    const live = runs[1].runId;
    const published = { runId: live, hookId: "hk_pub" };
    const serialized = JSON.stringify({ ...published, token: "tok_pub" });
    assert.deepEqual(await archive(w, "reserveHookToken", ["tok_pub", published]), { claimed: true });
    await apply(w, live, { eventType: "hook_created", correlationId: "hk_pub", eventData: { token: "tok_pub" } }, { tokenHolder: null });
    assert.equal(await archive(w, "finalizeHookIndexes", ["tok_pub", "hk_pub", serialized, published]), null);
    const reserved = { runId: live, hookId: "hk_res" };
    assert.deepEqual(await archive(w, "reserveHookToken", ["tok_res", reserved]), { claimed: true });
    // A stream and a queued message, untouched by the upgrade.
    await w.rpc("streams", `run-streams:${live}`, "registerStream", [live, "out"]);
    await w.rpc("streams", "stream:out", "writeChunk", [live, new Uint8Array([7])]);
    // A queued message, delayed an hour (its target is never reached in this test).
    const queued = await w.rpc("queue", "q:0", "enqueue", [enqueueRequest("msg_up_1", "http://127.0.0.1:9", { runId: live, delaySeconds: 3600 })]);
    assert.equal(queued.ok, true, JSON.stringify(queued));
    // A run the old release indexed that expires after the upgrade: its retention `index`
    // phase must clear the archive's entries too.
    const doomed = "wrun_up_doomed";
    const doomedCreated = await apply(w, doomed, {
      eventType: "run_created",
      eventData: { deploymentId: "dep", workflowName: "wf-up", input: new Uint8Array([9]) },
    });
    const doomedMs = String(doomedCreated.run.createdAt.getTime()).padStart(13, "0");
    for (const key of [`run:wf-up:${doomedMs}:${doomed}`, `runall:${doomedMs}:${doomed}`]) {
      await archive(w, "putOwned", [doomed, key, JSON.stringify({ runId: doomed })]);
    }
    await apply(w, doomed, { eventType: "run_cancelled" });
    // Terminal runs end: completed / failed / cancelled.
    await apply(w, runs[2].runId, { eventType: "run_completed", eventData: { output: new Uint8Array([1]) } });
    await apply(w, runs[3].runId, { eventType: "run_failed", eventData: { error: new Uint8Array([5]), errorCode: "USER_ERROR" } });
    await apply(w, runs[4].runId, { eventType: "run_cancelled" });

    const other = { runId: "wrun_thief", hookId: "hk_thief" };
    async function everythingVisible(label) {
      const listed = await ix(w, "list", [{ prefix: "runall:" }]);
      const names = listed.keys.map((k) => k.name);
      for (const r of runs) assert.ok(names.includes(`runall:${r.ms}:${r.runId}`), `${label}: ${r.runId} lists`);
      for (const r of runs) assert.notEqual(await ix(w, "get", [`run:wf-up:${r.ms}:${r.runId}`]), null, `${label}: ${r.runId} gets`);
      assert.equal(await ix(w, "get", ["hook:tok_pub"]), serialized, `${label}: hook by token`);
      assert.equal(await ix(w, "get", ["hookid:hk_pub"]), serialized, `${label}: hook by id`);
      assert.deepEqual(await ix(w, "reserveHookToken", ["tok_pub", other]), { claimed: false, holder: published }, `${label}: published blocks`);
      assert.deepEqual(await ix(w, "reserveHookToken", ["tok_res", other]), { claimed: false, holder: reserved }, `${label}: claim blocks`);
      const chunks = await w.rpc("streams", "stream:out", "getChunks", [{ startIndex: 0, limit: 10 }]);
      assert.equal(chunks.chunks.length, 1, `${label}: stream kept`);
      const stats = await w.rpc("queue", "q:0", "stats", []);
      assert.equal(stats.pending, 1, `${label}: queued message kept`);
    }
    await everythingVisible("before the migration");

    // ---- restart on the same state, migrate in bounded steps, restart in the middle -----
    await w.dispose();
    w = await startWorker({ persistDir: dir, vars: VARS });
    await everythingVisible("after the restart");
    // Retention of a pre-upgrade run reaches the archive.
    assert.notEqual(await ix(w, "get", [`runall:${doomedMs}:${doomed}`]), null);
    await w.rpc("runs", doomed, "cleanupNow", [{ retentionMs: 1, queueShards: 1 }]);
    assert.equal(await ix(w, "get", [`runall:${doomedMs}:${doomed}`]), null, "expired: gone from the facade");
    assert.equal(await archive(w, "get", [`runall:${doomedMs}:${doomed}`]), null, "and from the archive");
    let state = await tick(w);
    assert.equal(state.done, false, "bounded: one tick does not finish");
    assert.ok(state.moved + state.skipped === 4, JSON.stringify(state));
    await everythingVisible("mid-migration");

    await w.dispose();
    w = await startWorker({ persistDir: dir, vars: VARS });
    // 50 concurrent admissions of one fresh token, mid-migration after a restart.
    const owners = Array.from({ length: 50 }, (_, i) => ({ runId: `wrun_race_${i}`, hookId: `hk_race_${i}` }));
    const answers = await Promise.all(owners.map((o) => ix(w, "reserveHookToken", ["tok_race_up", o])));
    assert.equal(answers.filter((a) => a.claimed).length, 1, JSON.stringify(answers));

    for (let i = 0; i < 20 && !state.done; i++) {
      state = await tick(w);
      await everythingVisible(`tick ${i}`);
    }
    assert.equal(state.done, true, JSON.stringify(state));
    assert.equal(state.kept, 0, JSON.stringify(state));

    // ---- the archive holds no live entry ------------------------------------------------
    // (What remains: the migration's state and the 0.3 expiry fence the retention of the
    // pre-upgrade run wrote — a fence, not an index entry.)
    const left = await archive(w, "list", [{}]);
    assert.deepEqual(left.keys.map((k) => k.name), ["celld-migration:v1", `expired:${doomed}`]);
    await everythingVisible("after the migration");
    // A fresh isolate sees the migration done and stops consulting the archive: still all there.
    await w.dispose();
    w = await startWorker({ persistDir: dir, vars: VARS });
    await everythingVisible("after the migration, archive read-through off");
    // A run indexed and expired after the migration touches the shards only.
    const late = "wrun_up_late";
    const lateCreated = await apply(w, late, {
      eventType: "run_created",
      eventData: { deploymentId: "dep", workflowName: "wf-up", input: new Uint8Array([3]) },
    });
    const lateKey = `runall:${String(lateCreated.run.createdAt.getTime()).padStart(13, "0")}:${late}`;
    assert.deepEqual(await ix(w, "putOwned", [late, lateKey, "{}"]), { stored: true });
    await apply(w, late, { eventType: "run_cancelled" });
    await w.rpc("runs", late, "cleanupNow", [{ retentionMs: 1, queueShards: 1 }]);
    assert.equal(await ix(w, "get", [lateKey]), null);
    assert.equal((await archive(w, "list", [{}])).keys.length, 2, "no new archive fence");
    // Ended runs' hooks were released by the client as before; the live ones now sit on the shards.
    await apply(w, live, { eventType: "run_completed", eventData: { output: new Uint8Array([1]) } });
    assert.equal(await ix(w, "get", ["hook:tok_pub"]), null, "a terminal run's hook no longer resolves");
  } finally {
    await w.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
});

// The in-place upgrade (issues #9, #10): today's build starts on the persisted state of a
// deployment of the last release before the sharded index (tests/fixtures/upgrade-0.3,
// written by release 1b8a10f's own build with the 0.3.0 client's call sequences; see
// scripts/make-upgrade-fixture.mjs and its fixture.json). Everything that release wrote —
// runs in every status, their IndexDO `run:`/`runall:`/`correlation:` entries, published
// hooks, an open claim, streams in the 0.3 layout, a queued message — stays visible and
// keeps blocking; the cron-driven migration moves the index entries into the shards in
// bounded steps, survives a restart in the middle, and leaves no live entry in the archive.

import { test } from "node:test";
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT, startWorker, STANDARD_VARS } from "./lib/harness.mjs";
import { ms13 } from "./lib/world-client.mjs";

const FIXTURE = join(ROOT, "tests", "fixtures", "upgrade-0.3");
const fixture = JSON.parse(readFileSync(join(FIXTURE, "fixture.json"), "utf8"));
const VARS = { ...STANDARD_VARS, WORKFLOW_INDEX_MIGRATION_BUDGET: "4" };

/** A call on IndexDO `index` itself (the archive), over the internal fetch hop. */
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

const ix = (w, method, args) => w.rpc("index", "index", method, args);

async function tick(w) {
  const worker = await w.mf.getWorker();
  await worker.scheduled({ cron: "*/10 * * * *" });
  return archive(w, "get", ["celld-migration:v1"]);
}

const runKeys = (r) => {
  const ms = ms13(new Date(r.createdAt));
  return { run: `run:${r.workflowName}:${ms}:${r.runId}`, runall: `runall:${ms}:${r.runId}` };
};
/** The identifying members of a serialized hook record (null stays null). */
const hookOf = (serialized) => {
  if (serialized === null) return null;
  const { runId, hookId, token } = JSON.parse(serialized);
  return { runId, hookId, token };
};

test("a 0.3-release deployment's state: visible, blocking, migrated across restarts, archive emptied", { timeout: 240_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "celld-upgrade-"));
  cpSync(join(FIXTURE, "state"), dir, { recursive: true });
  let w = await startWorker({ persistDir: dir, vars: VARS });
  const other = { runId: "wrun_thief", hookId: "hk_thief" };
  try {
    async function everythingVisible(label) {
      // Runs: readable, listed through the 0.3 facade by both key families.
      const all = (await ix(w, "list", [{ prefix: "runall:" }])).keys.map((k) => k.name);
      for (const r of fixture.runs) {
        const run = await w.rpc("runs", r.runId, "getRun", []);
        assert.equal(run.value?.status, r.status, `${label}: ${r.runId} status`);
        const keys = runKeys(r);
        assert.ok(all.includes(keys.runall), `${label}: ${r.runId} lists`);
        assert.notEqual(await ix(w, "get", [keys.run]), null, `${label}: ${r.runId} gets`);
      }
      // A prefix shorter than a key family spans the archive and the catalog.
      const short = (await ix(w, "list", [{ prefix: "r" }])).keys.map((k) => k.name);
      for (const r of fixture.runs) assert.ok(short.includes(runKeys(r).run) && short.includes(runKeys(r).runall), `${label}: ${r.runId} lists under "r"`);
      const odd = await ix(w, "list", [{ prefix: "run:wf-odd:" }]);
      assert.equal(odd.keys.length, fixture.runs.filter((r) => r.workflowName === "wf-odd").length, `${label}: by workflow`);
      // Hooks of the live run resolve by token and id, and block another owner.
      for (const h of fixture.hooks) {
        assert.deepEqual(hookOf(await ix(w, "get", [`hook:${h.token}`])), h, `${label}: hook by token`);
        assert.deepEqual(hookOf(await ix(w, "get", [`hookid:${h.hookId}`])), h, `${label}: hook by id`);
        const blocked = await ix(w, "reserveHookToken", [h.token, other]);
        assert.deepEqual(blocked, { claimed: false, holder: { runId: h.runId, hookId: h.hookId } }, `${label}: published blocks`);
      }
      // Hooks the client released when their run ended stay gone.
      for (const h of fixture.released) assert.equal(await ix(w, "get", [`hook:${h.token}`]), null, `${label}: released hook`);
      // The open claim still blocks another owner.
      for (const c of fixture.claims) {
        assert.deepEqual(await ix(w, "reserveHookToken", [c.token, other]), { claimed: false, holder: c.owner }, `${label}: claim blocks`);
      }
      // Streams in the 0.3 layout: chunks, closed flag, registry.
      for (const s of fixture.streams) {
        const page = await w.rpc("streams", `stream:${s.name}`, "getChunks", [{ startIndex: 0, limit: 10 }]);
        assert.deepEqual(
          page.chunks.map((c) => Buffer.from(c).toString("base64")),
          s.chunks,
          `${label}: stream ${s.name} chunks`,
        );
        assert.equal(page.done, s.closed, `${label}: stream ${s.name} done`);
        const names = await w.rpc("streams", `run-streams:${s.runId}`, "listStreams", [s.runId]);
        assert.ok(names.includes(s.name), `${label}: registry of ${s.runId}`);
      }
      // The queued message is still there.
      const stats = await w.rpc("queue", "q:0", "stats", []);
      assert.equal(stats.pending, fixture.messages.length, `${label}: queued message kept`);
    }

    await everythingVisible("after the upgrade");

    // Retention of a run the old release indexed reaches the archive too.
    const doomed = fixture.runs.find((r) => r.status === "failed");
    const doomedKeys = runKeys(doomed);
    await w.rpc("runs", doomed.runId, "cleanupNow", [{ retentionMs: 1, queueShards: 1 }]);
    assert.equal(await ix(w, "get", [doomedKeys.runall]), null, "expired: gone from the facade");
    assert.equal(await archive(w, "get", [doomedKeys.runall]), null, "and from the archive");
    fixture.runs = fixture.runs.filter((r) => r !== doomed);

    let state = await tick(w);
    assert.equal(state.done, false, "bounded: one tick does not finish");
    assert.equal(state.moved + state.skipped, 4, JSON.stringify(state));
    await everythingVisible("mid-migration");

    // Restart in the middle of the migration.
    await w.dispose();
    w = await startWorker({ persistDir: dir, vars: VARS });
    // 50 concurrent admissions of one fresh token, mid-migration after a restart: one owner.
    const owners = Array.from({ length: 50 }, (_, i) => ({ runId: `wrun_race_${i}`, hookId: `hk_race_${i}` }));
    const answers = await Promise.all(owners.map((o) => ix(w, "reserveHookToken", ["tok_race_up", o])));
    assert.equal(answers.filter((a) => a.claimed).length, 1, JSON.stringify(answers));
    // And of the pre-upgrade claim's token: nobody but its holder.
    const held = await Promise.all(owners.map((o) => ix(w, "reserveHookToken", [fixture.claims[0].token, o])));
    assert.equal(held.filter((a) => a.claimed).length, 0, JSON.stringify(held));

    for (let i = 0; i < 30 && !state.done; i++) {
      state = await tick(w);
      await everythingVisible(`tick ${i}`);
    }
    assert.equal(state.done, true, JSON.stringify(state));
    assert.equal(state.kept, 0, JSON.stringify(state));

    // The archive holds no live entry: what remains is the migration's state and the 0.3
    // expiry fence of the run retention expired (a fence, not an index entry).
    const left = await archive(w, "list", [{}]);
    assert.deepEqual(
      left.keys.map((k) => k.name),
      ["celld-migration:v1", `expired:${doomed.runId}`],
    );
    await everythingVisible("after the migration");
    // A fresh isolate sees the migration done and stops consulting the archive: still all there.
    await w.dispose();
    w = await startWorker({ persistDir: dir, vars: VARS });
    await everythingVisible("after the migration, archive read-through off");

    // The live run ends: its hook no longer resolves, and its token is free again.
    const live = fixture.hooks[0];
    const done = await w.rpc("runs", live.runId, "applyEvent", [
      { runId: live.runId, data: { eventType: "run_completed", specVersion: 6, eventData: { output: new Uint8Array([1]) } }, cleanup: { retentionMs: 0, queueShards: 1 } },
    ]);
    assert.equal(done.ok, true, JSON.stringify(done));
    for (const r of done.releasedHooks) await ix(w, "deleteHookIndexes", [r.token, r.hookId, { runId: live.runId, hookId: r.hookId }]);
    assert.equal(await ix(w, "get", [`hook:${live.token}`]), null, "a terminal run's hook no longer resolves");
    assert.deepEqual(await ix(w, "reserveHookToken", [live.token, other]), { claimed: true });
  } finally {
    await w.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
});

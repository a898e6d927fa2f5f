#!/usr/bin/env node
// Writes tests/fixtures/upgrade-0.3/: the persisted Miniflare state of a deployment of the
// last release before the sharded index (1b8a10f: IndexDO `index` holds every run, hook,
// claim and correlation entry; StreamDO and QueueDO in their 0.3 layouts), driven with the
// 0.3.0 client's call sequences (tests/lib/world-client.mjs), plus fixture.json describing
// what was written. tests/upgrade-fixture.test.mjs starts today's build on a copy of it.
//
//   git worktree add /tmp/old 1b8a10f && (cd /tmp/old && npm ci && npm run build)
//   node scripts/make-upgrade-fixture.mjs --build /tmp/old/build
//
// Run once; the state is committed.

import { execFileSync } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { ROOT, startWorker, STANDARD_VARS } from "../tests/lib/harness.mjs";
import { worldClient } from "../tests/lib/world-client.mjs";

const args = process.argv.slice(2);
const at = args.indexOf("--build");
if (at < 0) {
  console.error("usage: node scripts/make-upgrade-fixture.mjs --build <old release build dir>");
  process.exit(2);
}
const build = resolve(args[at + 1]);
const out = join(ROOT, "tests", "fixtures", "upgrade-0.3");
const state = join(out, "state");
rmSync(out, { recursive: true, force: true });
mkdirSync(state, { recursive: true });

const w = await startWorker({
  scriptPath: join(build, "index.js"),
  persistDir: state,
  vars: STANDARD_VARS,
  bindings: ["WORKFLOW_DB", "WORKFLOW_STREAMS", "WORKFLOW_INDEX", "WORKFLOW_QUEUE"],
});
const c = worldClient(w.rpc, { retentionMs: 0, queueShards: 1 });
const fixture = { release: "1b8a10f", runs: [], hooks: [], claims: [], released: [], streams: [], messages: [], correlations: [] };
try {
  const ok = (o) => {
    if (!o.ok) throw new Error(JSON.stringify(o));
    return o;
  };
  const terminal = { completed: "run_completed", failed: "run_failed", cancelled: "run_cancelled" };
  for (const [i, status] of ["pending", "running", "completed", "failed", "cancelled", "running"].entries()) {
    const runId = `wrun_fx_${i}`;
    const created = ok(
      await c.createEvent(runId, {
        eventType: "run_created",
        specVersion: 6,
        eventData: { deploymentId: "dep-fx", workflowName: i % 2 ? "wf-odd" : "wf-even", input: new Uint8Array([i]) },
      }),
    );
    if (status !== "pending") ok(await c.createEvent(runId, { eventType: "run_started", specVersion: 6 }));
    // A step with a correlation id (the client writes a correlation: key for it).
    if (status !== "pending") {
      ok(await c.createEvent(runId, { eventType: "step_created", specVersion: 6, correlationId: `step_${i}`, eventData: { stepName: "s", input: new Uint8Array([1]) } }));
      fixture.correlations.push({ runId, correlationId: `step_${i}` });
    }
    // Every started run gets a published hook; terminal runs release it (client.md §3).
    if (status !== "pending") {
      const token = `tok_fx_${i}`;
      ok(await c.createEvent(runId, { eventType: "hook_created", specVersion: 6, correlationId: `hk_fx_${i}`, eventData: { token } }));
      (status === "running" ? fixture.hooks : fixture.released).push({ runId, hookId: `hk_fx_${i}`, token });
    }
    if (terminal[status]) {
      const eventData = status === "completed" ? { output: new Uint8Array([9]) } : status === "failed" ? { error: { message: "boom" } } : undefined;
      ok(await c.createEvent(runId, { eventType: terminal[status], specVersion: 6, ...(eventData ? { eventData } : {}) }));
    }
    fixture.runs.push({ runId, status, workflowName: created.run.workflowName, createdAt: created.run.createdAt.toISOString() });
  }
  // An open claim that was never finalized (a client that crashed after reserveHookToken).
  const claim = { token: "tok_fx_claim", owner: { runId: "wrun_fx_1", hookId: "hk_fx_claim" } };
  const claimed = await c.ix("reserveHookToken", [claim.token, claim.owner]);
  if (!claimed.claimed) throw new Error(JSON.stringify(claimed));
  fixture.claims.push(claim);
  // Streams: an open one of the running run, a closed one of the completed run.
  const chunks = (n, tag) => Array.from({ length: n }, (_, k) => new Uint8Array([tag, k, 255 - k]));
  for (const [runId, name, n, close] of [
    ["wrun_fx_1", "fx-open", 3, false],
    ["wrun_fx_2", "fx-closed", 2, true],
  ]) {
    for (const chunk of chunks(n, name.length)) await c.writeToStream(runId, name, chunk);
    if (close) await w.rpc("streams", `stream:${name}`, "closeStream", [runId]);
    fixture.streams.push({ runId, name, chunks: chunks(n, name.length).map((b) => Buffer.from(b).toString("base64")), closed: close });
  }
  // A queued message ten years out (never due while the fixture is in use).
  const msg = { messageId: "msg_fx_1", queueName: "__wkf_workflow_fx", body: { runId: "wrun_fx_1" }, runId: "wrun_fx_1", idempotencyKey: "idem_fx_1", delaySeconds: 315360000, targetBaseUrl: "http://127.0.0.1:9" };
  const queued = await c.enqueue(msg);
  fixture.messages.push({ ...msg, shard: "q:0", enqueued: queued });
} finally {
  await w.dispose();
}
// Fold each SQLite write-ahead log into its database, so the committed state is plain files.
execFileSync("python3", [
  "-c",
  `import glob, os, sqlite3
for db in glob.glob(os.path.join(${JSON.stringify(state)}, "*", "*.sqlite")):
    c = sqlite3.connect(db); c.execute("PRAGMA wal_checkpoint(TRUNCATE)"); c.execute("PRAGMA journal_mode=DELETE"); c.close()
for f in glob.glob(os.path.join(${JSON.stringify(state)}, "*", "*.sqlite-*")):
    os.remove(f)`,
]);
writeFileSync(join(out, "fixture.json"), JSON.stringify(fixture, null, 2) + "\n");
console.log(`wrote ${out}`);

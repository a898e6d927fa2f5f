#!/usr/bin/env node
// Writes tests/fixtures/queue-inflight-0.3/: the persisted Miniflare state of a QueueDO of
// the last release with the 0.3 queue layout (3368fb9), holding messages **claimed for
// delivery** when the runtime stopped (0.3 `inflight:<messageId>` = deadline entries), plus
// fixture.json describing them. tests/queue.test.mjs starts today's build on a copy of it
// and checks that the 0.4 layout recovers them (spec-0.4 README, "Storage upgrades in the
// other DOs").
//
//   git archive 3368fb9 | tar -x -C /tmp/old && (cd /tmp/old && npm ci && npm run build)
//   node scripts/make-queue-inflight-fixture.mjs --build /tmp/old/build
//
// Run once; the state is committed.

import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { ROOT, startWorker, STANDARD_VARS } from "../tests/lib/harness.mjs";
import { enqueueRequest, startQueueTarget } from "../tests/lib/queue-target.mjs";

const args = process.argv.slice(2);
const at = args.indexOf("--build");
if (at < 0) {
  console.error("usage: node scripts/make-queue-inflight-fixture.mjs --build <old release build dir>");
  process.exit(2);
}
const build = resolve(args[at + 1]);
const out = join(ROOT, "tests", "fixtures", "queue-inflight-0.3");
const state = join(out, "state");
rmSync(out, { recursive: true, force: true });
mkdirSync(state, { recursive: true });

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// Every delivery hangs: the claims are still open when the runtime is stopped.
let arrivals = 0;
const target = await startQueueTarget(() => {
  arrivals++;
  return new Promise(() => {});
});
const w = await startWorker({
  scriptPath: join(build, "index.js"),
  persistDir: state,
  vars: STANDARD_VARS,
  bindings: ["WORKFLOW_DB", "WORKFLOW_STREAMS", "WORKFLOW_INDEX", "WORKFLOW_QUEUE"],
});
const fixture = { release: "3368fb9", shard: "q:0", messages: [], stats: null };
try {
  const messages = [
    { id: "msg_fx_inflight_1", runId: "wrun_fx_q1", idempotencyKey: "idem_fx_q1" },
    { id: "msg_fx_inflight_2", runId: undefined, idempotencyKey: undefined },
  ];
  for (const m of messages) {
    const out = await w.rpc("queue", "q:0", "enqueue", [enqueueRequest(m.id, target.url, { runId: m.runId, idempotencyKey: m.idempotencyKey })]);
    if (out?.ok !== true) throw new Error(`enqueue ${m.id}: ${JSON.stringify(out)}`);
    fixture.messages.push({ messageId: m.id, runId: m.runId ?? null, idempotencyKey: m.idempotencyKey ?? null, targetBaseUrl: target.url });
  }
  const deadline = Date.now() + 10_000;
  while (arrivals < messages.length && Date.now() < deadline) await sleep(20);
  if (arrivals < messages.length) throw new Error(`only ${arrivals} deliveries started`);
  fixture.stats = await w.rpc("queue", "q:0", "stats");
  if (fixture.stats.inflight !== messages.length) throw new Error(`stats: ${JSON.stringify(fixture.stats)}`);
} finally {
  await w.dispose();
  await target.close();
}
writeFileSync(join(out, "fixture.json"), JSON.stringify(fixture, null, 2) + "\n");
console.log(`wrote ${out}: ${JSON.stringify(fixture.stats)}`);

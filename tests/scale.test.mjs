// Delivery that scales with the app (issue #45) on Miniflare with real alarms, the built
// worker and a local app that takes its time: one queue shard (its 16 partitions, the
// default) delivers a burst of slow messages at once, through couriers
// (src/shell/courier.rs), while no object ever has more
// than 6 outgoing requests waiting for response headers (Cloudflare's per-invocation limit,
// which workerd does not enforce; the worker's own gate does, src/shell/gate.rs, and these
// tests read its counters); and an app that refuses (429) above a fixed concurrency gets
// every message, none dead-lettered, at a concurrency that settles near what it takes.

import { test } from "node:test";
import assert from "node:assert/strict";
import { STANDARD_VARS, startWorker } from "./lib/harness.mjs";
import { enqueueRequest, pool, startQueueTarget } from "./lib/queue-target.mjs";
import { gateStats, isCourier, partitionsTotal } from "./conformance/bench/io.mjs";

const SHARD = "q:0";

/** The most requests the app had open at once (from each delivery's arrival and answer). */
function peakAtApp(deliveries) {
  const edges = deliveries.flatMap((d) => [
    [d.at, 1],
    [d.answeredAt, -1],
  ]);
  edges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let open = 0;
  let peak = 0;
  for (const [, step] of edges) {
    open += step;
    peak = Math.max(peak, open);
  }
  return peak;
}

async function withApp(policy, fn, vars = {}) {
  const target = await startQueueTarget(policy);
  const all = { ...STANDARD_VARS, ...vars };
  const w = await startWorker({ vars: all });
  try {
    await fn({ w, target, q: (method, args = []) => w.rpc("queue", SHARD, method, args), gate: () => gateStats(w, all) });
  } finally {
    await w.dispose();
    await target.close();
  }
}

async function enqueueAll(q, target, ids) {
  const answers = await pool(ids.length, 25, (i) => q("enqueue", [enqueueRequest(ids[i], target.url)]));
  assert.ok(answers.every((a) => a.ok === true && a.deduped === false));
}

test("100 one-second deliveries enqueued together on one shard finish in about one second, at most 6 connections per object", { timeout: 60_000 }, async () => {
  const N = 100;
  const ids = Array.from({ length: N }, (_, i) => `msg_scale_${String(i).padStart(3, "0")}`);
  await withApp(() => ({ status: 200, delayMs: 1000 }), async ({ target, q, gate }) => {
    const started = Date.now();
    await enqueueAll(q, target, ids);
    assert.ok(await target.waitUntil(() => target.deliveries.length >= N, 30_000), `delivered ${target.deliveries.length}/${N}`);
    const elapsed = Date.now() - started;
    // Each delivered once, at attempt 1, answered 200.
    assert.deepEqual([...new Set(target.deliveries.map((d) => d.id))].sort(), ids);
    assert.ok(target.deliveries.every((d) => d.attempt === "1" && d.status === 200));
    const peak = peakAtApp(target.deliveries);
    // Five at a time (the reference) would take 20 s; the default ceiling is 128.
    assert.ok(peak >= 60, `the app saw at most ${peak} at once`);
    assert.ok(elapsed < 6_000, `took ${elapsed} ms`);
    const stats = await gate();
    for (const [name, s] of Object.entries(stats)) {
      assert.ok(s.peakConnections <= 6, `${name}: ${s.peakConnections} connections waited for headers at once`);
      // A queue object makes few of its deliveries itself and lends the rest to couriers.
      if (!isCourier(name)) assert.ok(s.direct <= 48, `${name}: direct ${s.direct}, lent ${s.lent}`);
    }
    const total = partitionsTotal(stats);
    assert.equal(total.partitions, 16, "the default layout: 16 partitions");
    assert.equal(total.direct + total.lent, N, JSON.stringify(total));
    // Every delivery settled: nothing pending or in flight, no dead letters.
    const deadline = Date.now() + 5_000;
    let s;
    while (Date.now() < deadline) {
      s = await q("stats");
      if (s.pending === 0 && s.inflight === 0) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(s.pending + s.inflight, 0, JSON.stringify(s));
    assert.deepEqual(await q("listDeadLetters"), { data: [], cursor: null, hasMore: false });
  });
});

test("an app that refuses (429, Retry-After: 1) above 20 at once gets every message once, none dead-lettered", { timeout: 90_000 }, async () => {
  const N = 100;
  const LIMIT = 20;
  const ids = Array.from({ length: N }, (_, i) => `msg_refuse_${String(i).padStart(3, "0")}`);
  let open = 0;
  let accepted = 0;
  const policy = async () => {
    if (open >= LIMIT) return { status: 429, headers: { "retry-after": "1" } };
    open++;
    accepted++;
    await new Promise((r) => setTimeout(r, 300));
    open--;
    return { status: 200 };
  };
  // QUEUE_MAX_ATTEMPTS is 2 here: a refusal counted as a failure would dead-letter.
  await withApp(policy, async ({ target, q, gate }) => {
    await enqueueAll(q, target, ids);
    const ok = () => new Set(target.deliveries.filter((d) => d.status === 200).map((d) => d.id)).size >= N;
    assert.ok(await target.waitUntil(ok, 60_000), `accepted ${accepted}/${N}`);
    const answered = target.deliveries.filter((d) => d.status === 200);
    assert.equal(answered.length, N, "each accepted once");
    // A refused message is redelivered with the same attempt (the app never saw it).
    assert.ok(target.deliveries.every((d) => d.attempt === "1"), "no attempt consumed by a refusal");
    const refused = target.deliveries.length - N;
    assert.ok(refused < 3 * N, `${refused} refusals for ${N} messages`);
    assert.deepEqual(await q("listDeadLetters"), { data: [], cursor: null, hasMore: false });
    const stats = await gate();
    // The partitions' paces together: what the app takes, not each its own.
    assert.ok(partitionsTotal(stats).pace <= 2 * LIMIT, `pace ended at ${partitionsTotal(stats).pace} (${JSON.stringify(Object.fromEntries(Object.entries(stats).filter(([n]) => !isCourier(n)).map(([n, x]) => [n, x.pace])))})`);
    for (const [name, s] of Object.entries(stats)) assert.ok(s.peakConnections <= 6, `${name}: ${s.peakConnections}`);
  });
});

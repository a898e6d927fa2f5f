// QueueDO end to end on Miniflare with real alarms and a real local delivery target
// (spec queue-do.md): load with retries, dead letters, 503 timeoutSeconds, dedup, delays,
// and a runtime restart in the middle of a load.

import { test } from "node:test";
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT, STANDARD_VARS, startWorker } from "./lib/harness.mjs";
import { enqueueRequest, pool, startQueueTarget } from "./lib/queue-target.mjs";
import { shardOf } from "./lib/world-client.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function withWorld(vars, policy, fn, options = {}) {
  const target = await startQueueTarget(policy);
  const w = await startWorker({ vars: { ...STANDARD_VARS, ...vars }, ...options });
  try {
    await fn({ w, target, q: (name, method, args = []) => w.rpc("queue", name, method, args) });
  } finally {
    await w.dispose();
    await target.close();
  }
}

/**
 * Waits until the shards are idle: nothing pending or in flight and no alarm left. The alarm
 * a partition armed while it delivered (its heartbeat, at most 5 s ahead) is cleared by the
 * pass that finds nothing to do, which on a loaded machine comes a moment after the last
 * acknowledgement (CI, three test files at once). Resolves with the last stats read.
 */
async function waitDrained(q, shards, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  let stats;
  while (Date.now() < deadline) {
    stats = await Promise.all(shards.map((s) => q(`q:${s}`, "stats")));
    if (stats.every((s) => s.pending === 0 && s.inflight === 0 && s.alarmAt === null)) return stats;
    await sleep(100);
  }
  return stats;
}

test("queue: 1000 messages, 2 shards, every 20th answered 503 {timeoutSeconds:0} once", { timeout: 180_000 }, async () => {
  const N = 1000;
  const ids = Array.from({ length: N }, (_, i) => `msg_load_${String(i).padStart(4, "0")}`);
  const index = new Map(ids.map((id, i) => [id, i]));
  const policy = (d) => {
    const i = index.get(d.id);
    if (i !== undefined && i % 20 === 0 && d.attempt === "1" && d.n === 1) {
      return { status: 503, body: JSON.stringify({ timeoutSeconds: 0 }), headers: { "retry-after": "0" } };
    }
    return { status: 200 };
  };
  await withWorld({}, policy, async ({ target, q }) => {
    const payload = "x".repeat(256 - 40);
    const outcomes = await pool(N, 32, async (i) => {
      const id = ids[i];
      const body = JSON.stringify({ id, pad: payload }).slice(0, 256).padEnd(256, " ");
      assert.equal(Buffer.byteLength(body), 256);
      return q(`q:${shardOf(id, 2)}`, "enqueue", [enqueueRequest(id, target.url, { body, queueShards: 2 })]);
    });
    assert.ok(outcomes.every((o, i) => o.ok === true && o.messageId === ids[i] && o.deduped === false));
    const ok = await target.waitUntil(() => new Set(target.deliveries.filter((d) => d.status === 200).map((d) => d.id)).size >= N, 120_000);
    const successes = target.deliveries.filter((d) => d.status === 200);
    const byId = new Map();
    for (const d of successes) byId.set(d.id, (byId.get(d.id) || 0) + 1);
    assert.ok(ok, `only ${byId.size} of ${N} delivered`);
    assert.equal(byId.size, N);
    assert.deepEqual([...byId.values()].filter((n) => n > 1), [], "duplicate successful deliveries");
    for (const d of successes) {
      assert.equal(d.body.length, 256);
      assert.equal(d.path, "/.well-known/workflow/v1/flow");
      assert.equal(d.attempt, "1"); // 503 {timeoutSeconds} never consumes an attempt
    }
    assert.equal(target.deliveries.filter((d) => d.status === 503).length, N / 20);
    const stats = await waitDrained(q, [0, 1], 10_000);
    for (const s of stats) assert.deepEqual(s, { pending: 0, inflight: 0, deadLetters: 0, alarmAt: null });
    // Both shards were used.
    assert.ok(ids.some((id) => shardOf(id, 2) === 0) && ids.some((id) => shardOf(id, 2) === 1));
  });
});

test("queue: always failing with QUEUE_MAX_ATTEMPTS=2 → dead letter, listed, redriven, purged", { timeout: 60_000 }, async () => {
  let healthy = false;
  const policy = () => (healthy ? { status: 200 } : { status: 500, body: '{"error":"boom"}' });
  await withWorld({ QUEUE_MAX_ATTEMPTS: "2" }, policy, async ({ target, q }) => {
    const t0 = Date.now();
    await q("q:0", "enqueue", [enqueueRequest("msg_dead_1", target.url, { runId: "wrun_dead", idempotencyKey: "k-dead" })]);
    await q("q:0", "enqueue", [enqueueRequest("msg_dead_2", target.url)]);
    assert.ok(await target.waitUntil(() => target.deliveries.length >= 4, 15_000));
    await sleep(300);
    const attempts = target.deliveries.filter((d) => d.id === "msg_dead_1").map((d) => [d.attempt, d.at - t0]);
    assert.deepEqual(attempts.map((a) => a[0]), ["1", "2"]);
    assert.ok(attempts[1][1] - attempts[0][1] >= 1900, `backoff ${attempts[1][1] - attempts[0][1]} ms`);
    assert.deepEqual(await q("q:0", "stats"), { pending: 0, inflight: 0, deadLetters: 2, alarmAt: null });
    const list = await q("q:0", "listDeadLetters", [{ limit: 1 }]);
    assert.equal(list.hasMore, true);
    assert.equal(list.data.length, 1);
    assert.match(list.cursor, /^dlq:\d{13}:msg_dead_[12]$/);
    const all = await q("q:0", "listDeadLetters", []);
    assert.equal(all.data.length, 2);
    const dead = all.data.find((d) => d.messageId === "msg_dead_1");
    assert.equal(dead.attempt, 2);
    assert.equal(dead.lastError, "HTTP 500");
    assert.equal(dead.runId, "wrun_dead");
    assert.equal(dead.idempotencyKey, "k-dead");
    assert.equal(typeof dead.failedAt, "number");
    // The key was released: a new message with it is not deduplicated.
    const fresh = await q("q:0", "enqueue", [enqueueRequest("msg_dead_3", target.url, { idempotencyKey: "k-dead", delaySeconds: 3600 })]);
    assert.equal(fresh.deduped, false);
    // Redrive is refused while msg_dead_3 holds the key; expire it and redrive.
    assert.deepEqual(await q("q:0", "redriveDeadLetter", ["msg_dead_1"]), { ok: false });
    assert.deepEqual(await q("q:0", "expireRun", ["wrun_none", 946684800000]), { deleted: 0 });
    healthy = true;
    assert.deepEqual(await q("q:0", "redriveDeadLetter", ["msg_dead_2"]), { ok: true });
    assert.ok(await target.waitUntil(() => target.deliveries.some((d) => d.id === "msg_dead_2" && d.status === 200), 5000));
    const redelivered = target.deliveries.find((d) => d.id === "msg_dead_2" && d.status === 200);
    assert.equal(redelivered.attempt, "1");
    await sleep(300);
    const s = await q("q:0", "stats");
    assert.equal(s.deadLetters, 1);
    assert.equal(s.pending, 1); // msg_dead_3, an hour away
    assert.deepEqual(await q("q:0", "purgeDeadLetters"), { purged: 1, hasMore: false });
    assert.deepEqual(await q("q:0", "listDeadLetters"), { data: [], cursor: null, hasMore: false });
  });
});

test("queue: a 1.2 MB message is retried and dead-lettered intact", { timeout: 60_000 }, async () => {
  // Its enqueue is over the buffered writes' bound (src/store/buffered.rs) and runs again
  // inside a transaction; the retry rewrites its row and the dead letter writes it again.
  const policy = () => ({ status: 500, body: '{"error":"boom"}' });
  await withWorld({ QUEUE_MAX_ATTEMPTS: "2" }, policy, async ({ target, q }) => {
    const body = JSON.stringify({ id: "msg_big", pad: "y".repeat(1_200_000) });
    const out = await q("q:0", "enqueue", [enqueueRequest("msg_big", target.url, { body })]);
    assert.equal(out.ok, true, JSON.stringify(out));
    assert.ok(await target.waitUntil(() => target.deliveries.filter((d) => d.id === "msg_big").length >= 2, 20_000));
    await sleep(300);
    const seen = target.deliveries.filter((d) => d.id === "msg_big");
    assert.deepEqual(seen.map((d) => [d.attempt, d.body.length]), [["1", body.length], ["2", body.length]]);
    assert.deepEqual(await q("q:0", "stats"), { pending: 0, inflight: 0, deadLetters: 1, alarmAt: null });
    const dead = (await q("q:0", "listDeadLetters", [])).data[0];
    assert.equal(dead.messageId, "msg_big");
    assert.equal(dead.attempt, 2);
    assert.equal(dead.body.length, body.length);
  });
});

test("queue: 503 with numeric timeoutSeconds redelivers later without consuming an attempt", { timeout: 30_000 }, async () => {
  const policy = (d) =>
    d.n === 1 && d.attempt === "1" ? { status: 503, body: '{"timeoutSeconds":1}', headers: { "retry-after": "30" } } : { status: 200 };
  await withWorld({}, policy, async ({ target, q }) => {
    await q("q:0", "enqueue", [enqueueRequest("msg_503", target.url, { idempotencyKey: "k503" })]);
    assert.ok(await target.waitUntil(() => target.deliveries.length >= 1, 5000));
    await sleep(200);
    const s = await q("q:0", "stats");
    assert.equal(s.pending, 1);
    assert.equal(s.inflight, 0);
    // Still claimed: dedup answers the original id.
    const dup = await q("q:0", "enqueue", [enqueueRequest("msg_503_dup", target.url, { idempotencyKey: "k503" })]);
    assert.deepEqual(dup, { ok: true, messageId: "msg_503", deduped: true });
    assert.ok(await target.waitUntil(() => target.deliveries.length >= 2, 5000));
    const [first, second] = target.deliveries;
    assert.equal(second.attempt, "1");
    assert.ok(second.at - first.answeredAt >= 950, `redelivered after ${second.at - first.answeredAt} ms`);
    assert.ok(second.at - first.answeredAt < 5000, "Retry-After must be ignored");
    await sleep(200);
    assert.deepEqual(await q("q:0", "stats"), { pending: 0, inflight: 0, deadLetters: 0, alarmAt: null });
  });
});

test("queue: dedup by idempotency key, released after ack", { timeout: 30_000 }, async () => {
  await withWorld({}, () => ({ status: 200 }), async ({ target, q }) => {
    const a = await q("q:0", "enqueue", [enqueueRequest("msg_d1", target.url, { idempotencyKey: "kd", delaySeconds: 1 })]);
    const b = await q("q:0", "enqueue", [enqueueRequest("msg_d2", target.url, { idempotencyKey: "kd" })]);
    assert.deepEqual(a, { ok: true, messageId: "msg_d1", deduped: false });
    assert.deepEqual(b, { ok: true, messageId: "msg_d1", deduped: true });
    assert.ok(await target.waitUntil(() => target.deliveries.length >= 1, 5000));
    await sleep(300);
    assert.deepEqual(target.deliveries.map((d) => d.id), ["msg_d1"]);
    const c = await q("q:0", "enqueue", [enqueueRequest("msg_d3", target.url, { idempotencyKey: "kd" })]);
    assert.deepEqual(c, { ok: true, messageId: "msg_d3", deduped: false });
    assert.ok(await target.waitUntil(() => target.deliveries.length >= 2, 5000));
    // Shard pinning.
    const mismatch = await q("q:0", "enqueue", [enqueueRequest("msg_d4", target.url, { queueShards: 3 })]);
    assert.deepEqual(mismatch, {
      ok: false,
      code: "CONFIG_MISMATCH",
      message: "queue cell shard-count mismatch: pinned 1, got 3 \u2014 changing queueShards requires draining the fleet",
    });
  });
});

test("queue: delayed messages are not delivered early", { timeout: 30_000 }, async () => {
  await withWorld({}, () => ({ status: 200 }), async ({ target, q }) => {
    const sent = {};
    for (const [id, delay] of [["msg_late_2", 2], ["msg_late_1", 1], ["msg_now", 0]]) {
      sent[id] = Date.now();
      await q("q:0", "enqueue", [enqueueRequest(id, target.url, { delaySeconds: delay })]);
      sent[id] = { at: sent[id], delay };
    }
    assert.ok(await target.waitUntil(() => target.deliveries.length >= 3, 10_000));
    assert.deepEqual(target.deliveries.map((d) => d.id), ["msg_now", "msg_late_1", "msg_late_2"]);
    for (const d of target.deliveries) {
      const early = sent[d.id].at + sent[d.id].delay * 1000 - d.at;
      assert.ok(early <= 5, `${d.id} delivered ${early} ms early`);
    }
  });
});

test("queue: after a burst of deliveries the alarm is exactly the next delayed message's", { timeout: 60_000 }, async () => {
  // While deliveries run, the loop writes the alarm only when it must move earlier (a
  // later one is left in place); its last claim must leave the exact next wake-up.
  await withWorld({}, () => ({ status: 200 }), async ({ target, q }) => {
    const before = Date.now();
    await q("q:0", "enqueue", [enqueueRequest("msg_hour", target.url, { delaySeconds: 3600 })]);
    const after = Date.now();
    await pool(24, 8, (i) => q("q:0", "enqueue", [enqueueRequest(`msg_burst_${i}`, target.url)]));
    assert.ok(await target.waitUntil(() => target.deliveries.length >= 24, 20_000), "the burst is delivered");
    let stats;
    const deadline = Date.now() + 10_000;
    do {
      await sleep(100);
      stats = await q("q:0", "stats");
    } while ((stats.inflight > 0 || stats.alarmAt < before + 3_600_000) && Date.now() < deadline);
    assert.equal(stats.pending, 1);
    assert.equal(stats.inflight, 0);
    assert.ok(stats.alarmAt >= before + 3_600_000 && stats.alarmAt <= after + 3_600_000, `alarm at the delayed message's due time: ${JSON.stringify(stats)}`);
  });
});

test("queue: restart mid-load over persisted state loses nothing", { timeout: 180_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "celld-queue-restart-"));
  const N = 300;
  // Slow answers keep deliveries in flight when the runtime goes away.
  const target = await startQueueTarget(() => ({ status: 200, delayMs: 40 }));
  const ids = Array.from({ length: N }, (_, i) => `msg_rs_${i}`);
  let w = await startWorker({ persistDir: dir });
  let accepted = [];
  try {
    accepted = await pool(N, 16, async (i) => {
      const id = ids[i];
      const r = await w.rpc("queue", `q:${shardOf(id, 2)}`, "enqueue", [enqueueRequest(id, target.url, { queueShards: 2 })]);
      return r.ok ? id : null;
    });
    assert.ok(await target.waitUntil(() => target.deliveries.length >= 20, 30_000), "deliveries started");
  } finally {
    await w.dispose(); // mid-load: deliveries in flight die with the runtime
  }
  const beforeRestart = new Set(target.deliveries.filter((d) => d.status === 200).map((d) => d.id));
  assert.ok(beforeRestart.size < N, "the restart happened mid-load");
  w = await startWorker({ persistDir: dir });
  try {
    const all = accepted.filter(Boolean);
    assert.equal(all.length, N);
    const done = () => new Set(target.deliveries.filter((d) => d.status === 200).map((d) => d.id));
    // No RPC after the restart: the persisted alarms alone must resume the work.
    const ok = await target.waitUntil(() => done().size >= N, 90_000);
    const missing = all.filter((id) => !done().has(id));
    assert.ok(ok, `${missing.length} accepted messages never delivered (e.g. ${missing.slice(0, 3).join(", ")})`);
    const stats = await waitDrained((name, method, args) => w.rpc("queue", name, method, args), [0, 1], 20_000);
    for (const s of stats) assert.deepEqual(s, { pending: 0, inflight: 0, deadLetters: 0, alarmAt: null });
  } finally {
    await w.dispose();
    await target.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("queue: three restarts while producing and delivering lose nothing (at least once)", { timeout: 240_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "celld-queue-restarts-"));
  const ROUNDS = 4;
  const PER_ROUND = 100;
  const target = await startQueueTarget(() => ({ status: 200, delayMs: 30 }));
  const accepted = [];
  let w;
  try {
    for (let round = 0; round < ROUNDS; round++) {
      w = await startWorker({ persistDir: dir });
      const ids = Array.from({ length: PER_ROUND }, (_, i) => `msg_rr_${round}_${i}`);
      const got = await pool(PER_ROUND, 16, async (i) => {
        const r = await w.rpc("queue", `q:${shardOf(ids[i], 2)}`, "enqueue", [enqueueRequest(ids[i], target.url, { queueShards: 2 })]);
        return r.ok ? ids[i] : null;
      });
      accepted.push(...got.filter(Boolean));
      if (round < ROUNDS - 1) {
        // Pull the plug while this round's deliveries are running.
        await target.waitUntil(() => target.deliveries.some((d) => d.id.startsWith(`msg_rr_${round}_`)), 30_000);
        await w.dispose();
        w = undefined;
      }
    }
    assert.equal(accepted.length, ROUNDS * PER_ROUND);
    const done = () => new Set(target.deliveries.filter((d) => d.status === 200).map((d) => d.id));
    const ok = await target.waitUntil(() => done().size >= accepted.length, 120_000);
    const missing = accepted.filter((id) => !done().has(id));
    assert.ok(ok, `${missing.length} accepted messages never delivered (e.g. ${missing.slice(0, 3).join(", ")})`);
    const successes = target.deliveries.filter((d) => d.status === 200).length;
    console.log(`# ${accepted.length} accepted, all delivered; ${successes - accepted.length} duplicate deliveries across ${ROUNDS - 1} restarts`);
    const stats = await waitDrained((name, method, args) => w.rpc("queue", name, method, args), [0, 1], 30_000);
    for (const s of stats) assert.deepEqual(s, { pending: 0, inflight: 0, deadLetters: 0, alarmAt: null });
  } finally {
    await w?.dispose();
    await target.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

/** The largest number of deliveries whose [arrival, answer] intervals overlap. */
function maxOverlap(deliveries) {
  const events = [];
  for (const d of deliveries) {
    events.push([d.at, 1], [d.answeredAt, -1]);
  }
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let cur = 0;
  let max = 0;
  for (const [, delta] of events) {
    cur += delta;
    max = Math.max(max, cur);
  }
  return max;
}

test("queue: deliveries run concurrently up to QUEUE_MAX_INFLIGHT; no secret header when unset", { timeout: 60_000 }, async () => {
  await withWorld({ QUEUE_MAX_INFLIGHT: "3", WORKFLOW_CALLBACK_SECRET: "" }, () => ({ status: 200, delayMs: 300 }), async ({ target, q }) => {
    for (let i = 0; i < 9; i++) await q("q:0", "enqueue", [enqueueRequest(`msg_cc_${i}`, target.url)]);
    assert.ok(await target.waitUntil(() => target.deliveries.length >= 9, 20_000));
    assert.equal(maxOverlap(target.deliveries), 3);
    for (const d of target.deliveries) assert.equal(d.headers["x-workflow-callback-secret"], undefined);
    await sleep(200);
    assert.deepEqual(await q("q:0", "stats"), { pending: 0, inflight: 0, deadLetters: 0, alarmAt: null });
  });
  // An invalid value falls back to the default ceiling of 128 (issue #45; the reference's
  // 5 is now the floor, QUEUE_MIN_INFLIGHT): all ten at once.
  await withWorld({ QUEUE_MAX_INFLIGHT: "0" }, () => ({ status: 200, delayMs: 1500 }), async ({ target, q }) => {
    await Promise.all(Array.from({ length: 10 }, (_, i) => q("q:0", "enqueue", [enqueueRequest(`msg_cd_${i}`, target.url)])));
    assert.ok(await target.waitUntil(() => target.deliveries.length >= 10, 20_000));
    assert.equal(maxOverlap(target.deliveries), 10);
    for (const d of target.deliveries) assert.equal(d.headers["x-workflow-callback-secret"], "golden-callback-secret");
  });
});

test("queue: an enqueue with a free slot claims its message; bursts past the slots are each delivered once, at attempt 1", { timeout: 60_000 }, async () => {
  await withWorld({ QUEUE_MAX_INFLIGHT: "3" }, () => ({ status: 200, delayMs: 200 }), async ({ target, q }) => {
    // Nothing runs yet: the enqueue takes a slot itself (no `due:` entry, so nothing pending).
    await q("q:0", "enqueue", [enqueueRequest("msg_h_0", target.url)]);
    const first = await q("q:0", "stats");
    assert.deepEqual([first.pending, first.inflight], [0, 1]);
    // A burst larger than the slots, enqueued while deliveries run: the first messages are
    // handed to the running loop, the rest wait their turn. A handed message that a claim
    // took for lost would go out again as attempt 2.
    await pool(20, 5, (i) => q("q:0", "enqueue", [enqueueRequest(`msg_h_${i + 1}`, target.url)]));
    assert.ok(await target.waitUntil(() => target.deliveries.length >= 21, 20_000), "all delivered");
    await sleep(300);
    const ids = target.deliveries.map((d) => d.id);
    assert.equal(new Set(ids).size, 21);
    assert.equal(ids.length, 21, "each message delivered once");
    assert.deepEqual([...new Set(target.deliveries.map((d) => d.attempt))], ["1"]);
    assert.ok(maxOverlap(target.deliveries) <= 3, `at most 3 at once, saw ${maxOverlap(target.deliveries)}`);
    assert.deepEqual(await q("q:0", "stats"), { pending: 0, inflight: 0, deadLetters: 0, alarmAt: null });
  });
});

test("queue: an enqueue that finds no delivery running starts its delivery before it answers, not at its alarm", { timeout: 60_000 }, async () => {
  await withWorld({}, (d) => ({ status: 200, delayMs: d.id === "msg_ds_slow" ? 800 : 0 }), async ({ target, q }) => {
    // Idle → active, twenty times: the delivery is on its way before the enqueue's answer
    // (waiting for the alarm the enqueue armed, most arrive after it).
    let early = 0;
    for (let i = 0; i < 20; i++) {
      const n = target.deliveries.length;
      await q("q:0", "enqueue", [enqueueRequest(`msg_ds_${i}`, target.url)]);
      const answered = Date.now();
      assert.ok(await target.waitUntil(() => target.deliveries.length > n, 5000), `delivery ${i}`);
      if (target.deliveries[n].at <= answered) early++;
      await sleep(20);
    }
    assert.ok(early >= 15, `${early}/20 deliveries arrived before their enqueue's answer`);
    // A slow delivery started this way: the alarm fires meanwhile and joins the loop, which
    // takes the next enqueue's message too; each is delivered once, and nothing is left.
    await q("q:0", "enqueue", [enqueueRequest("msg_ds_slow", target.url)]);
    await sleep(300);
    await q("q:0", "enqueue", [enqueueRequest("msg_ds_next", target.url)]);
    assert.ok(await target.waitUntil(() => target.deliveries.length >= 22, 5000), "both delivered");
    await sleep(300);
    const ids = target.deliveries.map((d) => d.id);
    assert.equal(new Set(ids).size, 22);
    assert.equal(ids.length, 22, "each message delivered once");
    assert.deepEqual([...new Set(target.deliveries.map((d) => d.attempt))], ["1"]);
    assert.deepEqual(await q("q:0", "stats"), { pending: 0, inflight: 0, deadLetters: 0, alarmAt: null });
  });
});

test("queue: QUEUE_DELIVERY_TIMEOUT_MS aborts slow deliveries (retried, then dead-lettered)", { timeout: 60_000 }, async () => {
  const policy = (d) => {
    if (d.id === "msg_slow_once" && d.attempt === "1") return { status: 200, delayMs: 1500 };
    if (d.id === "msg_slow_always") return { status: 200, delayMs: 1500 };
    return { status: 200 };
  };
  await withWorld({ QUEUE_DELIVERY_TIMEOUT_MS: "300", QUEUE_MAX_ATTEMPTS: "2" }, policy, async ({ target, q }) => {
    const t0 = Date.now();
    await q("q:0", "enqueue", [enqueueRequest("msg_slow_once", target.url)]);
    await q("q:0", "enqueue", [enqueueRequest("msg_slow_always", target.url)]);
    assert.ok(await target.waitUntil(() => target.deliveries.length >= 4, 20_000));
    const once = target.deliveries.filter((d) => d.id === "msg_slow_once");
    assert.deepEqual(once.map((d) => d.attempt), ["1", "2"]);
    // Timed out after ~300 ms, retried 2 s later.
    assert.ok(once[1].at - t0 >= 2200 && once[1].at - t0 < 4000, `second attempt at +${once[1].at - t0} ms`);
    await sleep(500);
    const list = await q("q:0", "listDeadLetters", []);
    assert.equal(list.data.length, 1);
    assert.equal(list.data[0].messageId, "msg_slow_always");
    assert.equal(list.data[0].attempt, 2);
    assert.match(list.data[0].lastError, /^transport error: .*(timeout|abort)/i);
    const s = await q("q:0", "stats");
    assert.deepEqual(s, { pending: 0, inflight: 0, deadLetters: 1, alarmAt: null });
  });
});

test("queue: admin methods on a fresh cell and argument edge cases", { timeout: 30_000 }, async () => {
  await withWorld({}, () => ({ status: 200 }), async ({ w, q }) => {
    assert.deepEqual(await q("q:9", "stats"), { pending: 0, inflight: 0, deadLetters: 0, alarmAt: null });
    assert.deepEqual(await q("q:9", "rearmAlarm"), { alarmAt: null });
    assert.deepEqual(await q("q:9", "listDeadLetters", [{ limit: 0 }]), { data: [], cursor: null, hasMore: false });
    assert.deepEqual(await q("q:9", "listDeadLetters", [{ limit: 1, cursor: null }]), { data: [], cursor: null, hasMore: false });
    const neg = await w.rpc.raw("queue", "q:9", "listDeadLetters", [{ limit: -1 }]);
    assert.equal(neg.status, 500);
    assert.deepEqual(neg.value, { error: { name: "TypeError", message: "List limit must be positive." } });
    const bad = await w.rpc.raw("queue", "q:9", "enqueue", []);
    assert.equal(bad.status, 500);
    assert.deepEqual(bad.value, { error: { name: "TypeError", message: "Cannot read properties of undefined (reading 'runId')" } });
    assert.deepEqual(await q("q:9", "redriveDeadLetter", ["nope"]), { ok: false });
    assert.deepEqual(await q("q:9", "purgeDeadLetters"), { purged: 0, hasMore: false });
    assert.deepEqual(await q("q:9", "expireRun", ["wrun_x", 946684800000]), { deleted: 0 });
    const fenced = await q("q:9", "enqueue", [enqueueRequest("msg_f", "http://127.0.0.1:9", { runId: "wrun_x" })]);
    assert.deepEqual(fenced, { ok: false, code: "RUN_EXPIRED", message: 'Workflow run "wrun_x" has expired' });
  });
});

/**
 * A target whose deliveries get no answer until `release()` (the first dies with the
 * runtime), and `start(w, id, key)`: enqueue `id` on q:0 and wait for its first delivery.
 */
async function hangingTarget() {
  let hang = true;
  let arrivals = 0;
  const counting = await startQueueTarget(() => {
    arrivals++;
    return hang ? new Promise(() => {}) : { status: 200 };
  });
  const start = async (w, id, key) => {
    await w.rpc("queue", "q:0", "enqueue", [enqueueRequest(id, counting.url, { idempotencyKey: key })]);
    const deadline = Date.now() + 10_000;
    while (arrivals === 0 && Date.now() < deadline) await sleep(20);
    assert.equal(arrivals, 1, "the first delivery reached the target");
  };
  return { counting, start, release: () => (hang = false) };
}

/** Waits for the redelivery of `id` after a restart at `restartedAt`: within `withinMs`, attempt 2. */
async function assertRedelivered(counting, id, restartedAt, withinMs, what) {
  assert.ok(await counting.waitUntil(() => counting.deliveries.some((d) => d.status === 200), 15_000), `redelivered ${what}`);
  assert.ok(Date.now() - restartedAt < withinMs, `${what}: ${Date.now() - restartedAt} ms`);
  const again = counting.deliveries.find((d) => d.status === 200);
  assert.equal(again.id, id);
  // The first delivery reached the target before the runtime died, so this one is a
  // redelivery: attempt 2, never 1 again (src/queue/state.rs LOST_DELIVERIES).
  assert.equal(again.attempt, "2");
}

// One queue object (QUEUE_PARTITIONS=1): the test reads that object's own alarm writes. The
// default 16 partitions recover the same way, each its own (tests/operate.test.mjs, the
// claims.recovered line; npm run chaos).
const ONE_OBJECT = { ...STANDARD_VARS, QUEUE_PARTITIONS: "1" };

test("queue: a delivery that died with the runtime is recovered by the next instance, not at its deadline", { timeout: 60_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "celld-queue-orphan-"));
  const { counting, start, release } = await hangingTarget();
  let w = await startWorker({ persistDir: dir, vars: ONE_OBJECT });
  try {
    await start(w, "msg_orphan", "k-orphan");
    const s = await w.rpc("queue", "q:0", "stats");
    assert.equal(s.inflight, 1);
    // Not at the in-flight deadline (timeout + 30 s): at most the heartbeat ahead
    // (src/queue/delivery.rs HEARTBEAT_MS, 5 s), for the next instance to wake by.
    assert.ok(s.alarmAt <= Date.now() + 5_000, `armed at most the heartbeat ahead: ${JSON.stringify(s)}`);
    // The runtime sends the message again (its key is known: deduplicated). Such a call
    // schedules the queue's exact next wake-up — here the delivery's lease deadline — and,
    // while deliveries run, no later than the heartbeat either (src/queue/delivery.rs
    // `call_alarm_change`); the runtime dies right after it.
    const dup = await w.rpc("queue", "q:0", "enqueue", [enqueueRequest("msg_orphan_dup", counting.url, { idempotencyKey: "k-orphan" })]);
    assert.equal(dup.deduped, true);
    const after = await w.rpc("queue", "q:0", "stats");
    assert.ok(after.alarmAt <= Date.now() + 5_000, `a deduplicated enqueue keeps the heartbeat: ${JSON.stringify(after)}`);
    // Not even for the moment before the loop's next pass rewrites it: every alarm write
    // while the delivery ran (the shard's last four: [ms ago, ms ahead, deliveries live,
    // why]) was at most the heartbeat ahead.
    const ns = await w.mf.getDurableObjectNamespace("WORKFLOW_QUEUE");
    const { alarmWrites } = await ns.get(ns.idFromName("q:0")).deliveryStats();
    assert.ok(alarmWrites.some(([, , , why]) => why === "sync call"), `the enqueue's write is among them: ${JSON.stringify(alarmWrites)}`);
    for (const [, ahead, live] of alarmWrites) if (live > 0) assert.ok(ahead <= 5_000, `alarm writes while delivering: ${JSON.stringify(alarmWrites)}`);
  } finally {
    await w.dispose();
  }
  release();
  w = await startWorker({ persistDir: dir, vars: ONE_OBJECT });
  try {
    // No call comes (every run waits on that delivery): the alarm wakes the fresh
    // instance, which finds the orphaned claim no longer live and delivers it again.
    await assertRedelivered(counting, "msg_orphan", Date.now(), 12_000, "with no call, within the heartbeat, not at the deadline");
    await sleep(200);
    assert.deepEqual(await w.rpc("queue", "q:0", "stats"), { pending: 0, inflight: 0, deadLetters: 0, alarmAt: null });
    // The dedup claim was released by the ack.
    const fresh = await w.rpc("queue", "q:0", "enqueue", [enqueueRequest("msg_orphan_2", counting.url, { idempotencyKey: "k-orphan" })]);
    assert.equal(fresh.deduped, false);
  } finally {
    await w.dispose();
    await counting.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("queue: a fresh instance whose first call is a deduplicated enqueue still recovers a delivery that died with the runtime at once", { timeout: 120_000 }, async () => {
  // The premise is that the enqueue is the fresh instance's first call. Its recovery alarm
  // (at most the heartbeat, 5 s, after the kill) may come first on a loaded machine when the
  // restart takes longer: then the message is redelivered and acknowledged before the call
  // and the key is free again (deduped false, checked below). Such a round proves nothing
  // either way and is run again, at most three times.
  for (let round = 1; ; round++) {
    const dir = mkdtempSync(join(tmpdir(), "celld-queue-orphan-dup-"));
    const { counting, start, release } = await hangingTarget();
    let w = await startWorker({ persistDir: dir });
    try {
      await start(w, "msg_orphan_a", "k-orphan-a");
    } finally {
      await w.dispose();
    }
    release();
    w = await startWorker({ persistDir: dir });
    try {
      // The runtime, back, sends the message again. The fresh instance arms its recovery
      // alarm (now), then the call schedules the queue's next wake-up — the dead delivery's
      // lease deadline, 5 minutes out — and must not put the alarm there
      // (src/queue/delivery.rs `call_alarm_change`).
      const restartedAt = Date.now();
      const dup = await w.rpc("queue", "q:0", "enqueue", [enqueueRequest("msg_orphan_a2", counting.url, { idempotencyKey: "k-orphan-a" })]);
      if (!dup.deduped) {
        // Only because the alarm came first: the message was already delivered again.
        const again = counting.deliveries.find((d) => d.status === 200);
        assert.ok(again && again.id === "msg_orphan_a" && again.attempt === "2", `the key was free before its message was redelivered: ${JSON.stringify(counting.deliveries)}`);
        assert.ok(round < 3, "the recovery alarm came before the first call in three rounds");
        continue;
      }
      await assertRedelivered(counting, "msg_orphan_a", restartedAt, 4_000, "at once, not at the deadline nor a heartbeat later");
      return;
    } finally {
      await w.dispose();
      await counting.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }
});

// ---- 0.4 (spec-0.4 queue.md) ------------------------------------------------------------

/** A run that is terminal with a 1 ms retention: its run DO reports it `expired` at once. */
async function expiredRun(w, runId) {
  const cleanup = { retentionMs: 1, queueShards: 1 };
  const apply = async (data) => {
    const out = await w.rpc("runs", runId, "applyEvent", [{ runId, data: { specVersion: 6, ...data }, cleanup }]);
    assert.equal(out.ok, true, JSON.stringify(out));
  };
  await apply({ eventType: "run_created", eventData: { deploymentId: "dep", workflowName: "wf-q", input: [] } });
  await apply({ eventType: "run_completed", eventData: { output: null } });
  await sleep(20);
}

// The run DO's cleanup expires queue shards q:0..queueShards-1 (here q:0 only); the tests
// below use q:5, which it never visits, so no queue fence ever exists there and only the
// run DO's answer can refuse the run.
test("queue 0.4: enqueue and delivery ask the run DO: an expired run is refused before any queue fence, and dropped before delivery", { timeout: 60_000 }, async () => {
  await withWorld({}, () => ({ status: 200 }), async ({ w, target, q }) => {
    // Scheduled while the run is active, due after it expired: dropped without a POST.
    const active = await w.rpc("runs", "wrun_q04_late", "applyEvent", [
      { runId: "wrun_q04_late", data: { specVersion: 6, eventType: "run_created", eventData: { deploymentId: "dep", workflowName: "wf-q", input: [] } }, cleanup: { retentionMs: 1, queueShards: 1 } },
    ]);
    assert.equal(active.ok, true);
    const due = await q("q:5", "enqueue", [enqueueRequest("msg_q04_late", target.url, { runId: "wrun_q04_late", delaySeconds: 2, idempotencyKey: "k-late" })]);
    assert.deepEqual(due, { ok: true, messageId: "msg_q04_late", deduped: false });
    const done = await w.rpc("runs", "wrun_q04_late", "applyEvent", [
      { runId: "wrun_q04_late", data: { specVersion: 6, eventType: "run_completed", eventData: { output: null } }, cleanup: { retentionMs: 1, queueShards: 1 } },
    ]);
    assert.equal(done.ok, true);

    await expiredRun(w, "wrun_q04_gone");
    const refused = await q("q:5", "enqueue", [enqueueRequest("msg_q04_x", target.url, { runId: "wrun_q04_gone" })]);
    assert.deepEqual(refused, { ok: false, code: "RUN_EXPIRED", message: 'Workflow run "wrun_q04_gone" has expired' });
    // An unknown run is accepted, and delivered.
    const unknown = await q("q:5", "enqueue", [enqueueRequest("msg_q04_unknown", target.url, { runId: "wrun_q04_never" })]);
    assert.equal(unknown.ok, true);

    await sleep(3500);
    assert.deepEqual(target.deliveries.map((d) => d.id), ["msg_q04_unknown"]);
    assert.deepEqual(await q("q:5", "stats"), { pending: 0, inflight: 0, deadLetters: 0, alarmAt: null });
    // The dropped message released its idempotency key.
    const again = await q("q:5", "enqueue", [enqueueRequest("msg_q04_again", target.url, { idempotencyKey: "k-late", delaySeconds: 3600 })]);
    assert.deepEqual(again, { ok: true, messageId: "msg_q04_again", deduped: false });
  });
});

/** An internal (not routable) method on instance `name` of `binding`, over the hop's fetch form. */
async function internal(w, binding, name, method, args = []) {
  const ns = await w.mf.getDurableObjectNamespace(binding);
  const res = await ns.get(ns.idFromName(name)).fetch("https://celld.internal/rpc", {
    method: "POST",
    headers: { "x-celld-method": method, "x-celld-name": encodeURIComponent(name) },
    body: JSON.stringify(args),
  });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  return JSON.parse(text);
}

// Lifecycle leases (src/run/lease.rs): a shard asks a run's DO once per lease instead of
// once per enqueue, and the run DO revokes the lease before a call that expires the run
// answers, so the next enqueue is refused at once (q:7 is never visited by the cleanup: no
// queue fence can refuse it there).
test("queue: lifecycle leases — one ask per run and lease, revoked when the run expires", { timeout: 60_000 }, async () => {
  // One queue object: the test reads the leases that object holds.
  await withWorld({ QUEUE_PARTITIONS: "1" }, () => ({ status: 200 }), async ({ w, target, q }) => {
    const held = async () => (await internal(w, "WORKFLOW_QUEUE", "q:7", "heldLifecycleLeases")).runs;
    const enqueue = (id, runId) => q("q:7", "enqueue", [enqueueRequest(id, target.url, { runId, delaySeconds: 3600 })]);
    const created = await w.rpc("runs", "wrun_lease", "applyEvent", [
      { runId: "wrun_lease", data: { specVersion: 6, eventType: "run_created", eventData: { deploymentId: "dep", workflowName: "wf-l", input: [] } }, cleanup: { retentionMs: 3_600_000, queueShards: 1 } },
    ]);
    assert.equal(created.ok, true);
    for (let i = 0; i < 3; i++) assert.equal((await enqueue(`msg_lease_${i}`, "wrun_lease")).ok, true);
    assert.equal((await enqueue("msg_lease_missing", "wrun_lease_never")).ok, true);
    assert.deepEqual(await held(), ["wrun_lease"], "a lease for the live run, none for the missing one");
    // The internal methods are not on the router's whitelist.
    assert.equal((await w.rpc.raw("queue", "q:7", "revokeLifecycleLease", ["wrun_lease"])).status, 404);
    assert.equal((await w.rpc.raw("runs", "wrun_lease", "leaseLifecycle", ["q:7"])).status, 404);
    assert.deepEqual(await held(), ["wrun_lease"]);
    // Completing it with an hour's retention keeps the lease (it ends long before).
    const completed = await w.rpc("runs", "wrun_lease", "applyEvent", [
      { runId: "wrun_lease", data: { specVersion: 6, eventType: "run_completed", eventData: { output: null } }, cleanup: { retentionMs: 3_600_000, queueShards: 1 } },
    ]);
    assert.equal(completed.ok, true);
    assert.deepEqual(await held(), ["wrun_lease"]);
    assert.equal((await enqueue("msg_lease_3", "wrun_lease")).ok, true);

    // cleanupNow expires the run: the lease is gone before it answers.
    await w.rpc("runs", "wrun_lease", "cleanupNow", [{ retentionMs: 3_600_000, queueShards: 1 }]);
    assert.deepEqual(await held(), []);
    assert.deepEqual(await enqueue("msg_lease_late", "wrun_lease"), { ok: false, code: "RUN_EXPIRED", message: 'Workflow run "wrun_lease" has expired' });

    // A terminal event whose retention is shorter than the lease revokes it too.
    const apply = (data, retentionMs) =>
      w.rpc("runs", "wrun_lease2", "applyEvent", [{ runId: "wrun_lease2", data: { specVersion: 6, ...data }, cleanup: { retentionMs, queueShards: 1 } }]);
    assert.equal((await apply({ eventType: "run_created", eventData: { deploymentId: "dep", workflowName: "wf-l", input: [] } }, 1500)).ok, true);
    assert.equal((await enqueue("msg_lease2_a", "wrun_lease2")).ok, true);
    assert.deepEqual(await held(), ["wrun_lease2"]);
    assert.equal((await apply({ eventType: "run_completed", eventData: { output: null } }, 1500)).ok, true);
    assert.deepEqual(await held(), [], "revoked by the completing applyEvent");
    // Until its due time the run is terminal: leased again, but only up to the due time.
    assert.equal((await enqueue("msg_lease2_b", "wrun_lease2")).ok, true);
    await sleep(1600);
    assert.equal((await enqueue("msg_lease2_c", "wrun_lease2")).code, "RUN_EXPIRED");
    assert.deepEqual(await held(), []);
  });
});

test("queue 0.4: paged expireRun with receipts, acknowledgeExpireRun, bounded purge, config bounds", { timeout: 60_000 }, async () => {
  // One queue object: `limit` bounds one object's page (with partitions each partition's:
  // tests/partitions.test.mjs).
  await withWorld({ QUEUE_PARTITIONS: "1" }, () => ({ status: 500 }), async ({ w, target, q }) => {
    for (let i = 0; i < 3; i++) {
      await q("q:0", "enqueue", [enqueueRequest(`msg_q04_exp_${i}`, target.url, { runId: "wrun_q04_exp", delaySeconds: 3600, idempotencyKey: `k-exp-${i}` })]);
    }
    assert.deepEqual(await q("q:0", "expireRun", ["wrun_q04_exp", 946684800000, { limit: 2 }]), { deleted: 2, done: false });
    const receipt = { expiredAt: 946684800000, deleted: 3 };
    assert.deepEqual(await q("q:0", "expireRun", ["wrun_q04_exp", 946684800000]), { deleted: 3, done: true, receipt });
    assert.deepEqual(await q("q:0", "acknowledgeExpireRun", ["wrun_q04_exp", { ...receipt, deleted: 4 }]), { acknowledged: false });
    assert.deepEqual(await q("q:0", "acknowledgeExpireRun", ["wrun_q04_exp", receipt]), { acknowledged: true });
    const stats = await q("q:0", "stats");
    assert.equal(stats.pending, 0);
    assert.ok(stats.alarmAt > Date.now() + 300_000, "alarm armed for the fence compaction");
    const refused = await q("q:0", "enqueue", [enqueueRequest("msg_q04_exp_9", target.url, { runId: "wrun_q04_exp" })]);
    assert.equal(refused.code, "RUN_EXPIRED");
    // Without a fence: already compacted.
    assert.deepEqual(await q("q:0", "acknowledgeExpireRun", ["wrun_none", receipt]), { acknowledged: true });
    // 0.3 callers (no options, no paged fence) keep `{deleted}`.
    assert.deepEqual(await q("q:0", "expireRun", ["wrun_q04_old", 946684800000]), { deleted: 0 });
  });
  for (const [name, value, message] of [
    ["QUEUE_MAX_INFLIGHT", "129", "QUEUE_MAX_INFLIGHT must be at most 128"],
    ["QUEUE_DELIVERY_TIMEOUT_MS", "300001", "QUEUE_DELIVERY_TIMEOUT_MS must be at most 300000"],
  ]) {
    await withWorld({ [name]: value }, () => ({ status: 200 }), async ({ w, target }) => {
      const res = await fetch(new URL("/v1/rpc/queue/q%3A0/enqueue", w.url), {
        method: "POST",
        headers: { authorization: `Bearer ${w.secret}`, "content-type": "application/json" },
        body: JSON.stringify([enqueueRequest("msg_bound", target.url, { runId: "wrun_bound" })]),
      });
      assert.equal(res.status, 500);
      assert.deepEqual(await res.json(), { error: { name: "Error", message } });
    });
  }
});

// State persisted by the release before the 0.4 queue layout (scripts/make-queue-inflight-fixture.mjs):
// two messages claimed for delivery (0.3 `inflight:<messageId>` = deadline) when the
// runtime stopped; their target no longer exists. Today's build runs it with the default
// layout, 16 partitions (issue #54): the earlier build's one object is partition 0, so
// its messages are delivered where they are, counted, listed and fenced with the shard's,
// and the shard-count pin it holds is the whole shard's.
test("queue 0.4: messages claimed before the upgrade (0.3 inflight: entries) are converted and recovered, under the default partitions", { timeout: 60_000 }, async () => {
  const fixtureDir = join(ROOT, "tests", "fixtures", "queue-inflight-0.3");
  const fixture = JSON.parse(readFileSync(join(fixtureDir, "fixture.json"), "utf8"));
  const dir = mkdtempSync(join(tmpdir(), "celld-queue-upgrade-"));
  cpSync(join(fixtureDir, "state"), dir, { recursive: true });
  const w = await startWorker({ persistDir: dir });
  try {
    const q = (method, args = []) => w.rpc("queue", fixture.shard, method, args);
    // Nothing lost: both messages are in exactly one state at every moment (the legacy
    // claims count as in flight until converted; the fixture's alarm, overdue by now, may
    // already have converted and rescheduled them when the first call arrives).
    const first = await q("stats");
    assert.equal(first.pending + first.inflight + first.deadLetters, 2, JSON.stringify(first));
    // The first call armed the alarm; conversion, recovery and redelivery follow. The
    // dead target fails both attempts (QUEUE_MAX_ATTEMPTS=2): two dead letters.
    const deadline = Date.now() + 20_000;
    let stats;
    while (Date.now() < deadline) {
      stats = await q("stats");
      if (stats.pending === 0 && stats.inflight === 0 && stats.deadLetters === 2) break;
      await sleep(100);
    }
    assert.deepEqual(stats, { pending: 0, inflight: 0, deadLetters: 2, alarmAt: null });
    const dead = (await q("listDeadLetters")).data;
    assert.deepEqual(dead.map((d) => d.messageId).sort(), fixture.messages.map((m) => m.messageId).sort());
    for (const d of dead) assert.equal(d.attempt, 2);
    // The run reference followed the message into the dead-letter table, and the dedup
    // key was released.
    const [withRun] = fixture.messages.filter((m) => m.runId);
    assert.deepEqual(await q("expireRun", [withRun.runId, 946684800000, {}]), { deleted: 1, done: true, receipt: { expiredAt: 946684800000, deleted: 1 } });
    assert.deepEqual((await q("listDeadLetters")).data.map((d) => d.messageId), fixture.messages.filter((m) => !m.runId).map((m) => m.messageId));
    const again = await q("enqueue", [enqueueRequest("msg_after_upgrade", "http://127.0.0.1:9", { idempotencyKey: withRun.idempotencyKey, delaySeconds: 3600 })]);
    assert.deepEqual(again, { ok: true, messageId: "msg_after_upgrade", deduped: false });
    // The earlier build's pin (one shard) holds on every partition a new message lands on.
    for (let i = 0; i < 6; i++) {
      const other = await q("enqueue", [enqueueRequest(`msg_other_count_${i}`, "http://127.0.0.1:9", { queueShards: 4, delaySeconds: 3600 })]);
      assert.equal(other.code, "CONFIG_MISMATCH", JSON.stringify(other));
    }
    assert.equal((await q("stats")).pending, 1);
  } finally {
    await w.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
});

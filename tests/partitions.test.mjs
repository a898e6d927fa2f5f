// Queue partitions (issue #54): with QUEUE_PARTITIONS = 4 a client shard q:0 is four QueueDO
// instances (q:0, q:0~1, q:0~2, q:0~3). Through the router as a client calls it: every
// message delivered, a key deduplicated wherever it lands, QUEUE_MAX_INFLIGHT kept
// deployment-wide, stats / dead letters / redrive / purge / a run's expiry answered for the
// whole shard, one shard-count pin, the admin health one row for the shard with each
// partition beside it.

import { test } from "node:test";
import assert from "node:assert/strict";
import { STANDARD_VARS, startWorker, waitFor } from "./lib/harness.mjs";
import { enqueueRequest, startQueueTarget } from "./lib/queue-target.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function admin(w, path, method = "GET") {
  const r = await fetch(new URL(path, w.url), { method, headers: { authorization: `Bearer ${w.secret}` } });
  return { status: r.status, json: await r.json() };
}

const PARTS = ["q:0", "q:0~1", "q:0~2", "q:0~3"];

test("four partitions: delivered once each, deduplicated, at most QUEUE_MAX_INFLIGHT at the app, stats and health for the whole shard", { timeout: 90_000 }, async () => {
  let open = 0;
  let peak = 0;
  const target = await startQueueTarget(async () => {
    open += 1;
    peak = Math.max(peak, open);
    await sleep(300);
    open -= 1;
    return { status: 200 };
  });
  const w = await startWorker({ vars: { ...STANDARD_VARS, QUEUE_PARTITIONS: "4", QUEUE_MAX_INFLIGHT: "8", QUEUE_MIN_INFLIGHT: "4" } });
  try {
    const N = 60;
    for (let i = 0; i < N; i++) {
      const answer = await w.rpc("queue", "q:0", "enqueue", [enqueueRequest(`msg_p${String(i).padStart(3, "0")}`, target.url)]);
      assert.equal(answer.messageId, `msg_p${String(i).padStart(3, "0")}`);
    }
    // One idempotency key under five message ids: one message, on one partition.
    const first = await w.rpc("queue", "q:0", "enqueue", [enqueueRequest("msg_key_0", target.url, { idempotencyKey: "step_once" })]);
    for (let i = 1; i < 5; i++) {
      const again = await w.rpc("queue", "q:0", "enqueue", [enqueueRequest(`msg_key_${i}`, target.url, { idempotencyKey: "step_once" })]);
      assert.equal(again.messageId, first.messageId, "deduplicated to the first");
    }
    await waitFor("every message delivered", () => new Set(target.deliveries.filter((d) => d.status === 200).map((d) => d.id)).size === N + 1, 60_000);
    const ids = target.deliveries.filter((d) => d.status === 200).map((d) => d.id);
    assert.equal(ids.length, N + 1, "each delivered once");
    assert.ok(peak <= 8, `at most QUEUE_MAX_INFLIGHT (8) at the app over four partitions, saw ${peak}`);
    assert.ok(peak >= 4, `the partitions delivered side by side, saw ${peak}`);
    const stats = await waitFor("the shard drained", async () => {
      const s = await w.rpc("queue", "q:0", "stats", []);
      return s.pending + s.inflight === 0 && s;
    }, 20_000);
    assert.deepEqual([stats.pending, stats.inflight, stats.deadLetters], [0, 0, 0]);
    // The admin health: one row for the client shard, its partitions beside, most of them
    // having delivered; QUEUE_MAX_INFLIGHT shared out (2 each).
    const health = await admin(w, "/v1/admin/queues");
    assert.equal(health.status, 200);
    assert.deepEqual(health.json.shards.map((s) => s.shard), ["q:0"]);
    const row = health.json.shards[0];
    assert.deepEqual(row.partitions.map((p) => p.shard), PARTS);
    assert.equal(row.deliveries.minutes.reduce((a, m) => a + m.delivered, 0), N + 1);
    const delivered = row.partitions.map((p) => p.delivered);
    assert.equal(delivered.reduce((a, b) => a + b, 0), N + 1, JSON.stringify(delivered));
    assert.ok(delivered.filter((n) => n > 0).length >= 3, JSON.stringify(delivered));
    assert.deepEqual([row.pace.ceiling, row.pace.floor], [8, 4]);
    // One partition on its own.
    const third = await admin(w, "/v1/admin/queues?shard=q%3A0~2");
    assert.deepEqual([third.json.shards[0].shard, third.json.shards[0].pace.ceiling], ["q:0~2", 2]);
  } finally {
    await w.dispose();
    await target.close();
  }
});

test("four partitions: dead letters listed across them in one order, redriven and purged; a run's expiry fences every partition", { timeout: 90_000 }, async () => {
  let failing = true;
  const target = await startQueueTarget(() => (failing ? { status: 500, body: "down" } : { status: 200 }));
  const w = await startWorker({ vars: { ...STANDARD_VARS, QUEUE_PARTITIONS: "4", QUEUE_MAX_ATTEMPTS: "1" } });
  try {
    const N = 25;
    for (let i = 0; i < N; i++) await w.rpc("queue", "q:0", "enqueue", [enqueueRequest(`dead_${String(i).padStart(2, "0")}`, target.url)]);
    await waitFor("25 dead letters", async () => (await w.rpc("queue", "q:0", "stats", [])).deadLetters === N, 30_000);
    const seen = [];
    let cursor;
    for (let pages = 0; pages < 10; pages++) {
      const page = await w.rpc("queue", "q:0", "listDeadLetters", [cursor === undefined ? { limit: 10 } : { limit: 10, cursor }]);
      assert.ok(page.data.length <= 10);
      seen.push(...page.data.map((d) => d.messageId));
      if (!page.hasMore) break;
      cursor = page.cursor;
    }
    assert.equal(seen.length, N);
    assert.equal(new Set(seen).size, N, "each dead letter once");
    failing = false;
    assert.deepEqual(await w.rpc("queue", "q:0", "redriveDeadLetter", [seen[3]]), { ok: true });
    assert.deepEqual(await w.rpc("queue", "q:0", "redriveDeadLetter", ["msg_none"]), { ok: false });
    await waitFor("the redriven message delivered", () => target.deliveries.some((d) => d.id === seen[3] && d.status === 200), 20_000);
    const purged = await w.rpc("queue", "q:0", "purgeDeadLetters", []);
    assert.deepEqual(purged, { purged: N - 1, hasMore: false });

    // A run's messages on every partition; its expiry (as a run's cleanup calls it) fences
    // them all: later enqueues of the run are refused whichever partition they land on.
    for (let i = 0; i < 12; i++) {
      await w.rpc("queue", "q:0", "enqueue", [enqueueRequest(`late_${i}`, target.url, { runId: "wrun_gone", delaySeconds: 600 })]);
    }
    const at = Date.now();
    const expired = await w.rpc("queue", "q:0", "expireRun", ["wrun_gone", at, { limit: 64 }]);
    // The answer one object gives (spec-0.4 queue.md §5), the counts summed.
    assert.deepEqual(expired, { deleted: 12, done: true, receipt: { deleted: 12, expiredAt: at } });
    assert.deepEqual(await w.rpc("queue", "q:0", "acknowledgeExpireRun", ["wrun_gone", { deleted: 11, expiredAt: at }]), { acknowledged: false });
    assert.deepEqual(await w.rpc("queue", "q:0", "acknowledgeExpireRun", ["wrun_gone", expired.receipt]), { acknowledged: true });
    for (let i = 0; i < 8; i++) {
      const refused = await w.rpc("queue", "q:0", "enqueue", [enqueueRequest(`again_${i}`, target.url, { runId: "wrun_gone" })]);
      assert.equal(refused.code, "RUN_EXPIRED", JSON.stringify(refused));
    }
    const stats = await w.rpc("queue", "q:0", "stats", []);
    assert.deepEqual([stats.pending, stats.deadLetters], [0, 0]);
  } finally {
    await w.dispose();
    await target.close();
  }
});

test("four partitions keep one shard-count pin: an enqueue with another queueShards is refused wherever it lands; an invalid expiry date as one object takes it", { timeout: 60_000 }, async () => {
  const target = await startQueueTarget(() => ({ status: 200 }));
  const w = await startWorker({ vars: { ...STANDARD_VARS, QUEUE_PARTITIONS: "4" } });
  try {
    // The first enqueue pins the client shard to one shard (partition 0 keeps the pin).
    assert.equal((await w.rpc("queue", "q:0", "enqueue", [enqueueRequest("pin_first", target.url, { delaySeconds: 600 })])).ok, true);
    for (let i = 0; i < 12; i++) {
      const r = await w.rpc("queue", "q:0", "enqueue", [enqueueRequest(`pin_other_${i}`, target.url, { queueShards: 2, delaySeconds: 600 })]);
      assert.equal(r.code, "CONFIG_MISMATCH", JSON.stringify(r));
      assert.match(r.message, /pinned 1, got 2/);
    }
    for (let i = 0; i < 12; i++) {
      const r = await w.rpc("queue", "q:0", "enqueue", [enqueueRequest(`pin_same_${i}`, target.url, { delaySeconds: 600 })]);
      assert.equal(r.ok, true, JSON.stringify(r));
    }
    assert.equal((await w.rpc("queue", "q:0", "stats", [])).pending, 13);
    const health = await admin(w, "/v1/admin/queues");
    assert.ok(health.json.shards[0].partitions.filter((p) => p.pending > 0).length >= 3, "the messages are on several partitions");
    // The partitions' internal methods are not on the router's list.
    for (const method of ["pinShards", "adoptPin", "expireReceipt"]) {
      assert.equal((await w.rpc.raw("queue", "q:0", method, [{}])).status, 404, method);
    }
    // queue.expireRun with an invalid Date: {deleted: 0}, as one object answers it.
    const r = await fetch(new URL("/v1/rpc/queue/q%3A0/expireRun", w.url), {
      method: "POST",
      headers: { authorization: `Bearer ${w.secret}`, "content-type": "application/json" },
      body: '["wrun_bad_date",{"__type":"Date","iso":"garbage"}]',
    });
    assert.deepEqual([r.status, await r.json()], [200, { deleted: 0 }]);
  } finally {
    await w.dispose();
    await target.close();
  }
});

test("a partition count out of range is refused with a clear error", { timeout: 30_000 }, async () => {
  const w = await startWorker({ vars: { ...STANDARD_VARS, QUEUE_PARTITIONS: "99" } });
  try {
    const r = await w.rpc.raw("queue", "q:0", "stats", []);
    assert.equal(r.status, 500);
    assert.match(r.value.error.message, /QUEUE_PARTITIONS and QUEUE_PARTITIONS_PREVIOUS must be integers from 1 to 16/);
  } finally {
    await w.dispose();
  }
});

test("changing the partition count on a live deployment: stored messages are delivered where they are, counted and fenced until then", { timeout: 120_000 }, async () => {
  const { mkdtempSync, rmSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  const { join } = await import("node:path");
  const dir = mkdtempSync(join(tmpdir(), "celld-partitions-"));
  const target = await startQueueTarget(() => ({ status: 200 }));
  const delivered = () => new Set(target.deliveries.filter((d) => d.status === 200).map((d) => d.id));
  const start = (vars) => startWorker({ persistDir: dir, vars: { ...STANDARD_VARS, ...vars } });
  // One object (QUEUE_PARTITIONS=1, the layout of every build before partitions): messages due in 8 s.
  let w = await start({ QUEUE_PARTITIONS: "1" });
  try {
    for (let i = 0; i < 10; i++) await w.rpc("queue", "q:0", "enqueue", [enqueueRequest(`one_${i}`, target.url, { delaySeconds: 8 })]);
  } finally {
    await w.dispose();
  }
  // Four partitions: what q:0 stored is still counted and delivered by q:0; new messages spread.
  w = await start({ QUEUE_PARTITIONS: "4" });
  try {
    assert.equal((await w.rpc("queue", "q:0", "stats", [])).pending, 10);
    for (let i = 0; i < 20; i++) await w.rpc("queue", "q:0", "enqueue", [enqueueRequest(`four_${i}`, target.url, { delaySeconds: 8, runId: i < 4 ? "wrun_late" : undefined })]);
    assert.equal((await w.rpc("queue", "q:0", "stats", [])).pending, 30);
  } finally {
    await w.dispose();
  }
  // Back to two, the previous count declared: the higher partitions' messages are still
  // counted, fenced by a run's expiry and delivered.
  w = await start({ QUEUE_PARTITIONS: "2", QUEUE_PARTITIONS_PREVIOUS: "4" });
  try {
    assert.equal((await w.rpc("queue", "q:0", "stats", [])).pending, 30);
    const expired = await w.rpc("queue", "q:0", "expireRun", ["wrun_late", Date.now(), { limit: 64 }]);
    assert.equal(expired.deleted, 4, "the run's messages on all four partitions");
    await waitFor("every other message delivered", () => delivered().size === 26, 60_000);
    for (let i = 0; i < 10; i++) assert.ok(delivered().has(`one_${i}`), `one_${i}`);
    for (let i = 4; i < 20; i++) assert.ok(delivered().has(`four_${i}`), `four_${i}`);
    for (let i = 0; i < 4; i++) assert.ok(!delivered().has(`four_${i}`), "an expired run's message is not delivered");
    const stats = await waitFor("drained", async () => {
      const s = await w.rpc("queue", "q:0", "stats", []);
      return s.pending + s.inflight === 0 && s;
    }, 20_000);
    assert.equal(stats.deadLetters, 0);
    assert.equal(target.deliveries.filter((d) => d.status === 200).length, 26, "each delivered once");
  } finally {
    await w.dispose();
    await target.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

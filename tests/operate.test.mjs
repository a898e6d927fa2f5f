// Operating a deployment (issue #55, docs/operations.md): secret rotation, the queue health
// and dead-letter routes (`/v1/admin/…`), the console's static page and its headers, and the
// operator log lines — on the built worker in Miniflare, with a real delivery target.

import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { STANDARD_VARS, startWorker, waitFor } from "./lib/harness.mjs";
import { enqueueRequest, startQueueTarget } from "./lib/queue-target.mjs";

/** `fetch` of the worker with a bearer secret (or none); the status and the parsed body. */
async function call(w, path, { secret = w.secret, method = "GET", body } = {}) {
  const headers = secret === null ? {} : { authorization: `Bearer ${secret}` };
  const r = await fetch(new URL(path, w.url), { method, headers, body });
  const text = await r.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: r.status, json, text, headers: r.headers };
}

const rpcPath = (shard, method) => `/v1/rpc/queue/${encodeURIComponent(shard)}/${method}`;

test("secret rotation: the previous secret works while it is set, and only then", { timeout: 60_000 }, async () => {
  // Phase 1: one secret. Phase 2: the new one, the old one as WORLD_SECRET_PREVIOUS. Phase 3: the old one removed.
  const phases = [
    { vars: { WORLD_SECRET: "old-secret" }, accepted: ["old-secret"], refused: ["new-secret"] },
    { vars: { WORLD_SECRET: "new-secret", WORLD_SECRET_PREVIOUS: "old-secret" }, accepted: ["new-secret", "old-secret"], refused: ["other"] },
    { vars: { WORLD_SECRET: "new-secret", WORLD_SECRET_PREVIOUS: "" }, accepted: ["new-secret"], refused: ["old-secret", ""] },
    { vars: { WORLD_SECRET: "new-secret" }, accepted: ["new-secret"], refused: ["old-secret"] },
  ];
  for (const { vars, accepted, refused } of phases) {
    const w = await startWorker({ vars: { ...STANDARD_VARS, ...vars } });
    try {
      for (const secret of accepted) {
        const rpc = await call(w, rpcPath("q:0", "stats"), { secret, method: "POST", body: "[]" });
        assert.equal(rpc.status, 200, `RPC with ${secret} in ${JSON.stringify(vars)}`);
        const health = await call(w, "/v1/admin/queues", { secret });
        assert.equal(health.status, 200, `health with ${secret}`);
        assert.equal(health.json.shards[0].shard, "q:0");
      }
      for (const secret of refused) {
        const rpc = await call(w, rpcPath("q:0", "stats"), { secret, method: "POST", body: "[]" });
        assert.equal(rpc.status, 401, `RPC with ${JSON.stringify(secret)} in ${JSON.stringify(vars)}`);
        assert.equal((await call(w, "/v1/admin/queues", { secret })).status, 401);
      }
      assert.equal((await call(w, "/v1/admin/queues", { secret: null })).status, 401);
    } finally {
      await w.dispose();
    }
  }
  // Without a current secret the worker stays closed, whatever the previous one is.
  const w = await startWorker({ vars: { WORLD_SECRET_PREVIOUS: "old-secret" } });
  try {
    assert.equal((await call(w, rpcPath("q:0", "stats"), { secret: "old-secret", method: "POST", body: "[]" })).status, 503);
  } finally {
    await w.dispose();
  }
});

test("console: the page and its files, no secret in them, headers that keep it to itself", { timeout: 30_000 }, async () => {
  const w = await startWorker();
  try {
    for (const [path, type] of [
      ["/console", "text/html"],
      ["/console/", "text/html"],
      ["/console/console.js", "text/javascript"],
      ["/console/console.css", "text/css"],
    ]) {
      const r = await call(w, path, { secret: null });
      assert.equal(r.status, 200, path);
      assert.match(r.headers.get("content-type"), new RegExp(`^${type}`), path);
      const csp = r.headers.get("content-security-policy");
      assert.match(csp, /default-src 'none'/);
      assert.match(csp, /script-src 'self'(;|$)/);
      assert.match(csp, /frame-ancestors 'none'/);
      assert.equal(r.headers.get("x-frame-options"), "DENY");
      assert.equal(r.headers.get("set-cookie"), null);
      assert.ok(!r.text.includes(STANDARD_VARS.WORLD_SECRET) && !r.text.includes(STANDARD_VARS.WORKFLOW_CALLBACK_SECRET), `${path} holds a secret`);
    }
    const page = await call(w, "/console", { secret: null });
    assert.doesNotMatch(page.text, /<script(?![^>]*\ssrc=)[^>]*>/, "no inline script");
    assert.doesNotMatch(page.text, /\son[a-z]+=/i, "no inline handler");
    assert.doesNotMatch(page.text, /https?:\/\//, "nothing from elsewhere");
    assert.equal((await call(w, "/console", { secret: null, method: "POST", body: "x" })).status, 405);
    assert.equal((await call(w, "/console/nope.js", { secret: null })).status, 404);
  } finally {
    await w.dispose();
  }
});

test("admin routes: bad input gets a clear error and changes nothing", { timeout: 30_000 }, async () => {
  const w = await startWorker({ vars: { ...STANDARD_VARS, WORKFLOW_RETENTION_QUEUE_SHARDS: "2" } });
  try {
    const health = await call(w, "/v1/admin/queues");
    assert.equal(health.status, 200);
    assert.deepEqual(health.json.shards.map((s) => s.shard), ["q:0", "q:1"]);
    const one = health.json.shards[0];
    assert.deepEqual(one.messages, { pending: 0, due: 0, inflight: 0, deadLetters: 0, capped: false });
    // The shard's 16 partitions (the default) together: QUEUE_MAX_INFLIGHT (128) shared out,
    // the floor QUEUE_MIN_INFLIGHT (5) but at least one delivery a partition.
    assert.deepEqual(one.pace, { now: 16, floor: 16, ceiling: 128 });
    assert.equal(one.partitions.length, 16);
    assert.equal(one.deliveries.minutes.length, 15);
    const bad = [
      ["/v1/admin/queues", { secret: "wrong" }, 401, "Unauthorized"],
      ["/v1/admin/queues?shard=q%3A2", {}, 404, "UnknownShard"],
      ["/v1/admin/queues?shard=q%3A00", {}, 404, "UnknownShard"],
      ["/v1/admin/queues/q%3A9/dead-letters", {}, 404, "UnknownShard"],
      ["/v1/admin/queues/q%3A0/dead-letters?limit=1000000", {}, 400, "BadRequest"],
      ["/v1/admin/queues/q%3A0/dead-letters?limit=0", {}, 400, "BadRequest"],
      ["/v1/admin/queues/q%3A0/dead-letters?cursor=not-a-cursor", {}, 400, "BadRequest"],
      ["/v1/admin/queues/q%3A0/dead-letters?cursor=%E0%A4%A", {}, 400, "BadRequest"],
      ["/v1/admin/queues/q%3A0/purge", {}, 405, "MethodNotAllowed"],
      ["/v1/admin/queues/q%3A0/nope", { method: "POST" }, 404, "NotFound"],
      ["/v1/admin/nope", {}, 404, "NotFound"],
      ["/v1/admin/queues/q%3A0/dead-letters/%E0%A4%A/redrive", { method: "POST" }, 400, "BadRequest"],
    ];
    for (const [path, options, status, name] of bad) {
      const r = await call(w, path, options);
      assert.equal(r.status, status, `${path}: ${r.text}`);
      assert.equal(r.json?.error?.name, name, path);
      assert.ok(r.json.error.message.length > 0);
    }
    // A message due in a minute: pending, not due, and the alarm armed for it.
    const target = "http://127.0.0.1:9";
    await w.rpc("queue", "q:1", "enqueue", [enqueueRequest("msg_later", target, { delaySeconds: 60, queueShards: 2 })]);
    const later = (await call(w, "/v1/admin/queues?shard=q%3A1")).json.shards[0];
    assert.deepEqual(later.messages, { pending: 1, due: 0, inflight: 0, deadLetters: 0, capped: false });
    assert.equal(later.oldestDueAgeMs, null);
    assert.ok(later.alarmAt > Date.now() + 50_000 && later.alarmAt < Date.now() + 61_000, `alarmAt ${later.alarmAt}`);
    // A redrive of no dead letter: {ok:false}, nothing changed.
    const none = await call(w, "/v1/admin/queues/q%3A0/dead-letters/msg_none/redrive", { method: "POST" });
    assert.deepEqual([none.status, none.json], [200, { ok: false }]);
    const after = await call(w, "/v1/admin/queues");
    assert.deepEqual(after.json.shards[0].messages, one.messages);
  } finally {
    await w.dispose();
  }
  // A shard count that is not one: a clear error.
  const misconfigured = await startWorker({ vars: { ...STANDARD_VARS, WORKFLOW_RETENTION_QUEUE_SHARDS: "zero" } });
  try {
    const r = await call(misconfigured, "/v1/admin/queues");
    assert.equal(r.status, 500);
    assert.match(r.json.error.message, /WORKFLOW_RETENTION_QUEUE_SHARDS must be an integer/);
  } finally {
    await misconfigured.dispose();
  }
});

test("a failing app: dead letter with its last answer, logged without payload or secret, seen and redriven through the admin routes", { timeout: 60_000 }, async () => {
  let healthy = false;
  const target = await startQueueTarget(() =>
    healthy ? { status: 200 } : { status: 500, body: '{"error":"database unavailable: connection refused"}' },
  );
  const logs = [];
  const w = await startWorker({ vars: { ...STANDARD_VARS, QUEUE_MAX_ATTEMPTS: "2" }, logs });
  try {
    const payload = "PAYLOAD-do-not-log-" + "x".repeat(20);
    const request = enqueueRequest("msg_dead_1", target.url, { runId: undefined, body: JSON.stringify({ payload }), queueName: "__wkf_step_charge" });
    assert.equal((await w.rpc("queue", "q:0", "enqueue", [request])).ok, true);
    const letters = await waitFor("the dead letter", async () => {
      const r = await call(w, "/v1/admin/queues/q%3A0/dead-letters?limit=10");
      return r.json?.data?.length === 1 ? r.json : null;
    });
    const dead = letters.data[0];
    assert.equal(dead.messageId, "msg_dead_1");
    assert.equal(dead.queueName, "__wkf_step_charge");
    assert.equal(dead.attempts, 2);
    assert.equal(dead.lastError, "HTTP 500");
    assert.equal(dead.lastAnswer, '{"error":"database unavailable: connection refused"}');
    assert.equal(typeof dead.failedAt, "number");
    assert.deepEqual([letters.cursor, letters.hasMore], [null, false]);
    assert.ok(!JSON.stringify(letters).includes("PAYLOAD"), "no payload in the console's listing");
    // The raw RPC listing keeps the producer's row as the reference does (no console excerpt).
    const raw = await w.rpc("queue", "q:0", "listDeadLetters", []);
    assert.equal(raw.data[0].lastAnswer, undefined);
    assert.equal(raw.data[0].lastError, "HTTP 500");

    const health = (await call(w, "/v1/admin/queues")).json.shards[0];
    assert.equal(health.messages.deadLetters, 1);
    assert.equal(health.deliveries.deadLettered, 1);
    assert.equal(health.deliveries.failuresByStatus["500"], 2);
    const minute = health.deliveries.minutes.at(-1);
    assert.ok(minute.failed >= 1 && minute.deadLettered >= 0);

    // The log lines: a retried failure, the last failure and the dead letter.
    const events = () => logs.filter((l) => l.includes('"msg":"world-celld queue"')).map((l) => JSON.parse(l.slice(l.indexOf("{"))));
    await waitFor("the log lines", () => events().some((e) => e.event === "message.dead_lettered"));
    const failed = events().filter((e) => e.event === "delivery.failed");
    assert.deepEqual(failed.map((e) => [e.attempt, e.status, e.willRetry]), [[1, 500, true], [2, 500, false]]);
    assert.equal(typeof failed[0].retryAt, "number");
    const deadLine = events().find((e) => e.event === "message.dead_lettered");
    assert.deepEqual([deadLine.shard, deadLine.queueName, deadLine.messageId, deadLine.runId, deadLine.attempts], ["q:0", "__wkf_step_charge", "msg_dead_1", null, 2]);
    for (const l of logs) {
      assert.ok(!l.includes("PAYLOAD"), `a payload in a log line: ${l}`);
      assert.ok(!l.includes(STANDARD_VARS.WORLD_SECRET) && !l.includes(STANDARD_VARS.WORKFLOW_CALLBACK_SECRET), `a secret in a log line: ${l}`);
    }

    // Redriven once the app is well again: delivered, and the dead letters are empty.
    healthy = true;
    const redrive = await call(w, "/v1/admin/queues/q%3A0/dead-letters/msg_dead_1/redrive", { method: "POST" });
    assert.deepEqual([redrive.status, redrive.json], [200, { ok: true }]);
    await waitFor("the redelivery", () => target.deliveries.some((d) => d.id === "msg_dead_1" && d.status === 200));
    const empty = await call(w, "/v1/admin/queues/q%3A0/dead-letters");
    assert.deepEqual(empty.json, { data: [], cursor: null, hasMore: false });
    const purge = await call(w, "/v1/admin/queues/q%3A0/purge", { method: "POST" });
    assert.deepEqual(purge.json, { purged: 0, hasMore: false });
    const rearm = await call(w, "/v1/admin/queues/q%3A0/rearm", { method: "POST" });
    assert.equal(rearm.status, 200);
    assert.ok("alarmAt" in rearm.json);
  } finally {
    await w.dispose();
    await target.close();
  }
});

test("redrive-all pages through many dead letters; a refusing app is logged as refused", { timeout: 90_000 }, async () => {
  let mode = "fail";
  const target = await startQueueTarget(() => (mode === "fail" ? { status: 502 } : mode === "refuse" ? { status: 429, headers: { "retry-after": "1" } } : { status: 200 }));
  const logs = [];
  const w = await startWorker({ vars: { ...STANDARD_VARS, QUEUE_MAX_ATTEMPTS: "1" }, logs });
  try {
    const N = 25;
    for (let i = 0; i < N; i++) await w.rpc("queue", "q:0", "enqueue", [enqueueRequest(`msg_many_${i}`, target.url)]);
    await waitFor("25 dead letters", async () => (await call(w, "/v1/admin/queues")).json.shards[0].messages.deadLetters === N, 30_000);
    // Two pages of dead letters with a cursor.
    const first = (await call(w, "/v1/admin/queues/q%3A0/dead-letters?limit=20")).json;
    assert.equal(first.data.length, 20);
    assert.equal(first.hasMore, true);
    const second = (await call(w, `/v1/admin/queues/q%3A0/dead-letters?limit=20&cursor=${encodeURIComponent(first.cursor)}`)).json;
    assert.equal(second.data.length, 5);
    assert.equal(new Set([...first.data, ...second.data].map((d) => d.messageId)).size, N);

    mode = "refuse";
    let r = (await call(w, "/v1/admin/queues/q%3A0/redrive-all", { method: "POST" })).json;
    assert.deepEqual(r, { redriven: 20, failed: 0, hasMore: true });
    const events = () => logs.filter((l) => l.includes('"msg":"world-celld queue"')).map((l) => JSON.parse(l.slice(l.indexOf("{"))));
    await waitFor("a refusal logged", () => events().some((e) => e.event === "delivery.refused"));
    assert.equal(events().find((e) => e.event === "delivery.refused").retryAfterMs, 1000);
    mode = "ok";
    r = (await call(w, "/v1/admin/queues/q%3A0/redrive-all", { method: "POST" })).json;
    assert.deepEqual(r, { redriven: 5, failed: 0, hasMore: false });
    await waitFor("every message delivered", () => new Set(target.deliveries.filter((d) => d.status === 200).map((d) => d.id)).size === N, 30_000);
    const health = (await call(w, "/v1/admin/queues")).json.shards[0];
    assert.equal(health.messages.deadLetters, 0);
    assert.ok(health.deliveries.refused >= 1);
    assert.ok(health.deliveries.kinds.some((k) => k.kind === "__wkf_workflow_test flow" && k.count >= N && typeof k.p95Ms === "number"));
  } finally {
    await w.dispose();
    await target.close();
  }
});

/** The queue's operator log lines among `logs` (workerd's output), parsed. */
function queueEvents(logs) {
  return logs.filter((l) => l.includes('"msg":"world-celld queue"')).map((l) => JSON.parse(l.slice(l.indexOf("{"))));
}

test("log: claims.recovered when a fresh instance puts back the deliveries a dead one left", { timeout: 60_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "celld-operate-recovered-"));
  let hang = true;
  const target = await startQueueTarget(() => (hang ? new Promise(() => {}) : { status: 200 }));
  let w = await startWorker({ persistDir: dir });
  try {
    for (const id of ["msg_r1", "msg_r2"]) await w.rpc("queue", "q:0", "enqueue", [enqueueRequest(id, target.url)]);
    await waitFor("both deliveries in flight", async () => (await w.rpc("queue", "q:0", "stats")).inflight === 2);
  } finally {
    await w.dispose();
  }
  hang = false;
  const logs = [];
  w = await startWorker({ persistDir: dir, logs });
  try {
    await waitFor("the recovered deliveries", () => target.deliveries.filter((d) => d.status === 200).length === 2, 15_000);
    // One line per queue instance that held some (the two may lie on two partitions).
    const lines = () => queueEvents(logs).filter((e) => e.event === "claims.recovered");
    await waitFor("the log lines", () => lines().reduce((n, e) => n + e.count, 0) === 2);
    for (const line of lines()) {
      assert.deepEqual([line.shard, line.level, typeof line.partition], ["q:0", "warn", "number"]);
    }
  } finally {
    await w.dispose();
    await target.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("log: pace.cut when an app that waited on the outside world starts failing under load", { timeout: 60_000 }, async () => {
  // One-second deliveries: the pace grows past its floor of 2; from the 17th delivery on the app
  // fails (503 without timeoutSeconds, the runtime's own overload answer aside) and the pace is
  // cut. Counted by arrivals, not by a poll of the pace: a poll that comes late on a slow machine
  // saw every delivery already at the app, and nothing left to fail.
  let arrived = 0;
  const target = await startQueueTarget(() => (++arrived > 16 ? { status: 503, body: "overloaded" } : { status: 200, delayMs: 1000 }));
  const logs = [];
  // One queue object's pace (QUEUE_PARTITIONS=1): with the default 16 partitions each runs
  // its share, 2 of these 32 (tests/partitions.test.mjs, tests/scale.test.mjs).
  const w = await startWorker({ vars: { ...STANDARD_VARS, QUEUE_PARTITIONS: "1", QUEUE_MIN_INFLIGHT: "2", QUEUE_MAX_INFLIGHT: "32", QUEUE_MAX_ATTEMPTS: "5" }, logs });
  try {
    for (let i = 0; i < 40; i++) await w.rpc("queue", "q:0", "enqueue", [enqueueRequest(`msg_p${i}`, target.url)]);
    await waitFor("pace.cut", () => queueEvents(logs).some((e) => e.event === "pace.cut"), 30_000);
    const cut = queueEvents(logs).find((e) => e.event === "pace.cut");
    assert.equal(cut.shard, "q:0");
    assert.ok(cut.from >= 8 && cut.to < cut.from && cut.to >= 2, JSON.stringify(cut));
    assert.equal(cut.reason, "HTTP 503");
    // The failures themselves, each with its retry.
    const failed = queueEvents(logs).filter((e) => e.event === "delivery.failed");
    assert.ok(failed.length >= 1 && failed.every((e) => e.status === 503 && e.willRetry === true), JSON.stringify(failed.slice(0, 3)));
  } finally {
    await w.dispose();
    await target.close();
  }
});

test("redrive-all stops when a page redrives none (dead letters whose key another message holds are listed first again)", { timeout: 60_000 }, async () => {
  // msg_stuck_*: fail (dead-lettered at once); msg_holder_*: hang, holding the same keys.
  const target = await startQueueTarget((d) => (d.id.startsWith("msg_holder_") ? new Promise(() => {}) : { status: 500 }));
  const w = await startWorker({ vars: { ...STANDARD_VARS, QUEUE_MAX_ATTEMPTS: "1" } });
  try {
    const N = 21;
    for (let i = 0; i < N; i++) await w.rpc("queue", "q:0", "enqueue", [enqueueRequest(`msg_stuck_${i}`, target.url, { idempotencyKey: `k${i}` })]);
    await waitFor("21 dead letters", async () => (await call(w, "/v1/admin/queues")).json.shards[0].messages.deadLetters === N, 30_000);
    for (let i = 0; i < N; i++) {
      const r = await w.rpc("queue", "q:0", "enqueue", [enqueueRequest(`msg_holder_${i}`, target.url, { idempotencyKey: `k${i}` })]);
      assert.equal(r.deduped, false);
    }
    // A page of 20 that all stay, and more behind it: no progress, so no `hasMore`.
    const r = await call(w, "/v1/admin/queues/q%3A0/redrive-all", { method: "POST" });
    assert.deepEqual(r.json, { redriven: 0, failed: 20, hasMore: false });
    assert.equal((await call(w, "/v1/admin/queues")).json.shards[0].messages.deadLetters, N);
  } finally {
    await w.dispose();
    await target.close();
  }
});

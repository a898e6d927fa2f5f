// Hardening over the real HTTP RPC on Miniflare (issue 11): bounded responses for large
// stream chunks and lists, alarms the platform accepts, JavaScript number semantics,
// the nesting limit, hostile arguments, and bounded retention work per request.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { STANDARD_VARS, startWorker } from "./lib/harness.mjs";
import { makeRpc } from "./lib/rpc.mjs";
import { enqueueRequest } from "./lib/queue-target.mjs";
import { worldClient } from "./lib/world-client.mjs";

/** The response budget of every listing answer (src/store/page.rs). */
const BUDGET = 8 * 1024 * 1024;
/** The platform's last accepted alarm time is just below i64::MAX nanoseconds. */
const PLATFORM_ALARM_LIMIT_MS = 9_223_372_036_854;

let w;
/** RPCs over a new connection each (node:http, no keep-alive): multi-megabyte request
 *  bodies written to a kept-alive socket the runtime has just closed fail with EPIPE. */
let fresh;
before(async () => {
  w = await startWorker();
  fresh = makeRpc({ url: w.url, secret: w.secret, agent: new http.Agent({ keepAlive: false }) });
});
after(async () => {
  await w?.dispose();
});

/** POST a raw body text; answers {status, text}. */
async function rawPost(binding, name, method, body) {
  const res = await fetch(new URL(`/v1/rpc/${binding}/${encodeURIComponent(name)}/${method}`, w.url), {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${w.secret}` },
    body,
  });
  return { status: res.status, text: await res.text() };
}

test("getChunks of 40 chunks of 2,000,000 bytes stays within the budget; both client read paths see every chunk", async () => {
  const N = 40;
  const SIZE = 2_000_000;
  const chunk = (i) => {
    const c = new Uint8Array(SIZE).fill(i);
    c[SIZE - 1] = 0xa5;
    return c;
  };
  const name = "stream:big-chunks";
  for (let i = 0; i < N; i++) assert.equal(await fresh("streams", name, "writeChunk", ["wrun_big", chunk(i)]), i);
  assert.equal(await w.rpc("streams", name, "closeStream", ["wrun_big"]), null);
  const get = async (startIndex, limit) => {
    const r = await fresh.raw("streams", name, "getChunks", [{ startIndex, limit }]);
    assert.equal(r.status, 200, r.text.slice(0, 300));
    assert.ok(r.text.length <= BUDGET + 64, `answer of ${r.text.length} bytes`);
    return r.value;
  };
  const first = await get(0, 32);
  assert.equal(first.chunks.length, 3);
  assert.equal(first.done, false, "a short page is never the end");
  assert.equal(first.tailIndex, N - 1);

  // readFromStream: getChunks({startIndex: next, limit: 32}), advance by what came back.
  let next = 0;
  for (let pages = 0; ; pages++) {
    assert.ok(pages < 100);
    const page = await get(next, 32);
    if (page.chunks.length === 0) {
      assert.equal(page.done, true);
      break;
    }
    for (const c of page.chunks) {
      assert.equal(c.length, SIZE);
      assert.equal(c[0], next);
      assert.equal(c[SIZE - 1], 0xa5);
      next++;
    }
  }
  assert.equal(next, N);

  // getStreamChunks({limit: 32}): getChunks({limit: 33}), hasMore = more than 32 came back.
  let start = 0;
  for (;;) {
    const page = await get(start, 33);
    assert.ok(page.chunks.length >= 1 && page.chunks.length <= 32);
    page.chunks.forEach((c, i) => assert.equal(c[0], start + i));
    start += page.chunks.length;
    if (start === N) {
      assert.equal(page.done, true);
      break;
    }
    assert.equal(page.done, false, `done reported at ${start} of ${N}`);
  }
});

test("enqueue with delaySeconds 1e12 is accepted and armed at a time the alarm API takes; rearmAlarm works", async () => {
  const q = "q:far-future";
  const queued = await w.rpc("queue", q, "enqueue", [enqueueRequest("msg_far", "http://127.0.0.1:9", { delaySeconds: 1e12 })]);
  assert.equal(queued.ok, true, JSON.stringify(queued));
  const stats = await w.rpc("queue", q, "stats", []);
  assert.equal(stats.pending, 1);
  assert.ok(Number.isFinite(stats.alarmAt) && stats.alarmAt < PLATFORM_ALARM_LIMIT_MS, JSON.stringify(stats));
  const rearmed = await w.rpc("queue", q, "rearmAlarm", []);
  assert.equal(rearmed.alarmAt, stats.alarmAt);
  for (const delaySeconds of [7.45e9, 1e300]) {
    const r = await w.rpc.raw("queue", q, "enqueue", [enqueueRequest(`msg_${delaySeconds}`, "http://127.0.0.1:9", { delaySeconds })]);
    assert.equal(r.status, 200, r.text);
  }
  assert.equal((await w.rpc("queue", q, "stats", [])).pending, 3);
});

test("numbers beyond a double are ±Infinity like JSON.parse (written back as null)", async () => {
  const huge = `1${"0".repeat(10_000)}`;
  const put = await rawPost("index", "index", "put", `["inf",[1e400,-1e400,${huge},-${huge},"1e400",1e-400]]`);
  assert.equal(put.status, 200, put.text);
  const got = await w.rpc.raw("index", "index", "get", ["inf"]);
  assert.equal(got.text, '[null,null,null,null,"1e400",0]');
  assert.equal((await rawPost("index", "index", "put", '["inf2", 1e400')).status, 400, "still malformed when malformed");
});

test("numbers are written exactly as Number#toString: 100,000 random doubles round-trip text-identical", async () => {
  const view = new DataView(new ArrayBuffer(8));
  const all = [96523068982937.62, 618554616486153.2, Number.MIN_VALUE, Number.MAX_VALUE, 1e21, 1e-7, 0.1 + 0.2, 2 ** 53];
  while (all.length < 100_000) {
    const i = all.length;
    let x;
    if (i % 4 === 0) {
      view.setUint32(0, (Math.random() * 2 ** 32) >>> 0);
      view.setUint32(4, (Math.random() * 2 ** 32) >>> 0);
      x = view.getFloat64(0);
    } else if (i % 4 === 1) x = Math.floor(Math.random() * 2 ** 50) / 2 ** (1 + (i % 3));
    else if (i % 4 === 2) x = Math.random() * 1e14;
    else x = (Math.random() - 0.5) * 10 ** Math.floor(Math.random() * 60 - 30);
    if (Number.isFinite(x)) all.push(x);
  }
  for (let part = 0; part < 4; part++) {
    const numbers = all.slice(part * 25_000, (part + 1) * 25_000);
    const text = JSON.stringify(numbers);
    assert.equal((await rawPost("index", "index", "put", `["numbers:${part}",${text}]`)).status, 200);
    const got = await w.rpc.raw("index", "index", "get", [`numbers:${part}`]);
    if (got.text !== text) {
      // The array holds only numbers: compare the texts one by one.
      const back = got.text.slice(1, -1).split(",");
      const bad = numbers.map((n, i) => [String(n), back[i]]).filter(([a, b]) => a !== b);
      assert.fail(`${bad.length} numbers differ, e.g. ${JSON.stringify(bad.slice(0, 5))}`);
    }
  }
});

test("nesting: 128 levels are accepted, 129 refused with 400", async () => {
  const nested = (levels) => `${"[".repeat(levels)}1${"]".repeat(levels)}`;
  // ["deep", <value>]: the argument array is level 1, so the value may nest 127 deep.
  const ok = await rawPost("index", "index", "put", `["deep",${nested(127)}]`);
  assert.equal(ok.status, 200, ok.text);
  const got = await w.rpc.raw("index", "index", "get", ["deep"]);
  assert.equal(got.text, nested(127));
  const objects = `["deepo",${'{"a":'.repeat(127)}1${"}".repeat(127)}]`;
  assert.equal((await rawPost("index", "index", "put", objects)).status, 200);
  const refused = await rawPost("index", "index", "put", `["deeper",${nested(128)}]`);
  assert.equal(refused.status, 400, refused.text);
  assert.match(refused.text, /malformed rpc body/);
  assert.equal((await rawPost("index", "index", "put", `["deeper",${'{"a":'.repeat(128)}1${"}".repeat(128)}]`)).status, 400);
  assert.equal(await w.rpc("index", "index", "get", ["deeper"]), null);
});

test("hostile arguments: object keys, Date keys, invalid expiredAt, registerStream(null)", async () => {
  // index.get/put/delete with an object key: coerced like String(x), as the reference does.
  const key = { not: "a string" };
  assert.equal(await w.rpc("index", "index", "put", [key, "v"]), null);
  assert.equal(await w.rpc("index", "index", "get", [key]), "v");
  assert.equal(await w.rpc("index", "index", "get", ["[object Object]"]), "v");
  assert.equal(await w.rpc("index", "index", "delete", [key]), null);
  assert.equal(await w.rpc("index", "index", "get", [key]), null);
  // A Date key is refused (the reference fails too), and nothing is stored.
  const dated = await w.rpc.raw("index", "index", "put", [new Date("2020-01-01T00:00:00Z"), "v"]);
  assert.equal(dated.status, 500, dated.text);
  assert.equal(dated.value.error.message, "key must be a string");
  const listed = await w.rpc("index", "index", "list", [{ prefix: "Wed" }]);
  assert.deepEqual(listed.keys, []);
  // queue.expireRun with an invalid Date: {deleted: 0} like the reference.
  const expired = await rawPost("queue", "q:0", "expireRun", '["wrun_bad_date",{"__type":"Date","iso":"garbage"}]');
  assert.equal(expired.status, 200, expired.text);
  assert.deepEqual(JSON.parse(expired.text), { deleted: 0 });
  // registerStream(null): 200 like the reference.
  const reg = await w.rpc.raw("streams", "run-streams:wrun_null", "registerStream", [null]);
  assert.equal(reg.status, 200, reg.text);
  assert.deepEqual(await w.rpc("streams", "run-streams:wrun_null", "listStreams", []), ["undefined"]);
});

test("listEvents and listSteps with limit 1e15 answer bounded pages of 2 MB events; paging by cursor sees all", async () => {
  const c = worldClient(fresh);
  const runId = "wrun_big_events";
  const input = new Uint8Array(2_000_000).fill(7);
  const created = await c.createEvent(runId, { eventType: "run_created", specVersion: 6, eventData: { deploymentId: "dep", workflowName: "wf", input: new Uint8Array([1]) } });
  assert.equal(created.ok, true);
  for (let i = 0; i < 6; i++) {
    const out = await c.createEvent(runId, { eventType: "step_created", specVersion: 6, correlationId: `s${i}`, eventData: { stepName: "st", input } });
    assert.equal(out.ok, true, JSON.stringify(out).slice(0, 300));
  }
  for (const [method, total] of [["listEvents", 7], ["listSteps", 6]]) {
    let cursor = null;
    let seen = 0;
    let pages = 0;
    for (;;) {
      const r = await fresh.raw("runs", runId, method, [{ limit: 1e15, cursor }]);
      assert.equal(r.status, 200, r.text.slice(0, 300));
      assert.ok(r.text.length <= BUDGET + 1024, `${method}: ${r.text.length} bytes`);
      const page = r.value.value;
      assert.ok(page.data.length >= 1);
      seen += page.data.length;
      pages++;
      if (!page.hasMore) break;
      cursor = page.cursor;
      assert.equal(typeof cursor, "string");
    }
    assert.equal(seen, total, method);
    assert.ok(pages >= 2, `${method}: ${pages} pages`);
  }
});

test("cleanupNow with queueShards 1e9 answers after a bounded step; the alarm finishes all 1,024 shards", { timeout: 120_000 }, async () => {
  // One queue object per shard (QUEUE_PARTITIONS=1): the bound under test is on shards; the
  // default 16 partitions make each shard's page 16 calls (a run's expiry over partitions:
  // tests/partitions.test.mjs, tests/retention.test.mjs), which Miniflare runs too slowly
  // for 1,024 shards here.
  const w = await startWorker({ vars: { ...STANDARD_VARS, QUEUE_PARTITIONS: "1" } });
  try {
    await manyShards(w);
  } finally {
    await w.dispose();
  }
});

async function manyShards(w) {
  const c = worldClient(w.rpc);
  const runId = "wrun_many_shards";
  await c.createEvent(runId, { eventType: "run_created", specVersion: 6, eventData: { deploymentId: "dep", workflowName: "wf", input: new Uint8Array([1]) } });
  await c.createEvent(runId, { eventType: "run_started", specVersion: 6 });
  const done = await c.createEvent(runId, { eventType: "run_completed", specVersion: 6, eventData: { output: new Uint8Array([2]) } });
  assert.equal(done.ok, true);
  const far = await w.rpc("queue", "q:700", "enqueue", [enqueueRequest("msg_shard_700", "http://127.0.0.1:9", { runId, delaySeconds: 3600, queueShards: 1024 })]);
  assert.equal(far.ok, true);
  const started = Date.now();
  const record = await w.rpc("runs", runId, "cleanupNow", [{ retentionMs: 1, queueShards: 1e9 }]);
  const took = Date.now() - started;
  assert.equal(record.phase, "queues", JSON.stringify(record));
  assert.ok(took < 5000, `cleanupNow took ${took} ms`);
  const deadline = Date.now() + 90_000;
  let status;
  for (;;) {
    status = await w.rpc("runs", runId, "getCleanupStatus", []);
    if (status?.phase === "tombstoned") break;
    assert.ok(Date.now() < deadline, `not tombstoned: ${JSON.stringify(status)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
  assert.equal(status.deletedQueueMessages, 1);
  assert.equal((await w.rpc("queue", "q:700", "stats", [])).pending, 0);
}

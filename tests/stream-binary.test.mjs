// The 0.4 binary stream route on Miniflare (spec-0.4 wire.md §5–6, stream.md §3–6): byte-exact
// frames, the route's refusals, long-poll reads woken by a write/close/fail/expire of the
// same instance, timeouts, that a waiting read blocks nothing, that a caller that goes away
// leaves no waiter behind, and that the 0.3 RPC methods and the binary route share one
// layout.
//
// A second worker ("driver") sits in front of the real worker through a service binding and
// binds the same StreamDO namespace: it can abandon a request half-way (abort its
// subrequest, which is what the edge does when a client disconnects; a socket closed by a
// local HTTP client is not noticed by workerd) and read the instance's waiter count through
// the internal `streamWaiters()` method.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { cpSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { Log, LogLevel, Miniflare } from "miniflare";
import { readWranglerConfig, ROOT, SCRIPT_PATH, startWorker, STANDARD_VARS } from "./lib/harness.mjs";
import { makeRpc } from "./lib/rpc.mjs";

const TYPE = "application/vnd.world-celld.stream-batch.v1";
const AUTH = { authorization: `Bearer ${STANDARD_VARS.WORLD_SECRET}` };

const DRIVER = `
export default {
  async fetch(request, env) {
    const u = new URL(request.url);
    if (u.pathname === "/waiters") {
      const stub = env.STREAMS.get(env.STREAMS.idFromName(u.searchParams.get("name")));
      return new Response(String(await stub.streamWaiters()));
    }
    // Send GET <target> to the worker, then abandon it after <after> ms.
    const ac = new AbortController();
    const pending = env.MAIN.fetch(u.searchParams.get("target"), { headers: { authorization: "Bearer ${STANDARD_VARS.WORLD_SECRET}" }, signal: ac.signal })
      .then((r) => "answered " + r.status, () => "abandoned");
    await scheduler.wait(Number(u.searchParams.get("after")));
    ac.abort();
    return new Response(await pending);
  },
};`;

let mf;
let base;
let rpc;
let driver;

before(async () => {
  const cfg = readWranglerConfig();
  const durableObjects = {};
  for (const [name, className] of Object.entries(cfg.durableObjects)) durableObjects[name] = { className, useSQLite: true };
  mf = new Miniflare({
    host: "127.0.0.1",
    port: 0,
    log: new Log(LogLevel.WARN),
    cf: { colo: "LOCAL", country: "XX" },
    workers: [
      {
        name: "main",
        scriptPath: SCRIPT_PATH,
        modules: true,
        modulesRoot: dirname(SCRIPT_PATH),
        modulesRules: [{ type: "CompiledWasm", include: ["**/*.wasm"], fallthrough: true }],
        compatibilityDate: cfg.compatibilityDate,
        compatibilityFlags: cfg.compatibilityFlags,
        durableObjects,
        bindings: { ...STANDARD_VARS },
      },
      {
        name: "driver",
        modules: true,
        script: DRIVER,
        compatibilityDate: cfg.compatibilityDate,
        compatibilityFlags: cfg.compatibilityFlags,
        serviceBindings: { MAIN: "main" },
        durableObjects: { STREAMS: { className: "StreamDO", scriptName: "main", useSQLite: true } },
      },
    ],
  });
  const url = await mf.ready;
  base = url.href.replace(/\/$/, "");
  rpc = makeRpc({ url: url.href, secret: STANDARD_VARS.WORLD_SECRET });
  driver = await mf.getWorker("driver");
});

after(async () => {
  await mf?.dispose();
});

const hex = (b) => Buffer.from(b).toString("hex");
const path = (name) => `/v1/streams/${encodeURIComponent("stream:" + name)}/chunks`;

function frame(chunks) {
  const parts = [Buffer.from("WCSW"), Buffer.from([0, 1, 0, chunks.length])];
  for (const c of chunks) {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(c.length);
    parts.push(len, Buffer.from(c));
  }
  return Buffer.concat(parts);
}

async function write(name, runId, chunks, headers = {}) {
  const r = await fetch(`${base}${path(name)}?runId=${encodeURIComponent(runId)}`, {
    method: "POST",
    headers: { ...AUTH, "content-type": TYPE, ...headers },
    body: Array.isArray(chunks) ? frame(chunks) : chunks,
  });
  return { status: r.status, type: r.headers.get("content-type"), bytes: Buffer.from(await r.arrayBuffer()) };
}

function readUrl(name, runId, { start = 0, maxChunks = 32, maxBytes = 8388608, waitMs = 0 } = {}) {
  return `${base}${path(name)}?runId=${encodeURIComponent(runId)}&startIndex=${start}&maxChunks=${maxChunks}&maxBytes=${maxBytes}&waitMs=${waitMs}`;
}

async function read(name, runId, opts) {
  const started = Date.now();
  const r = await fetch(readUrl(name, runId, opts), { headers: AUTH });
  const bytes = Buffer.from(await r.arrayBuffer());
  return { status: r.status, type: r.headers.get("content-type"), bytes, ms: Date.now() - started, decoded: r.status === 200 ? decode(bytes) : JSON.parse(bytes) };
}

/** A WCSR frame, decoded. */
function decode(b) {
  const states = ["open", "closed", "errored", "expired"];
  assert.equal(b.subarray(0, 4).toString(), "WCSR");
  const count = b.readUInt32BE(16);
  const en = b.readUInt32BE(20);
  const em = b.readUInt32BE(24);
  let at = 28;
  const chunks = [];
  for (let i = 0; i < count; i++) {
    const len = b.readUInt32BE(at);
    chunks.push(b.subarray(at + 4, at + 4 + len).toString("latin1"));
    at += 4 + len;
  }
  const out = { state: states[b[5]], timedOut: b[6] === 1, startIndex: b.readInt32BE(8), tailIndex: b.readInt32BE(12), chunks };
  if (en + em > 0) out.error = { name: b.subarray(at, at + en).toString(), message: b.subarray(at + en, at + en + em).toString() };
  assert.equal(at + en + em, b.length);
  return out;
}

const waiters = async (name) => Number(await (await driver.fetch(`http://driver/waiters?name=${encodeURIComponent("stream:" + name)}`)).text());
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

test("writes are acknowledged byte-exactly and reads return the frame", async () => {
  const w = await write("bin", "wrun_b", ["\x01\x02\x03", "\x04"]);
  assert.equal(w.status, 200);
  assert.equal(w.type, TYPE);
  assert.equal(hex(w.bytes), "57435341000100020000000000000001");
  assert.equal(hex((await write("bin", "wrun_b", ["", "xyz"])).bytes), "57435341000100020000000200000003");
  const r = await read("bin", "wrun_b", { start: 1 });
  assert.equal(r.type, TYPE);
  assert.deepEqual(r.decoded, { state: "open", timedOut: false, startIndex: 1, tailIndex: 3, chunks: ["\x04", "", "xyz"] });
  const info = await read("never-written", "wrun_x", { maxChunks: 0 });
  assert.equal(hex(info.bytes), "574353520100000000000000ffffffff000000000000000000000000");
});

test("route refusals", async () => {
  const bad = await write("bin", "wrun_b", Buffer.from("WCSX0000"));
  assert.equal(bad.status, 400);
  assert.deepEqual(JSON.parse(bad.bytes), { error: { name: "StreamProtocolError", message: "world-celld: invalid stream protocol: bad write magic" } });
  assert.equal((await write("bin", "wrun_b", ["x"], { "content-type": "application/json" })).status, 415);
  const other = await write("bin", "wrun_other", ["x"]);
  assert.deepEqual(JSON.parse(other.bytes), { error: { name: "Error", message: 'Stream is owned by workflow run "wrun_b"' } });
  const noRun = await fetch(`${base}${path("bin")}?startIndex=0`, { headers: AUTH });
  assert.equal(noRun.status, 400);
  assert.deepEqual(await noRun.json(), { error: { name: "BadRequest", message: "runId is required" } });
  const put = await fetch(`${base}${path("bin")}?runId=r`, { method: "PUT", headers: AUTH });
  assert.equal(put.status, 405);
  const param = await read("bin", "wrun_b", { maxBytes: 1048575 });
  assert.equal(param.status, 400);
  assert.equal(param.decoded.error.name, "StreamProtocolError");
  // A streamed (chunked) body over the limit is refused from the streamed count. (On its own
  // connection: the worker answers before reading the rest and drops the connection.)
  const r = await new Promise((resolve, reject) => {
    const req = http.request(`${base}${path("bin")}?runId=wrun_b`, { method: "POST", agent: false, headers: { ...AUTH, "content-type": TYPE } }, (res) => {
      let text = "";
      res.on("data", (d) => (text += d));
      res.on("end", () => resolve({ status: res.statusCode, text }));
    });
    // The worker may drop the connection while the body is still being sent: the answer
    // usually arrives first.
    req.on("error", (e) => setTimeout(() => reject(e), 200));
    const mib = Buffer.alloc(1 << 20);
    (async () => {
      for (let i = 0; i < 9 && !req.destroyed; i++) if (!req.write(mib)) await new Promise((ok) => req.once("drain", ok));
      req.end();
    })().catch(() => {});
  });
  assert.equal(r.status, 413);
  assert.deepEqual(JSON.parse(r.text), { error: { name: "PayloadTooLarge", message: "body exceeds 8389632 bytes" } });
});

test("a long poll is woken by a write, a close, a failure and an expiry of its instance", async () => {
  await write("lp", "wrun_lp", ["a"]);
  let pending = read("lp", "wrun_lp", { start: 1, waitMs: 5000 });
  await sleep(300);
  assert.equal(await waiters("lp"), 1);
  await write("lp", "wrun_lp", ["late"]);
  let r = await pending;
  assert.deepEqual(r.decoded, { state: "open", timedOut: false, startIndex: 1, tailIndex: 1, chunks: ["late"] });
  assert.ok(r.ms < 2000, `woken after ${r.ms} ms`);
  assert.equal(await waiters("lp"), 0);

  // The 0.3 RPC write wakes readers too.
  pending = read("lp", "wrun_lp", { start: 2, waitMs: 5000 });
  await sleep(300);
  assert.equal(await rpc("streams", "stream:lp", "writeChunk", ["wrun_lp", new TextEncoder().encode("rpc")]), 2);
  assert.deepEqual((await pending).decoded.chunks, ["rpc"]);

  pending = read("lp", "wrun_lp", { start: 3, waitMs: 5000 });
  await sleep(300);
  await rpc("streams", "stream:lp", "closeStream", ["wrun_lp"]);
  assert.deepEqual((await pending).decoded, { state: "closed", timedOut: false, startIndex: 3, tailIndex: 2, chunks: [] });

  await write("lp-fail", "wrun_lp", ["z"]);
  pending = read("lp-fail", "wrun_lp", { start: 1, waitMs: 5000 });
  await sleep(300);
  await rpc("streams", "stream:lp-fail", "failStream", ["wrun_lp", { name: "Boom", message: "while waiting" }]);
  r = await pending;
  assert.deepEqual(r.decoded.error, { name: "Boom", message: "while waiting" });
  assert.equal(r.decoded.state, "errored");

  await write("lp-exp", "wrun_lp", ["z"]);
  pending = read("lp-exp", "wrun_lp", { start: 1, waitMs: 5000 });
  await sleep(300);
  const expired = await rpc("streams", "stream:lp-exp", "expireStream", ["wrun_lp", 946684800000, { limit: 64 }]);
  assert.deepEqual(expired, { deleted: true, chunks: 1, bytes: 1, done: true });
  assert.deepEqual((await pending).decoded, { state: "expired", timedOut: false, startIndex: 1, tailIndex: -1, chunks: [] });
});

test("an idle long poll times out with the flag set, and blocks no other call", async () => {
  await write("idle", "wrun_i", ["i"]);
  const pending = read("idle", "wrun_i", { start: 1, waitMs: 1500 });
  await sleep(200);
  // Other calls to the same instance go through while the read waits.
  const started = Date.now();
  assert.deepEqual((await read("idle", "wrun_i", { maxChunks: 0 })).decoded.tailIndex, 0);
  assert.deepEqual(await rpc("streams", "stream:idle", "getInfo", []), { tailIndex: 0, done: false });
  assert.ok(Date.now() - started < 1000);
  const r = await pending;
  assert.deepEqual(r.decoded, { state: "open", timedOut: true, startIndex: 1, tailIndex: 0, chunks: [] });
  assert.ok(r.ms >= 1400, `answered after ${r.ms} ms`);
  assert.equal(await waiters("idle"), 0);
  // maxChunks = 0 answers at once.
  const info = await read("idle", "wrun_i", { maxChunks: 0, waitMs: 1500 });
  assert.equal(info.decoded.timedOut, false);
  assert.ok(info.ms < 1000);
});

test("a caller that goes away leaves no waiter behind", async () => {
  await write("gone", "wrun_g", ["g"]);
  const target = readUrl("gone", "wrun_g", { start: 1, waitMs: 20000 }).replace(base, "http://main");
  const abandoned = driver.fetch(`http://driver/abandon?after=600&target=${encodeURIComponent(target)}`).then((r) => r.text());
  await sleep(300);
  assert.equal(await waiters("gone"), 1);
  assert.equal(await abandoned, "abandoned");
  await sleep(200);
  assert.equal(await waiters("gone"), 0);
  // Several at once.
  const many = [1, 2, 3].map(() => driver.fetch(`http://driver/abandon?after=500&target=${encodeURIComponent(target)}`).then((r) => r.text()));
  await sleep(300);
  assert.equal(await waiters("gone"), 3);
  assert.deepEqual(await Promise.all(many), ["abandoned", "abandoned", "abandoned"]);
  await sleep(200);
  assert.equal(await waiters("gone"), 0);
});

test("0.3 RPC methods and the binary route share one layout", async () => {
  const enc = (s) => new TextEncoder().encode(s);
  assert.equal(await rpc("streams", "stream:mixed", "writeChunk", ["wrun_m", enc("old")]), 0);
  await write("mixed", "wrun_m", ["new1", "new2"]);
  assert.deepEqual((await read("mixed", "wrun_m")).decoded.chunks, ["old", "new1", "new2"]);
  const page = await rpc("streams", "stream:mixed", "getChunks", [{ startIndex: 0, limit: 5 }]);
  assert.deepEqual(page.chunks.map((c) => new TextDecoder().decode(c)), ["old", "new1", "new2"]);
  await rpc("streams", "stream:mixed", "failStream", ["wrun_m", "broken"]);
  const e = await rpc.raw("streams", "stream:mixed", "getInfo", []);
  assert.equal(e.status, 500);
  assert.deepEqual(e.value.error, { name: "Error", message: "broken" });
  // closeStream after failStream keeps the first terminal state.
  await rpc("streams", "stream:mixed", "closeStream", ["wrun_m"]);
  assert.equal((await read("mixed", "wrun_m", { maxChunks: 0 })).decoded.state, "errored");
});

test("four waiting readers wake on one write; concurrent batches get contiguous ranges", async () => {
  await write("fan", "wrun_f", ["0"]);
  const readers = [1, 2, 3, 4].map(() => read("fan", "wrun_f", { start: 1, waitMs: 5000 }));
  await sleep(300);
  assert.equal(await waiters("fan"), 4);
  await write("fan", "wrun_f", ["1"]);
  for (const r of await Promise.all(readers)) {
    assert.deepEqual(r.decoded, { state: "open", timedOut: false, startIndex: 1, tailIndex: 1, chunks: ["1"] });
  }
  assert.equal(await waiters("fan"), 0);

  const batches = await Promise.all(Array.from({ length: 8 }, (_, i) => write("conc", "wrun_c", Array.from({ length: 1 + (i % 3) }, (_, j) => `${i}.${j}`))));
  const ranges = batches.map((b) => [b.bytes.readInt32BE(8), b.bytes.readInt32BE(12)]).sort((a, b) => a[0] - b[0]);
  let next = 0;
  for (const [start, tail] of ranges) {
    assert.equal(start, next);
    next = tail + 1;
  }
  const all = (await read("conc", "wrun_c")).decoded.chunks;
  assert.equal(all.length, next);
  // Each batch's chunks are contiguous and in order.
  for (const [start, tail] of ranges) {
    const batch = all.slice(start, tail + 1).map((c) => c.split("."));
    assert.ok(batch.every(([i, j], k) => i === batch[0][0] && Number(j) === k), JSON.stringify(batch));
  }
});

test("streams a 0.3 release wrote (tests/fixtures/upgrade-0.3) read, append, close and expire through the 0.4 route", async () => {
  const fixtureDir = join(ROOT, "tests", "fixtures", "upgrade-0.3");
  const fixture = JSON.parse(readFileSync(join(fixtureDir, "fixture.json"), "utf8"));
  const dir = mkdtempSync(join(tmpdir(), "celld-stream-upgrade-"));
  cpSync(join(fixtureDir, "state"), dir, { recursive: true });
  const w = await startWorker({ persistDir: dir });
  try {
    const url = (s, query) => `${w.url.replace(/\/$/, "")}${path(s.name)}?runId=${s.runId}${query}`;
    const get = async (s, query = "&startIndex=0&maxChunks=32&maxBytes=8388608&waitMs=0") => {
      const r = await fetch(url(s, query), { headers: AUTH });
      assert.equal(r.status, 200);
      return decode(Buffer.from(await r.arrayBuffer()));
    };
    const b64 = (c) => Buffer.from(c, "latin1").toString("base64");
    for (const s of fixture.streams) {
      const got = await get(s);
      assert.deepEqual(got.chunks.map(b64), s.chunks, s.name);
      assert.equal(got.state, s.closed ? "closed" : "open", s.name);
      assert.equal(got.tailIndex, s.chunks.length - 1, s.name);
      // Reads are owner-checked on 0.3 data too.
      const other = await fetch(url({ ...s, runId: "wrun_other" }, "&startIndex=0&maxChunks=1&maxBytes=1048576&waitMs=0"), { headers: AUTH });
      assert.equal(other.status, 500);
    }
    const open = fixture.streams.find((s) => !s.closed);
    const closed = fixture.streams.find((s) => s.closed);
    // The open one continues at its persisted count; 0.3 and 0.4 readers see the same chunks.
    const ack = await fetch(url(open, ""), { method: "POST", headers: { ...AUTH, "content-type": TYPE }, body: frame(["next"]) });
    const a = Buffer.from(await ack.arrayBuffer());
    assert.deepEqual([a.readInt32BE(8), a.readInt32BE(12)], [open.chunks.length, open.chunks.length]);
    const page = await w.rpc("streams", `stream:${open.name}`, "getChunks", [{ startIndex: 0, limit: 10 }]);
    assert.deepEqual(page.chunks.map((c) => Buffer.from(c).toString("base64")), [...open.chunks, Buffer.from("next").toString("base64")]);
    // The closed one stays closed (first terminal state wins) and refuses writes.
    await w.rpc("streams", `stream:${closed.name}`, "failStream", [closed.runId, "late"]);
    assert.equal((await get(closed)).state, "closed");
    const refused = await fetch(url(closed, ""), { method: "POST", headers: { ...AUTH, "content-type": TYPE }, body: frame(["x"]) });
    assert.deepEqual(await refused.json(), { error: { name: "Error", message: "Cannot write to a closed stream" } });
    // Paged expiry over chunks without sizes: one payload per page for those.
    const pages = [];
    for (let i = 0; i < 10; i++) {
      const p = await w.rpc("streams", `stream:${closed.name}`, "expireStream", [closed.runId, 946684800000, { limit: 64 }]);
      pages.push(p);
      if (p.done) break;
    }
    assert.equal(pages.reduce((n, p) => n + p.chunks, 0), closed.chunks.length);
    assert.equal(pages.filter((p) => p.deleted).length, 1);
    const expired = await get(closed);
    assert.deepEqual([expired.state, expired.tailIndex, expired.chunks.length], ["expired", -1, 0]);
  } finally {
    await w.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
});

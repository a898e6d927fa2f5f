// StreamDO end to end on Miniflare over the real HTTP RPC (spec stream-do.md): the chunk
// role, the per-run registry, ownership, expiry fences, argument quirks, concurrency and
// chunk sizes near the storage value limit.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startWorker } from "./lib/harness.mjs";

let w;
before(async () => {
  w = await startWorker();
});
after(async () => {
  await w?.dispose();
});

const enc = (s) => new TextEncoder().encode(s);
const stream = (name, method, args = []) => w.rpc("streams", `stream:${name}`, method, args);
const registry = (runId, method, args = []) => w.rpc("streams", `run-streams:${runId}`, method, args);

/** The HTTP 500 error body of a call that must throw. */
async function thrown(name, method, args) {
  const r = await w.rpc.raw("streams", name, method, args);
  assert.equal(r.status, 500, `${method} should fail: ${r.text}`);
  assert.equal(r.contentType, "application/json");
  return r.value.error;
}

test("write, close, info, paged read and list over the wire", async () => {
  assert.deepEqual(await stream("wire-stream", "getInfo"), { tailIndex: -1, done: false });
  assert.equal(await registry("wrun_s1", "registerStream", ["wrun_s1", "wire-stream"]), null);
  assert.equal(await stream("wire-stream", "writeChunk", ["wrun_s1", enc("hello ")]), 0);
  assert.equal(await stream("wire-stream", "writeChunk", ["wrun_s1", new Uint8Array([0xf0, 0x9f])]), 1);
  assert.equal(await stream("wire-stream", "closeStream", ["wrun_s1"]), null);
  assert.deepEqual(await stream("wire-stream", "getInfo"), { tailIndex: 1, done: true });
  const page = await stream("wire-stream", "getChunks", [{ startIndex: 0, limit: 3 }]);
  assert.equal(page.done, true);
  assert.equal(page.tailIndex, 1);
  assert.deepEqual(page.chunks.map((c) => [...c]), [[...enc("hello ")], [0xf0, 0x9f]]);
  assert.ok(page.chunks.every((c) => c instanceof Uint8Array));
  assert.deepEqual(await registry("wrun_s1", "listStreams"), ["wire-stream"]);
  const e = await thrown("stream:wire-stream", "writeChunk", ["wrun_s1", enc("late")]);
  assert.deepEqual(e, { name: "Error", message: "Cannot write to a closed stream" });
  // The raw body is byte-exact tagged JSON.
  const raw = await w.rpc.raw("streams", "stream:wire-stream", "getChunks", [{ startIndex: 1, limit: 1 }]);
  assert.equal(raw.text, '{"chunks":[{"__type":"Uint8Array","data":"8J8="}],"done":true,"tailIndex":1}');
});

test("paged reads like the client (limit + 1) and negative starts via getInfo", async () => {
  for (const [i, word] of ["zero", "one", "two", "three", "four"].entries()) {
    assert.equal(await stream("paged", "writeChunk", ["wrun_p", enc(word)]), i);
  }
  const texts = (p) => p.chunks.map((c) => new TextDecoder().decode(c));
  assert.deepEqual(texts(await stream("paged", "getChunks", [{ startIndex: 0, limit: 3 }])), ["zero", "one", "two"]);
  assert.deepEqual(texts(await stream("paged", "getChunks", [{ startIndex: 4, limit: 3 }])), ["four"]);
  const { tailIndex } = await stream("paged", "getInfo");
  assert.deepEqual(texts(await stream("paged", "getChunks", [{ startIndex: tailIndex + 1 - 2 }])), ["three", "four"]);
  assert.deepEqual(texts(await stream("paged", "getChunks", [{ startIndex: -5 }])).length, 5);
  assert.deepEqual(await stream("paged", "getChunks", [{ startIndex: 10, limit: 5 }]), { chunks: [], done: false, tailIndex: 4 });
});

test("argument quirks of getChunks", async () => {
  await stream("quirks", "writeChunk", ["wrun_q", enc("a")]);
  const limitError = { name: "TypeError", message: "List limit must be positive." };
  assert.deepEqual(await thrown("stream:quirks", "getChunks", [{ startIndex: 1, limit: null }]), limitError);
  assert.deepEqual(await thrown("stream:quirks", "getChunks", [{ startIndex: 0, limit: 0 }]), limitError);
  assert.deepEqual(await thrown("stream:quirks", "getChunks", []), {
    name: "TypeError",
    message: "Cannot read properties of undefined (reading 'startIndex')",
  });
  const nullStart = await stream("quirks", "getChunks", [{ startIndex: null, limit: 2 }]);
  assert.equal(nullStart.chunks.length, 1);
  // Legacy JSON chunks are stored as given.
  await stream("quirks-json", "writeChunk", ["wrun_q", [1, 2, 3]]);
  assert.deepEqual(await stream("quirks-json", "getChunks", [{ startIndex: 0, limit: 5 }]), {
    chunks: [[1, 2, 3]],
    done: false,
    tailIndex: 0,
  });
});

test("ownership: first writer owns a global stream name; registries are per run", async () => {
  await registry("wrun_a", "registerStream", ["wrun_a", "shared-name"]);
  await stream("shared-name", "writeChunk", ["wrun_a", enc("a")]);
  await registry("wrun_b", "registerStream", ["wrun_b", "shared-name"]);
  const owned = { name: "Error", message: 'Stream is owned by workflow run "wrun_a"' };
  assert.deepEqual(await thrown("stream:shared-name", "writeChunk", ["wrun_b", enc("b")]), owned);
  assert.deepEqual(await thrown("stream:shared-name", "closeStream", ["wrun_b"]), owned);
  assert.deepEqual(await registry("wrun_b", "listStreams"), ["shared-name"]);
  assert.deepEqual(await thrown("run-streams:wrun_a", "registerStream", ["wrun_b", "x"]), {
    name: "Error",
    message: 'Stream registry is owned by workflow run "wrun_a"',
  });
  // Any run reads any stream.
  assert.equal((await stream("shared-name", "getChunks", [{ startIndex: 0 }])).chunks.length, 1);
});

test("retention: expireRegistry, expireStream, finalizeRegistry fence reads and writes", async () => {
  const run = "wrun_ret";
  for (const name of ["ret-1", "ret-2"]) {
    await registry(run, "registerStream", [run, name]);
    await stream(name, "writeChunk", [run, enc(name)]);
    await stream(name, "writeChunk", [run, enc(name)]);
  }
  assert.deepEqual(await registry(run, "expireRegistry", [run, 946684800000]), { streams: ["ret-1", "ret-2"] });
  for (const name of ["ret-1", "ret-2"]) {
    assert.deepEqual(await stream(name, "expireStream", [run, 946684800000]), { deleted: true, chunks: 2 });
    assert.deepEqual(await stream(name, "expireStream", [run, 946684800000]), { deleted: true, chunks: 0 });
    assert.deepEqual(await thrown(`stream:${name}`, "getInfo", []), { name: "Error", message: "Stream has expired" });
    const w2 = await thrown(`stream:${name}`, "writeChunk", [run, enc("x")]);
    assert.match(w2.message, /expired/);
  }
  assert.equal(await registry(run, "finalizeRegistry", [run]), null);
  assert.deepEqual(await thrown(`run-streams:${run}`, "listStreams", []), {
    name: "Error",
    message: "Workflow run streams have expired",
  });
  assert.deepEqual(await thrown(`run-streams:${run}`, "finalizeRegistry", ["wrun_other"]), {
    name: "Error",
    message: 'Stream registry for workflow run "wrun_other" is not expired',
  });
});

test("concurrent writers get dense, distinct indexes", async () => {
  const n = 40;
  const indexes = await Promise.all(
    Array.from({ length: n }, (_, i) => stream("concurrent", "writeChunk", ["wrun_c", new Uint8Array([i])])),
  );
  assert.deepEqual([...indexes].sort((a, b) => a - b), Array.from({ length: n }, (_, i) => i));
  const all = await stream("concurrent", "getChunks", [{ startIndex: 0 }]);
  assert.equal(all.tailIndex, n - 1);
  // Chunk i holds the byte its writer sent.
  const byIndex = new Map(indexes.map((idx, i) => [idx, i]));
  all.chunks.forEach((c, idx) => assert.deepEqual([...c], [byIndex.get(idx)]));
});

test("large chunks: 1.9 MiB round-trips exactly; a chunk past the storage value limit fails cleanly", async () => {
  // Byte chunks are stored raw (a Uint8Array): on Miniflare the largest chunk that fits is
  // 2 199 961 bytes (about 2.1 MiB); as base64 text it used to be 1 649 976.
  const big = new Uint8Array(Math.round(1.9 * 1024 * 1024)).map((_, i) => (i * 31 + 7) & 0xff);
  assert.equal(await stream("big", "writeChunk", ["wrun_big", big]), 0);
  const { chunks } = await stream("big", "getChunks", [{ startIndex: 0, limit: 1 }]);
  assert.equal(chunks[0].length, big.length);
  assert.ok(Buffer.from(chunks[0]).equals(Buffer.from(big)));
  // 2.2 MiB is over the ~2.2 MB per-value limit. The call fails with a 500 naming the
  // platform's refusal and leaves the stream as it was.
  const huge = new Uint8Array(Math.round(2.2 * 1024 * 1024)).fill(0xab);
  const r = await w.rpc.raw("streams", "stream:big", "writeChunk", ["wrun_big", huge]);
  assert.equal(r.status, 500, r.text.slice(0, 200));
  assert.match(r.value.error.message, /too big/, r.text.slice(0, 200));
  assert.deepEqual(await stream("big", "getInfo"), { tailIndex: 0, done: false });
  const after = await stream("big", "getChunks", [{ startIndex: 0 }]);
  assert.equal(after.chunks.length, 1);
  assert.ok(Buffer.from(after.chunks[0]).equals(Buffer.from(big)));
});

test("0.3 reader long poll: an empty getChunks of a live stream (limit 32) waits for the next write or close; listings do not wait", async () => {
  const name = "lp-stream";
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  assert.equal(await stream(name, "writeChunk", ["wrun_lp", enc("a")]), 0);
  // The reader's request past the end: held until the write 150 ms later, then answered with it.
  const t0 = Date.now();
  const held = stream(name, "getChunks", [{ startIndex: 1, limit: 32 }]);
  await sleep(150);
  const wrote = Date.now();
  assert.equal(await stream(name, "writeChunk", ["wrun_lp", enc("b")]), 1);
  const page = await held;
  const got = Date.now();
  assert.deepEqual(page.chunks.map((c) => new TextDecoder().decode(c)), ["b"]);
  assert.equal(page.done, false);
  assert.ok(wrote - t0 >= 140, "it waited for the write");
  assert.ok(got - wrote < 100, `answered ${got - wrote} ms after the write`);
  // A page with chunks, and the client's page listing (limit + 1 = 33), answer at once.
  let t = Date.now();
  assert.equal((await stream(name, "getChunks", [{ startIndex: 0, limit: 32 }])).chunks.length, 2);
  assert.deepEqual((await stream(name, "getChunks", [{ startIndex: 2, limit: 33 }])).chunks, []);
  assert.ok(Date.now() - t < 1000, "no wait for a listing");
  // A close wakes a held reader with `done`.
  const closing = stream(name, "getChunks", [{ startIndex: 2, limit: 32 }]);
  await sleep(100);
  assert.equal(await stream(name, "closeStream", ["wrun_lp"]), null);
  t = Date.now();
  assert.deepEqual(await closing, { chunks: [], done: true, tailIndex: 1 });
  assert.ok(Date.now() - t < 100);
  // A finished stream's empty read answers at once.
  t = Date.now();
  assert.equal((await stream(name, "getChunks", [{ startIndex: 2, limit: 32 }])).done, true);
  assert.ok(Date.now() - t < 1000);
});

// The Miniflare harness and the JS RPC client against the built worker.

import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RpcError, rpcRaw } from "./lib/rpc.mjs";
import { STANDARD_VARS, startWorker } from "./lib/harness.mjs";

test("harness: health on a real local port, rpc auth errors", async () => {
  const w = await startWorker();
  try {
    assert.ok(w.port > 0);
    const res = await fetch(new URL("/v1/health", w.url));
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { ok: true, name: "world-celld", version: "0.1.0", specVersion: 6 });
    const bad = await rpcRaw({ url: w.url, secret: "wrong" }, "runs", "wrun_x", "getRun", []);
    assert.equal(bad.status, 401);
    assert.equal(bad.value.error.name, "Unauthorized");
    await assert.rejects(w.rpc("nope", "x", "getRun", []), (err) => err instanceof RpcError && err.status === 404);
  } finally {
    await w.dispose();
  }
});

test("router: a path's answer follows its token every time (the entry memoizes forward decisions)", async () => {
  const w = await startWorker();
  try {
    const get = async (path, init) => {
      const res = await fetch(new URL(path, w.url), init);
      return [res.status, await res.text()];
    };
    const health = await get("/v1/health");
    assert.deepEqual(health, [200, '{"ok":true,"name":"world-celld","version":"0.1.0","specVersion":6}']);
    const post = (secret, body = "[]") => ({ method: "POST", headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" }, body });
    const path = "/v1/rpc/runs/wrun_memo/getRun";
    const unauthorized = await get(path, post("wrong"));
    assert.equal(unauthorized[0], 401);
    // The same path with the right token, then the wrong one again, then none.
    assert.deepEqual(await get(path, post(w.secret, '["wrun_memo"]')), [200, '{"ok":true,"value":null}']);
    assert.deepEqual(await get(path, post("wrong")), unauthorized);
    const none = await get(path, { method: "POST", body: "[]" });
    assert.equal(none[0], 401);
    // Any method on the health path is health (spec wire.md §1), and one more segment is not.
    assert.deepEqual(await get("/v1/health", { method: "POST", body: "[]" }), health);
    assert.equal((await get("/v1/health/extra"))[0], 404);
    // Many distinct unauthenticated paths: every one is answered alike, and the forwards
    // and health after them are unchanged.
    const notFound = [];
    for (let i = 0; i < 80; i++) notFound.push(await get(`/v1/nope/${i}`));
    assert.equal(new Set(notFound.map(([status]) => status)).size, 1);
    assert.ok(notFound[0][0] >= 400, `a path that is no route: ${notFound[0]}`);
    assert.deepEqual(await get(`/v1/nope/0`), notFound[0]);
    assert.deepEqual(await get("/v1/health"), health);
    assert.deepEqual(await get(path, post(w.secret, '["wrun_memo"]')), [200, '{"ok":true,"value":null}']);
    assert.deepEqual(await get(path, post("wrong")), unauthorized);
  } finally {
    await w.dispose();
  }
});

test("harness: configurable vars and an omitted WORKFLOW_QUEUE binding", async () => {
  const w = await startWorker({ vars: { ...STANDARD_VARS, WORLD_SECRET: "" }, omitBindings: ["WORKFLOW_QUEUE"] });
  try {
    const r = await rpcRaw({ url: w.url, secret: "golden-secret" }, "queue", "q:0", "stats", []);
    assert.equal(r.status, 503);
  } finally {
    await w.dispose();
  }
  const w2 = await startWorker({ omitBindings: ["WORKFLOW_QUEUE"] });
  try {
    const r = await w2.rpc.raw("queue", "q:0", "stats", []);
    assert.equal(r.status, 500);
    assert.deepEqual(r.value, { error: { name: "WorldMisconfigured", message: "missing binding: WORKFLOW_QUEUE" } });
  } finally {
    await w2.dispose();
  }
});

test("harness: durableObjectsPersist keeps state across a restart", async () => {
  const dir = mkdtempSync(join(tmpdir(), "world-celld-persist-"));
  try {
    const w = await startWorker({ persistDir: dir });
    try {
      assert.equal(await w.rpc("index", "index", "put", ["k", "v"]), null);
    } finally {
      await w.dispose();
    }
    const w2 = await startWorker({ persistDir: dir });
    try {
      assert.equal(await w2.rpc("index", "index", "get", ["k"]), "v");
    } finally {
      await w2.dispose();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

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

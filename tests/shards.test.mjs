// The sharded index on Miniflare (issue #9): RunCatalogDO, HookTokenDO and HookIdDO called
// directly over their internal hop (the DO's fetch form, as hop.mjs uses it for large
// bodies), the 0.3 `index` binding served by the facade over them (the table case by case,
// over HTTP), alarms, and 50 concurrent admissions of one token.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { STANDARD_VARS, startWorker } from "./lib/harness.mjs";

let w;
before(async () => {
  // With the 0.3.0 reference's correlation index, so the facade's table is exercised for
  // every key family; the default (no correlation index) has its own test below.
  w = await startWorker({ vars: { ...STANDARD_VARS, WORKFLOW_CORRELATION_INDEX: "on" } });
});
after(async () => {
  await w?.dispose();
});

/** Call `method(...args)` on instance `name` of env binding `binding`: `{status, value}`. */
async function shard(binding, name, method, args = []) {
  const ns = await w.mf.getDurableObjectNamespace(binding);
  const stub = ns.get(ns.idFromName(name));
  const res = await stub.fetch("https://celld.internal/rpc", {
    method: "POST",
    headers: { "x-celld-method": method, "x-celld-name": encodeURIComponent(name) },
    body: JSON.stringify(args),
  });
  const text = await res.text();
  return { status: res.status, value: JSON.parse(text) };
}
const ok = async (...a) => {
  const r = await shard(...a);
  assert.equal(r.status, 200, JSON.stringify(r.value));
  return r.value;
};

const ix = (method, args = []) => w.rpc("index", "index", method, args);
const ixRaw = (method, args = []) => w.rpc.raw("index", "index", method, args);

// FNV-1a-32 shard names (the spec's test vectors).
const CATALOG_SAME = "run-catalog:v1:0e"; // wrun_same
const TOKENS_SAME = "hook-token:v1:11"; // token_same
const IDS_SAME = "hook-id:v1:19"; // hook_same

async function createRun(runId, retentionMs = 0) {
  const req = {
    runId,
    data: {
      eventType: "run_created",
      specVersion: 6,
      eventData: { deploymentId: "dep", workflowName: "wf", input: new Uint8Array([1]) },
    },
    cleanup: { retentionMs, queueShards: 1 },
  };
  const out = await w.rpc("runs", runId, "applyEvent", [req]);
  assert.equal(out.ok, true, JSON.stringify(out));
  return out;
}

async function completeRun(runId, retentionMs = 0) {
  const req = {
    runId,
    data: { eventType: "run_cancelled", specVersion: 6 },
    cleanup: { retentionMs, queueShards: 1 },
  };
  const out = await w.rpc("runs", runId, "applyEvent", [req]);
  assert.equal(out.ok, true, JSON.stringify(out));
}

test("run DO getLifecycleStatus: on /v1/rpc since 0.4 and internally, missing → active → terminal", async () => {
  const r = await w.rpc.raw("runs", "wrun_lc", "getLifecycleStatus", []);
  assert.equal(r.status, 200, "whitelisted (spec-0.4 wire.md §7)");
  assert.equal(r.text, '"missing"');
  assert.equal(await ok("WORKFLOW_DB", "wrun_lc", "getLifecycleStatus"), "missing");
  await createRun("wrun_lc");
  assert.equal(await ok("WORKFLOW_DB", "wrun_lc", "getLifecycleStatus"), "active");
  await completeRun("wrun_lc");
  assert.equal(await ok("WORKFLOW_DB", "wrun_lc", "getLifecycleStatus"), "terminal");
});

test("RunCatalogDO: upsertRun under a lease, list with values, expireRun fence, argument and body errors", async () => {
  const keys = ["run:wf:0000000000005:wrun_cat", "runall:0000000000005:wrun_cat"];
  const name = "run-catalog:v1:cat-test";
  const now = Date.now();
  assert.deepEqual(await ok("WORKFLOW_RUN_CATALOG", name, "upsertRun", ["wrun_cat", keys, '{"s":1}', now + 60_000]), { stored: true });
  assert.deepEqual(await ok("WORKFLOW_RUN_CATALOG", name, "upsertRun", ["wrun_cat", keys, '{"s":2}', now - 1]), { stored: false }, "lapsed lease");
  const page = await ok("WORKFLOW_RUN_CATALOG", name, "list", [{ prefix: "runall:" }]);
  assert.deepEqual(page, { keys: [{ name: keys[1], value: '{"s":1}' }], list_complete: true });
  assert.deepEqual(await ok("WORKFLOW_RUN_CATALOG", name, "expireRun", ["wrun_cat", keys, now]), { deleted: 2 });
  assert.deepEqual(await ok("WORKFLOW_RUN_CATALOG", name, "upsertRun", ["wrun_cat", keys, '{"s":3}', now + 60_000]), { stored: false }, "fenced");
  const bad = await shard("WORKFLOW_RUN_CATALOG", name, "expireRun", ["wrun_cat", [keys[0]], now]);
  assert.equal(bad.status, 500);
  assert.equal(bad.value.error.message, "Run catalog expiry requires exactly two keys");
  // A body the router would refuse is refused the same way here.
  const ns = await w.mf.getDurableObjectNamespace("WORKFLOW_RUN_CATALOG");
  const res = await ns.get(ns.idFromName(name)).fetch("https://celld.internal/rpc", {
    method: "POST",
    headers: { "x-celld-method": "list", "x-celld-name": name },
    body: "{}",
  });
  assert.equal(res.status, 400);
  const unknown = await shard("WORKFLOW_RUN_CATALOG", name, "get", []);
  assert.deepEqual(unknown, { status: 500, value: { error: { name: "TypeError", message: "RunCatalogDO.get is not a function" } } });
});

test("HookTokenDO/HookIdDO: reserve, lifecycle-checked finalize/publish and get, owner-checked releaseBatch", async () => {
  const runId = "wrun_hooks_direct";
  await createRun(runId);
  const owner = { runId, hookId: "hk_direct" };
  const other = { runId: "wrun_other", hookId: "hk_other" };
  const serialized = JSON.stringify({ runId, hookId: "hk_direct", token: "tok_direct" });
  for (const [binding, name, key, publish] of [
    ["WORKFLOW_HOOK_TOKENS", "hook-token:v1:t-test", "tok_direct", "finalize"],
    ["WORKFLOW_HOOK_IDS", "hook-id:v1:t-test", "hk_direct", "publish"],
  ]) {
    const claimed = await ok(binding, name, "reserve", [key, owner, "claim-1"]);
    assert.deepEqual(claimed, { claimed: true, claimId: "claim-1" });
    const refused = await ok(binding, name, "reserve", [key, other, "claim-2"]);
    assert.deepEqual(refused, { claimed: false, holder: owner });
    assert.equal(await ok(binding, name, "get", [key]), null, "nothing published yet");
    assert.deepEqual(await ok(binding, name, publish, [key, serialized, owner, "claim-1"]), { stored: true });
    assert.equal(await ok(binding, name, "get", [key]), serialized, "active run: visible");
    const released = await ok(binding, name, "releaseBatch", [[{ [binding.includes("TOKENS") ? "token" : "hookId"]: key, owner: other }]]);
    assert.deepEqual(released, { deleted: 0 }, "not the owner");
  }
  await completeRun(runId);
  assert.equal(await ok("WORKFLOW_HOOK_TOKENS", "hook-token:v1:t-test", "get", ["tok_direct"]), null, "terminal run: hidden");
  assert.equal(await ok("WORKFLOW_HOOK_IDS", "hook-id:v1:t-test", "get", ["hk_direct"]), null);
  const released = await ok("WORKFLOW_HOOK_TOKENS", "hook-token:v1:t-test", "releaseBatch", [[{ token: "tok_direct", owner }]]);
  assert.deepEqual(released, { deleted: 1 });
  // A missing run's publication is refused (and its claim released).
  const ghost = { runId: "wrun_ghost_direct", hookId: "hk_ghost" };
  await ok("WORKFLOW_HOOK_TOKENS", "hook-token:v1:t-test", "reserve", ["tok_ghost", ghost, "c"]);
  const ghostSerialized = JSON.stringify({ ...ghost, token: "tok_ghost" });
  assert.deepEqual(await ok("WORKFLOW_HOOK_TOKENS", "hook-token:v1:t-test", "finalize", ["tok_ghost", ghostSerialized, ghost, "c"]), { stored: false });
  assert.deepEqual(await ok("WORKFLOW_HOOK_TOKENS", "hook-token:v1:t-test", "reserve", ["tok_ghost", other, "d"]), { claimed: true, claimId: "d" });
});

test("alarm readers (hook reserve, catalog expireRun/expireKeys) arm their compaction from the alarm in place, never later than it", async () => {
  // src/protocol/lifecycle.rs: a claim's deadline is reserve time + HOOK_CLAIM_LEASE_MS; a fence's
  // compaction is expiry time + CATALOG_FENCE_GRACE_MS.
  const CLAIM_LEASE = 7 * 300_000 + 2 * 900;
  const FENCE_GRACE = 300_000 + (3 * 300_000 + 900);
  const key = (k) => ["run:wf:0000000000005:" + k, "runall:0000000000005:" + k];
  const cases = [
    ["WORKFLOW_HOOK_TOKENS", CLAIM_LEASE, (i) => ["reserve", [`k${i}`, { runId: "wrun_al", hookId: `h${i}` }, `c${i}`]], { claimed: true }],
    ["WORKFLOW_HOOK_IDS", CLAIM_LEASE, (i) => ["reserve", [`k${i}`, { runId: "wrun_al", hookId: `h${i}` }, `c${i}`]], { claimed: true }],
    ["WORKFLOW_RUN_CATALOG", FENCE_GRACE, (i) => ["expireRun", [`wrun_al${i}`, key(`wrun_al${i}`), 5]], { deleted: 0 }],
    ["WORKFLOW_RUN_CATALOG", FENCE_GRACE, (i) => ["expireKeys", [`wrun_ak${i}`, key(`wrun_ak${i}`), 5]], { deleted: 0 }],
  ];
  for (const [binding, ahead, call, answer] of cases) {
    const name = `${binding}:alarm-test:${call(0)[0]}`;
    const ns = await w.mf.getDurableObjectNamespace(binding);
    const stub = ns.get(ns.idFromName(name));
    assert.equal(await stub.storedAlarm(), null);
    const before = Date.now();
    const [method, args] = call(1);
    assert.deepEqual(pick(await ok(binding, name, method, args), answer), answer);
    const first = await stub.storedAlarm();
    assert.ok(first >= before + ahead && first <= Date.now() + ahead, `${name}: ${first - before}`);
    await new Promise((r) => setTimeout(r, 20));
    const [method2, args2] = call(2);
    assert.deepEqual(pick(await ok(binding, name, method2, args2), answer), answer);
    assert.equal(await stub.storedAlarm(), first, `${name}: a later deadline keeps the earlier alarm`);
  }
});

/** The fields of `value` that `like` names. */
const pick = (value, like) => Object.fromEntries(Object.keys(like).map((k) => [k, value?.[k]]));

test("facade: run keys go to the run's catalog shard, correlation keys too; list merges; get reads the home shard", async () => {
  const runId = "wrun_same";
  const key = "run:wf:0000000000001:wrun_same";
  const all = "runall:0000000000001:wrun_same";
  const corr = "correlation:c1:0000000000001:evnt_1:wrun_same";
  for (const k of [key, all, corr]) assert.deepEqual(await ix("putOwned", [runId, k, `{"k":"${k}"}`]), { stored: true });
  const page = await ok("WORKFLOW_RUN_CATALOG", CATALOG_SAME, "list", [{}]);
  assert.deepEqual(page.keys.map((e) => e.name), [corr, key, all].sort());
  assert.equal(await ix("get", [key]), `{"k":"${key}"}`);
  assert.equal(await ix("get", [corr]), `{"k":"${corr}"}`);
  assert.deepEqual(await ix("list", [{ prefix: "runall:" }]), { keys: [{ name: all }], list_complete: true });
  assert.deepEqual((await ix("list", [{ prefix: "correlation:" }])).keys, [{ name: corr }]);
  // Nothing of it in the archive.
  assert.equal(await ok("WORKFLOW_INDEX", "index", "get", [key]), null);
  // Arbitrary keys stay in the archive.
  await ix("put", ["kv:facade", "v"]);
  assert.equal(await ok("WORKFLOW_INDEX", "index", "get", ["kv:facade"]), "v");
  assert.equal(await ix("get", ["kv:facade"]), "v");
  assert.deepEqual(await ix("putOwned", [runId, "kv:owned", "x"]), { stored: true });
  assert.equal(await ok("WORKFLOW_INDEX", "index", "get", ["kv:owned"]), "x");
});

test("facade by default: a correlation key's putOwned is answered without storing it; run keys are stored", async () => {
  const plain = await startWorker();
  try {
    const put = (k, v) => plain.rpc.raw("index", "index", "putOwned", ["wrun_same", k, v]);
    const corr = "correlation:c1:0000000000001:evnt_1:wrun_same";
    const all = "runall:0000000000001:wrun_same";
    for (const k of [corr, all]) {
      const res = await put(k, "{}");
      assert.deepEqual([res.status, res.value], [200, { stored: true }], k);
    }
    assert.equal(await plain.rpc("index", "index", "get", [corr]), null, "nothing was stored");
    assert.deepEqual((await plain.rpc("index", "index", "list", [{ prefix: "correlation:" }])).keys, []);
    assert.equal(await plain.rpc("index", "index", "get", [all]), "{}");
    // Bad input is refused as the catalog shard refuses it.
    const bad = await put(corr, 7);
    assert.deepEqual([bad.status, bad.value?.error], [500, { name: "TypeError", message: "Run catalog metadata must be a string" }]);
  } finally {
    await plain.dispose();
  }
  // A setting that is neither on nor off fails those calls with its message.
  const typo = await startWorker({ vars: { ...STANDARD_VARS, WORKFLOW_CORRELATION_INDEX: "false" } });
  try {
    const res = await typo.rpc.raw("index", "index", "putOwned", ["wrun_same", "correlation:c:1:e:wrun_same", "{}"]);
    assert.deepEqual([res.status, res.value?.error], [500, { name: "Error", message: 'WORKFLOW_CORRELATION_INDEX must be "on" or "off"' }]);
  } finally {
    await typo.dispose();
  }
});

test("facade: putOwned of a run key is refused once the run is expired", async () => {
  const runId = "wrun_exp_facade";
  await createRun(runId);
  await completeRun(runId);
  await w.rpc("runs", runId, "cleanupNow", [{ retentionMs: 1, queueShards: 1 }]);
  assert.equal(await ok("WORKFLOW_DB", runId, "getLifecycleStatus"), "expired");
  assert.deepEqual(await ix("putOwned", [runId, `runall:0000000000001:${runId}`, "{}"]), { stored: false });
  assert.equal(await ix("get", [`runall:0000000000001:${runId}`]), null);
});

test("facade: hooks live on the token and hook-id shards; a published hook refuses its own owner; reads follow the run", async () => {
  const runId = "wrun_hook_facade";
  await createRun(runId);
  const owner = { runId, hookId: "hook_same" };
  const serialized = JSON.stringify({ runId, hookId: "hook_same", token: "token_same" });
  assert.deepEqual(await ix("reserveHookToken", ["token_same", owner]), { claimed: true });
  assert.deepEqual(await ix("reserveHookToken", ["token_same", { runId: "wrun_x", hookId: "h_x" }]), { claimed: false, holder: owner });
  assert.equal(await ix("finalizeHookIndexes", ["token_same", "hook_same", serialized, owner]), null);
  assert.equal(await ok("WORKFLOW_HOOK_TOKENS", TOKENS_SAME, "get", ["token_same"]), serialized);
  assert.equal(await ok("WORKFLOW_HOOK_IDS", IDS_SAME, "get", ["hook_same"]), serialized);
  assert.equal(await ok("WORKFLOW_INDEX", "index", "get", ["hook:token_same"]), null, "not in the archive");
  assert.equal(await ix("get", ["hook:token_same"]), serialized);
  assert.equal(await ix("get", ["hookid:hook_same"]), serialized);
  assert.deepEqual(await ix("reserveHookToken", ["token_same", owner]), { claimed: false, holder: owner });
  await completeRun(runId);
  assert.equal(await ix("get", ["hook:token_same"]), null, "terminal run: hidden");
  assert.equal(await ix("deleteHookIndexes", ["token_same", "hook_same", owner]), null);
  assert.deepEqual(await ix("reserveHookToken", ["token_same", { runId: "wrun_y", hookId: "h_y" }]), { claimed: true });
  assert.equal(await ix("releaseHookToken", ["token_same", { runId: "wrun_y", hookId: "h_y" }]), null);
});

test("facade: body errors are the router's, byte for byte; unknown methods 404 before the body", async () => {
  // A non-array body and malformed JSON: the facade (instance `index`) and a plain hop to
  // another IndexDO instance answer alike.
  for (const [body, status] of [
    ["{}", 400],
    ["[1,", 400],
  ]) {
    const viaFacade = await fetch(new URL("/v1/rpc/index/index/get", w.url), {
      method: "POST",
      headers: { authorization: `Bearer ${w.secret}`, "content-type": "application/json" },
      body,
    });
    const viaOther = await fetch(new URL("/v1/rpc/index/other/get", w.url), {
      method: "POST",
      headers: { authorization: `Bearer ${w.secret}`, "content-type": "application/json" },
      body,
    });
    assert.equal(viaFacade.status, status);
    assert.equal(viaOther.status, status);
    assert.equal(await viaFacade.text(), await viaOther.text(), "the same bytes as a plain IndexDO hop");
  }
  const r = await ixRaw("nope", []);
  assert.equal(r.status, 404);
});

test("facade: 50 concurrent admissions of one token by different owners → exactly one owner", async () => {
  const token = "tok_race_50";
  const owners = Array.from({ length: 50 }, (_, i) => ({ runId: `wrun_race_${i}`, hookId: `hk_race_${i}` }));
  const answers = await Promise.all(owners.map((o) => ix("reserveHookToken", [token, o])));
  const winners = answers.map((a, i) => (a.claimed ? i : -1)).filter((i) => i >= 0);
  assert.equal(winners.length, 1, JSON.stringify(answers));
  const winner = owners[winners[0]];
  for (const a of answers) if (!a.claimed) assert.deepEqual(a.holder, winner);
  // The claim sits on the token's shard (FNV-1a), under the winner: another owner asking
  // that shard directly is refused with the winner as holder.
  const probe = await ok("WORKFLOW_HOOK_TOKENS", tokenShard(token), "reserve", [token, { runId: "wrun_probe", hookId: "hk_probe" }, "probe"]);
  assert.deepEqual(probe, { claimed: false, holder: winner });
});

function fnv1a32(text) {
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(text)) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  return hash;
}

/** `hook-token:v1:<fnv1a32(utf8(token)) mod 32>` (spec-0.4 wire.md §8). */
function tokenShard(token) {
  return `hook-token:v1:${(fnv1a32(token) % 32).toString(16).padStart(2, "0")}`;
}

/** `run-catalog:v1:<fnv1a32(utf8(runId)) mod 16>`. */
function catalogShard(runId) {
  return `run-catalog:v1:${(fnv1a32(runId) % 16).toString(16).padStart(2, "0")}`;
}

test("shard names: the spec's vectors", () => {
  assert.equal(tokenShard("token_same"), TOKENS_SAME);
  assert.equal(catalogShard("wrun_same"), CATALOG_SAME);
});

test("facade: a run key's putOwned answers as the driver did when the lifecycle call cannot be made", async () => {
  // The run's catalog shard asks the lifecycle itself (`upsertRunKey`, src/catalog/lease.rs);
  // when it cannot, it answers what the facade's driver answered.
  const bare = await startWorker({ omitBindings: ["WORKFLOW_DB"] });
  try {
    const r = await bare.rpc.raw("index", "index", "putOwned", ["wrun_nobinding", "run:wf:0000000000001:wrun_nobinding", "{}"]);
    assert.equal(r.status, 500);
    assert.deepEqual(r.value, { error: { name: "Error", message: "world-celld index missing binding WORKFLOW_DB" } });
    const stored = await bare.rpc("index", "index", "get", ["run:wf:0000000000001:wrun_nobinding"]);
    assert.equal(stored, null, "nothing upserted");
  } finally {
    await bare.dispose();
  }
});

test("hook shards: a read whose run DO cannot be asked answers the shard's missing-binding error", async () => {
  // A hook read is two synchronous steps with the run DO asked by the class in between
  // (src/shell/serve.rs, status 3); when the class cannot ask (here: no WORKFLOW_DB), the
  // asynchronous path asks and reports the error, as every read did before.
  const bare = await startWorker({ omitBindings: ["WORKFLOW_DB"] });
  const call = async (method, args) => {
    const ns = await bare.mf.getDurableObjectNamespace("WORKFLOW_HOOK_TOKENS");
    const name = tokenShard("tok_nobinding");
    const res = await ns.get(ns.idFromName(name)).fetch("https://celld.internal/rpc", {
      method: "POST",
      headers: { "x-celld-method": method, "x-celld-name": encodeURIComponent(name) },
      body: JSON.stringify(args),
    });
    return [res.status, JSON.parse(await res.text())];
  };
  try {
    const owner = { runId: "wrun_nobinding", hookId: "hook_nobinding" };
    const serialized = JSON.stringify({ ...owner, token: "tok_nobinding" });
    assert.deepEqual(await call("reserve", ["tok_nobinding", owner, "c1"]), [200, { claimed: true, claimId: "c1" }]);
    // Published with a passed status (the coordinator's fifth argument): no ask needed.
    assert.deepEqual(await call("finalize", ["tok_nobinding", serialized, owner, "c1", "active"]), [200, { stored: true }]);
    const r = await bare.rpc.raw("hook-tokens", tokenShard("tok_nobinding"), "get", ["tok_nobinding"]);
    assert.equal(r.status, 500);
    assert.deepEqual(r.value, { error: { name: "Error", message: "world-celld hook index missing WORKFLOW_DB binding" } });
  } finally {
    await bare.dispose();
  }
});

test("facade: a run key's putOwned of a live or missing run is stored, then refused from expiry on", async () => {
  const runId = "wrun_plan3";
  const key = `run:wf:0000000000002:${runId}`;
  assert.deepEqual(await ix("putOwned", [runId, key, '{"s":"missing"}']), { stored: true }, "no run yet");
  await createRun(runId);
  assert.deepEqual(await ix("putOwned", [runId, key, '{"s":"active"}']), { stored: true });
  assert.equal(await ix("get", [key]), '{"s":"active"}');
  await completeRun(runId);
  assert.deepEqual(await ix("putOwned", [runId, key, '{"s":"terminal"}']), { stored: true });
  await w.rpc("runs", runId, "cleanupNow", [{ retentionMs: 1, queueShards: 1 }]);
  assert.deepEqual(await ixRaw("putOwned", [runId, key, '{"s":"late"}']).then((r) => [r.status, r.text]), [200, '{"stored":false}']);
  // Refused: the entry stays as it was (the cleanup expired the run's own keys, which
  // carry its real creation time; this one was written by hand).
  assert.equal(await ix("get", [key]), '{"s":"terminal"}');
});

// Lifecycle leases for the 0.3 facade's run keys (src/catalog/lease.rs): the run's catalog
// shard asks the run DO once per lease instead of before every `run:`/`runall:` upsert, and
// the run DO revokes the lease before a call that expires the run answers.
test("facade: run keys under a catalog shard's lifecycle lease — one ask per lease, revoked when the run expires", async () => {
  const runId = "wrun_catlease";
  const home = catalogShard(runId);
  const held = async () => (await ok("WORKFLOW_RUN_CATALOG", home, "heldLifecycleLeases")).runs;
  const runKey = `run:wf:0000000000003:${runId}`;
  const allKey = `runall:0000000000003:${runId}`;
  const put = (key, value) => ix("putOwned", [runId, key, value]);
  assert.deepEqual(await put(runKey, '{"s":"missing"}'), { stored: true }, "a missing run: stored, no lease");
  assert.deepEqual(await held(), []);
  await createRun(runId);
  assert.deepEqual(await put(runKey, '{"s":"active"}'), { stored: true });
  assert.deepEqual(await held(), [runId], "leased by the first put of a live run");
  assert.deepEqual(await put(allKey, '{"s":"active"}'), { stored: true });
  assert.equal(await ix("get", [allKey]), '{"s":"active"}');
  // The internal methods are not routable.
  assert.equal((await w.rpc.raw("runs", runId, "leaseLifecycle", [home, "catalog"])).status, 404);
  await completeRun(runId);
  assert.deepEqual(await held(), [runId], "no retention: completing keeps the lease");
  assert.deepEqual(await put(runKey, '{"s":"terminal"}'), { stored: true });
  // cleanupNow expires the run: the lease is gone before it answers, and the next put is
  // refused at once.
  await w.rpc("runs", runId, "cleanupNow", [{ retentionMs: 1, queueShards: 1 }]);
  assert.deepEqual(await held(), []);
  assert.deepEqual(await put(runKey, '{"s":"late"}'), { stored: false });
  assert.deepEqual(await put(allKey, '{"s":"late"}'), { stored: false });

  // A terminal retention shorter than the lease revokes it in the completing applyEvent;
  // the run is then leased only up to its due time, and refused after it.
  const short = "wrun_catlease2";
  const shortHome = catalogShard(short);
  const shortHeld = async () => (await ok("WORKFLOW_RUN_CATALOG", shortHome, "heldLifecycleLeases")).runs;
  const key2 = `run:wf:0000000000004:${short}`;
  await createRun(short, 1500);
  assert.deepEqual(await ix("putOwned", [short, key2, '{"s":"active"}']), { stored: true });
  assert.ok((await shortHeld()).includes(short));
  await completeRun(short, 1500);
  assert.ok(!(await shortHeld()).includes(short), "revoked by the completing applyEvent");
  assert.deepEqual(await ix("putOwned", [short, key2, '{"s":"terminal"}']), { stored: true });
  await new Promise((r) => setTimeout(r, 1600));
  assert.deepEqual(await ix("putOwned", [short, key2, '{"s":"late"}']), { stored: false });
  assert.ok(!(await shortHeld()).includes(short));
});

// IndexDO end to end on Miniflare over the real HTTP RPC (spec index-do.md), at an instance
// other than the facade's `index`: KV semantics,
// KV-style listing and its quirks, hook-token reservation/publication/release, expiry fences,
// atomicity of failed calls and concurrent reservations.

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

// The IndexDO class itself, at an instance of its own: the 0.3 client's instance `index` is
// served by the facade over the index shards (tests/shards.test.mjs, the golden index-do
// file), with IndexDO `index` as its archive.
const CORE = "ix-core";
const ix = (method, args = [], name = CORE) => w.rpc("index", name, method, args);

async function thrown(method, args) {
  const r = await w.rpc.raw("index", CORE, method, args);
  assert.equal(r.status, 500, `${method} should fail: ${r.text}`);
  return r.value.error;
}

test("get/put/delete round-trip; values come back as stored", async () => {
  assert.equal(await ix("get", ["t:a"]), null);
  assert.equal(await ix("put", ["t:a", "v1"]), null);
  assert.equal(await ix("get", ["t:a"]), "v1");
  assert.equal(await ix("delete", ["t:a"]), null);
  assert.equal(await ix("get", ["t:a"]), null);
  assert.equal(await ix("delete", ["t:missing"]), null);
  await ix("put", ["t:u", "välue \u0000 nul"]);
  assert.equal(await ix("get", ["t:u"]), "välue \u0000 nul");
  const typed = { at: new Date(946684800000), bytes: new Uint8Array([1, 2]) };
  await ix("put", ["t:typed", typed]);
  assert.deepEqual(await ix("get", ["t:typed"]), typed);
  // Another instance name is an independent store.
  assert.equal(await ix("get", ["t:u"], "other"), null);
});

test("listing: prefix, pagination, reverse, exact-limit completion, null-cursor quirk", async () => {
  for (let i = 1; i <= 5; i++) await ix("put", [`run:wf:${i}`, "x"]);
  await ix("put", ["run:wf2:1", "x"]);
  const names = (p) => p.keys.map((k) => k.name);
  const p1 = await ix("list", [{ prefix: "run:wf:", limit: 2 }]);
  assert.deepEqual(p1, { keys: [{ name: "run:wf:1" }, { name: "run:wf:2" }], list_complete: false, cursor: "run:wf:2" });
  const p2 = await ix("list", [{ prefix: "run:wf:", limit: 2, cursor: p1.cursor }]);
  assert.deepEqual(names(p2), ["run:wf:3", "run:wf:4"]);
  const p3 = await ix("list", [{ prefix: "run:wf:", limit: 2, cursor: p2.cursor }]);
  assert.deepEqual(p3, { keys: [{ name: "run:wf:5" }], list_complete: true });
  assert.ok(!("cursor" in p3));
  const exact = await ix("list", [{ prefix: "run:wf:", limit: 5 }]);
  assert.equal(exact.list_complete, true);
  assert.ok(!("cursor" in exact));
  const rev = await ix("list", [{ prefix: "run:wf:", limit: 2, reverse: true }]);
  assert.deepEqual(rev, { keys: [{ name: "run:wf:5" }, { name: "run:wf:4" }], list_complete: false, cursor: "run:wf:4" });
  assert.deepEqual(names(await ix("list", [{ prefix: "run:wf:", limit: 2, reverse: true, cursor: "run:wf:2" }])), ["run:wf:1"]);
  assert.deepEqual(await ix("list", [{ prefix: "run:wf:", limit: 0 }]), { keys: [], list_complete: false });
  // A null cursor is the string "null": every run:wf: key sorts after it, none before it.
  assert.equal((await ix("list", [{ prefix: "run:wf:", cursor: null }])).keys.length, 5);
  assert.deepEqual(await ix("list", [{ prefix: "run:wf:", cursor: null, reverse: true }]), { keys: [], list_complete: true });
  assert.deepEqual(await thrown("list", [{ limit: -2 }]), { name: "TypeError", message: "List limit must be positive." });
  // Raw body: key names only, no values.
  const raw = await w.rpc.raw("index", CORE, "list", [{ prefix: "run:wf2:" }]);
  assert.equal(raw.text, '{"keys":[{"name":"run:wf2:1"}],"list_complete":true}');
});

test("hook token lifecycle: reserve, conflict, finalize, release, delete", async () => {
  const o1 = { runId: "wrun_h1", hookId: "h1" };
  const o2 = { runId: "wrun_h2", hookId: "h2" };
  assert.deepEqual(await ix("reserveHookToken", ["tk", o1]), { claimed: true });
  assert.deepEqual(await ix("reserveHookToken", ["tk", o1]), { claimed: true });
  assert.deepEqual(await ix("reserveHookToken", ["tk", o2]), { claimed: false, holder: o1 });
  const claim = await ix("get", ["hookclaim:tk"]);
  assert.deepEqual(claim.owner, o1);
  assert.ok(Math.abs(claim.reservedAt - Date.now()) < 60_000);
  assert.deepEqual(await thrown("finalizeHookIndexes", ["tk", "h2", JSON.stringify(o2), o2]), {
    name: "Error",
    message: "Hook token tk is reserved by another hook",
  });
  const hook = JSON.stringify({ ...o1, token: "tk", createdAt: "2026-01-01T00:00:00.000Z" });
  assert.equal(await ix("finalizeHookIndexes", ["tk", "h1", hook, o1]), null);
  assert.equal(await ix("get", ["hook:tk"]), hook);
  assert.equal(await ix("get", ["hookid:h1"]), hook);
  assert.equal(await ix("get", ["hookclaim:tk"]), null);
  assert.deepEqual(await ix("reserveHookToken", ["tk", o1]), { claimed: false, holder: o1 });
  assert.deepEqual(await thrown("finalizeHookIndexes", ["tk", "h2", JSON.stringify(o2), o2]), {
    name: "Error",
    message: "Hook token tk is owned by another hook",
  });
  await ix("deleteHookIndexes", ["tk", "h1", o2]);
  assert.equal(await ix("get", ["hook:tk"]), hook);
  await ix("deleteHookIndexes", ["tk", "h1", o1]);
  assert.equal(await ix("get", ["hook:tk"]), null);
  assert.equal(await ix("get", ["hookid:h1"]), null);
  assert.deepEqual(await ix("reserveHookToken", ["tk", o2]), { claimed: true });
  await ix("releaseHookToken", ["tk", o1]);
  assert.notEqual(await ix("get", ["hookclaim:tk"]), null);
  await ix("releaseHookToken", ["tk", o2]);
  assert.equal(await ix("get", ["hookclaim:tk"]), null);
  // A stored hook that is not JSON surfaces V8's SyntaxError text.
  await ix("finalizeHookIndexes", ["tk-nj", "h-nj", "not json", { runId: "wrun_nj", hookId: "h-nj" }]);
  assert.deepEqual(await thrown("reserveHookToken", ["tk-nj", { runId: "wrun_nj", hookId: "h-nj" }]), {
    name: "SyntaxError",
    message: 'Unexpected token \'o\', "not json" is not valid JSON',
  });
});

test("concurrent reservations of one token: exactly one owner wins", async () => {
  const owners = Array.from({ length: 20 }, (_, i) => ({ runId: `wrun_c${i}`, hookId: `hc${i}` }));
  const results = await Promise.all(owners.map((o) => ix("reserveHookToken", ["contended", o])));
  const winners = results.filter((r) => r.claimed);
  assert.equal(winners.length, 1);
  const winner = owners[results.findIndex((r) => r.claimed)];
  for (const r of results.filter((r) => !r.claimed)) assert.deepEqual(r.holder, winner);
});

test("expireRun fences the run and deletes its keys and owned hook entries atomically", async () => {
  const run = "wrun_exp";
  const runKey = `run:wf-exp:0946684800000:${run}`;
  assert.deepEqual(await ix("putOwned", [run, runKey, JSON.stringify({ runId: run })]), { stored: true });
  await ix("finalizeHookIndexes", ["tok-exp", "hk-exp", JSON.stringify({ runId: run, hookId: "hk-exp" }), { runId: run, hookId: "hk-exp" }]);
  await ix("reserveHookToken", ["tok-exp2", { runId: run, hookId: "hk-exp2" }]);
  // A malformed request fails as a whole: no fence, nothing deleted.
  const bad = await thrown("expireRun", [{ runId: run, keys: [runKey], expiredAt: 946684800000 }]);
  assert.deepEqual(bad, { name: "TypeError", message: "request.hooks is not iterable" });
  assert.equal(await ix("get", [`expired:${run}`]), null);
  assert.notEqual(await ix("get", [runKey]), null);
  const req = {
    runId: run,
    keys: [runKey, runKey, "missing:key"],
    hooks: [
      { hookId: "hk-exp", token: "tok-exp" },
      { hookId: "hk-exp2", token: "tok-exp2" },
    ],
    expiredAt: 946684800000,
  };
  assert.deepEqual(await ix("expireRun", [req]), { deleted: 4 });
  assert.equal(await ix("get", [`expired:${run}`]), 946684800000);
  assert.deepEqual(await ix("putOwned", [run, runKey, "again"]), { stored: false });
  assert.equal(await ix("get", [runKey]), null);
  await ix("finalizeHookIndexes", ["tok-late", "hk-late", JSON.stringify({ runId: run, hookId: "hk-late" }), { runId: run, hookId: "hk-late" }]);
  assert.equal(await ix("get", ["hook:tok-late"]), null);
  assert.deepEqual(await ix("expireRun", [req]), { deleted: 0 });
  assert.deepEqual(await ix("list", [{ prefix: "hook" }]).then((p) => p.keys.filter((k) => k.name.includes("exp"))), []);
});

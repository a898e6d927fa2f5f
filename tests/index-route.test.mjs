// `POST /v1/index/{runs|hooks}/{op}` and the `hook-tokens` / `hook-ids` bindings over the
// built worker (spec-0.4 wire.md §4, catalog-hooks.md §4, tests.md "index-do"): what the
// golden-0.4 rows do not pin — claim ids, concurrent admission, merged paging over the 16
// shards, lifecycle-checked reads, a missing shard namespace. The error table itself is
// golden-0.4 router-040 seq 1–32.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startWorker } from "./lib/harness.mjs";
import { decode, encode } from "./lib/codec.mjs";
import { hookIdShard, hookTokenShard } from "./lib/world-client-040.mjs";

let w;
before(async () => {
  w = await startWorker();
});
after(() => w?.dispose());

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

async function post(worker, path, args) {
  const res = await fetch(new URL(path, worker.url), {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${worker.secret}` },
    body: encode(args),
  });
  const text = await res.text();
  return { status: res.status, text, value: res.status === 200 ? decode(text) : JSON.parse(text) };
}

async function idx(domain, op, args) {
  const r = await post(w, `/v1/index/${domain}/${op}`, args);
  assert.equal(r.status, 200, r.text);
  return r.value;
}

const rpcGet = async (binding, shard, key) => {
  const r = await post(w, `/v1/rpc/${binding}/${encodeURIComponent(shard)}/get`, [key]);
  assert.equal(r.status, 200, r.text);
  return r.value;
};

async function createRun(runId, workflowName) {
  const r = await post(w, `/v1/rpc/runs/${encodeURIComponent(runId)}/applyEvent`, [
    { runId, data: { eventType: "run_created", specVersion: 6, eventData: { deploymentId: "dep", workflowName, input: new Uint8Array([1]) } } },
  ]);
  assert.equal(r.status, 200, r.text);
  const out = r.value;
  assert.equal(out.ok, true, r.text);
  const now = Date.now();
  assert.ok(out.indexPublicationExpiresAt >= now + 1200900 - 60000 && out.indexPublicationExpiresAt <= now + 1200900, r.text);
  const meta = JSON.stringify({ runId, createdAt: out.run.createdAt.toISOString(), status: out.run.status });
  assert.deepEqual(await idx("runs", "commit", [out.run, meta, out.indexPublicationExpiresAt]), { stored: true });
  return out.run;
}

test("a reservation's claim ids are one v4 UUID; the same owner gets the existing claim back", async () => {
  const owner = { runId: "wrun_ir_a", hookId: "hk_ir_a" };
  const first = await idx("hooks", "reserve", ["tok_ir_a", owner]);
  assert.equal(first.admitted, true);
  const { claimId, tokenClaimId, hookIdClaimId } = first.reservation;
  assert.match(tokenClaimId, UUID);
  assert.equal(hookIdClaimId, tokenClaimId);
  assert.equal(claimId, `${tokenClaimId}:${hookIdClaimId}`);
  assert.deepEqual(await idx("hooks", "reserve", ["tok_ir_a", owner]), first);
  const other = await idx("hooks", "reserve", ["tok_ir_a", { runId: "wrun_ir_b", hookId: "hk_ir_b" }]);
  assert.deepEqual(other, { admitted: false, holder: owner });
  // Another reservation gets another UUID.
  const second = await idx("hooks", "reserve", ["tok_ir_other", { runId: "wrun_ir_c", hookId: "hk_ir_c" }]);
  assert.notEqual(second.reservation.tokenClaimId, tokenClaimId);
  assert.equal(await idx("hooks", "release-reservation", ["tok_ir_a", owner, first.reservation]), null);
  assert.equal((await idx("hooks", "reserve", ["tok_ir_a", { runId: "wrun_ir_b", hookId: "hk_ir_b" }])).admitted, true);
});

test("32 concurrent reservations of one token: exactly one admitted, all others see that holder", async () => {
  const owners = Array.from({ length: 32 }, (_, i) => ({ runId: `wrun_race_${i}`, hookId: `hk_race_${i}` }));
  const answers = await Promise.all(owners.map((o) => idx("hooks", "reserve", ["tok_ir_race", o])));
  const winners = answers.filter((a) => a.admitted);
  assert.equal(winners.length, 1, JSON.stringify(answers));
  const winner = owners[answers.indexOf(winners[0])];
  for (const a of answers) if (!a.admitted) assert.deepEqual(a.holder, winner);
});

test("finalize publishes both lookups, which hide the hook once its run ends; release frees the token", async () => {
  const runId = "wrun_ir_fin";
  await createRun(runId, "wf-ir");
  const owner = { runId, hookId: "hk_ir_fin" };
  const { reservation } = await idx("hooks", "reserve", ["tok_ir_fin", owner]);
  const created = await post(w, `/v1/rpc/runs/${runId}/applyEvent`, [
    {
      runId,
      data: { eventType: "hook_created", specVersion: 6, correlationId: "hk_ir_fin", eventData: { token: "tok_ir_fin" } },
      tokenHolder: null,
      hookClaimId: reservation.claimId,
    },
  ]);
  assert.equal(created.value.ok, true, created.text);
  const serialized = created.value.hookToIndex ? encode(created.value.hookToIndex) : encode(created.value.hook);
  assert.equal(await idx("hooks", "finalize", ["tok_ir_fin", "hk_ir_fin", serialized, owner, reservation]), null);
  assert.equal(await rpcGet("hook-tokens", hookTokenShard("tok_ir_fin"), "tok_ir_fin"), serialized);
  assert.equal(await rpcGet("hook-ids", hookIdShard("hk_ir_fin"), "hk_ir_fin"), serialized);
  assert.equal(await rpcGet("hook-tokens", "hook-token:v1:00", "tok_ir_fin") === serialized, hookTokenShard("tok_ir_fin") === "hook-token:v1:00");
  const done = await post(w, `/v1/rpc/runs/${runId}/applyEvent`, [{ runId, data: { eventType: "run_cancelled", specVersion: 6 } }]);
  assert.equal(done.value.ok, true, done.text);
  assert.equal(await rpcGet("hook-tokens", hookTokenShard("tok_ir_fin"), "tok_ir_fin"), null);
  assert.equal(await rpcGet("hook-ids", hookIdShard("hk_ir_fin"), "hk_ir_fin"), null);
  const released = await idx("hooks", "release", [{ runId, hooks: [{ hookId: "hk_ir_fin", token: "tok_ir_fin" }] }]);
  assert.equal(typeof released.deleted, "number");
  assert.equal((await idx("hooks", "reserve", ["tok_ir_fin", { runId: "wrun_ir_next", hookId: "hk_ir_next" }])).admitted, true);
});

test("runs.list merges the 16 shards: gap-free pages of 7 both ways, UTF-8 byte order", async () => {
  const ids = [];
  for (let i = 0; i < 20; i++) ids.push(`wrun_pg_${String(i).padStart(2, "0")}`);
  ids.push("wrun_pg_B", "wrun_pg_a", "wrun_pg_é");
  for (const id of ids) await createRun(id, "wf-pg");
  const all = (await idx("runs", "list", [{ prefix: "run:wf-pg:", limit: 1000 }])).keys.map((k) => k.name);
  assert.equal(all.length, ids.length);
  const byBytes = [...all].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  assert.deepEqual(all, byBytes);
  for (const reverse of [false, true]) {
    const seen = [];
    let cursor;
    for (;;) {
      const page = await idx("runs", "list", [{ prefix: "run:wf-pg:", limit: 7, reverse, ...(cursor ? { cursor } : {}) }]);
      assert.ok(page.keys.length <= 7);
      seen.push(...page.keys.map((k) => k.name));
      if (page.list_complete) {
        assert.equal(page.cursor, undefined);
        break;
      }
      assert.equal(page.cursor, page.keys.at(-1).name);
      cursor = page.cursor;
    }
    assert.deepEqual(seen, reverse ? [...all].reverse() : all, `reverse ${reverse}`);
  }
  // Every entry carries the metadata the 0.4 client filters on.
  const one = await idx("runs", "list", [{ prefix: "runall:", limit: 1 }]);
  assert.equal(typeof JSON.parse(one.keys[0].value).status, "string");
});

test("`workflow inspect runs` lists: an empty cursor in reverse is the first page (0.4 route and 0.3 facade)", async () => {
  // The DevKit CLI's --cursor flag defaults to "", which both world-celld clients send on
  // as the cursor of their first runs.list page (the 0.4.0 client to /v1/index/runs/list,
  // the 0.3.0 client to the index binding's `list`); the references answer nothing.
  for (const id of ["wrun_ic_1", "wrun_ic_2", "wrun_ic_3"]) await createRun(id, "wf-ic");
  const asked = { prefix: "run:wf-ic:", limit: 50, cursor: "", reverse: true };
  const v4 = await idx("runs", "list", [asked]);
  assert.equal(v4.keys.length, 3);
  assert.deepEqual(v4.keys.map((k) => k.name).reverse(), (await idx("runs", "list", [{ prefix: "run:wf-ic:" }])).keys.map((k) => k.name));
  const r = await post(w, "/v1/rpc/index/index/list", [asked]);
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.value.keys.map((k) => k.name), v4.keys.map((k) => k.name));
  const all = await idx("runs", "list", [{ prefix: "runall:", limit: 1000, cursor: "", reverse: true }]);
  assert.ok(all.keys.length >= 3);
});

test("a missing shard namespace is a 500 TypeError, as in the reference (no binding check on /v1/index)", async () => {
  const bare = await startWorker({ omitBindings: ["WORKFLOW_HOOK_TOKENS"] });
  try {
    const r = await post(bare, "/v1/index/hooks/reserve", ["tok", { runId: "r", hookId: "h" }]);
    assert.equal(r.status, 500, r.text);
    assert.equal(r.value.error.name, "TypeError");
    const listed = await post(bare, "/v1/index/runs/list", []);
    assert.deepEqual([listed.status, listed.value], [200, { keys: [], list_complete: true }]);
  } finally {
    await bare.dispose();
  }
});

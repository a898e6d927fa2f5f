// One deployment, two client generations (issue #10): runs driven by the 0.3.0 client's
// call sequences (tests/lib/world-client.mjs: the `index` binding, JSON stream methods) and
// by the 0.4.0 client's (tests/lib/world-client-040.mjs: `/v1/index/*`, the sharded hook
// bindings, binary stream routes) see each other's data, and a hook token held by one
// generation blocks the other.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startWorker } from "./lib/harness.mjs";
import { worldClient, ms13 } from "./lib/world-client.mjs";
import { worldClient040 } from "./lib/world-client-040.mjs";

let w;
let c3;
let c4;
before(async () => {
  w = await startWorker();
  c3 = worldClient(w.rpc, { retentionMs: 0, queueShards: 1 });
  c4 = worldClient040({ url: w.url, secret: w.secret }, { retentionMs: 0, queueShards: 1, streamLongPollMs: 2000 });
});
after(() => w?.dispose());

const bytes = (...xs) => new Uint8Array(xs);
const hookOf = (serialized) => {
  if (serialized === null) return null;
  const { runId, hookId, token } = JSON.parse(serialized);
  return { runId, hookId, token };
};
const ok = (out) => {
  assert.equal(out.ok, true, JSON.stringify(out));
  return out;
};

async function startRun(client, runId, workflowName) {
  const created = ok(
    await client.createEvent(runId, { eventType: "run_created", specVersion: 6, eventData: { deploymentId: "dep-mix", workflowName, input: bytes(1) } }),
  );
  ok(await client.createEvent(runId, { eventType: "run_started", specVersion: 6 }));
  return created.run;
}

test("a run driven by the 0.3 client is visible to the 0.4 client", async () => {
  const runId = "wrun_mix_03";
  const run = await startRun(c3, runId, "wf-mix-03");
  ok(await c3.createEvent(runId, { eventType: "hook_created", specVersion: 6, correlationId: "hk_mix_03", eventData: { token: "tok_mix_03" } }));
  for (const b of [bytes(3, 0), bytes(3, 1)]) await c3.writeToStream(runId, "mix-03", b);

  // Listed by /v1/index/runs/list, with the value the 0.4 client filters on.
  const all = await c4.listRuns({ prefix: "runall:" });
  const entry = all.keys.find((k) => k.name === `runall:${ms13(run.createdAt)}:${runId}`);
  assert.ok(entry, JSON.stringify(all));
  assert.equal(JSON.parse(entry.value).status, "running");
  const byName = await c4.listRuns({ prefix: "run:wf-mix-03:" });
  assert.deepEqual(
    byName.keys.map((k) => k.name),
    [`run:wf-mix-03:${ms13(run.createdAt)}:${runId}`],
  );
  // Its hook resolves through the sharded bindings.
  const hook = { runId, hookId: "hk_mix_03", token: "tok_mix_03" };
  assert.deepEqual(hookOf(await c4.getByToken("tok_mix_03")), hook);
  assert.deepEqual(hookOf(await c4.getHook("hk_mix_03")), hook);
  // Its token blocks a 0.4 admission.
  const refused = await c4.idx("hooks", "reserve", ["tok_mix_03", { runId: "wrun_mix_other", hookId: "hk_other" }]);
  assert.deepEqual(refused, { admitted: false, holder: { runId, hookId: "hk_mix_03" } });
  // Its JSON-written stream reads back through the binary route.
  const page = await c4.read(runId, "mix-03", { startIndex: 0 });
  assert.deepEqual(
    page.chunks.map((c) => [...c]),
    [
      [3, 0],
      [3, 1],
    ],
  );
  assert.equal(page.state, "open");
  assert.equal(page.tailIndex, 1);
  // A 0.4 long poll on it wakes on a 0.3 writeChunk.
  const polled = c4.poll(runId, "mix-03", 2);
  await new Promise((r) => setTimeout(r, 300));
  await w.rpc("streams", "stream:mix-03", "writeChunk", [runId, bytes(3, 2)]);
  const woken = await polled;
  assert.equal(woken.timedOut, false);
  assert.deepEqual(
    woken.chunks.map((c) => [...c]),
    [[3, 2]],
  );

  // The run ends the 0.3 way (the client releases the hooks it is given): the token is free
  // for a 0.4 owner.
  const done = ok(await c3.createEvent(runId, { eventType: "run_completed", specVersion: 6, eventData: { output: bytes(9) } }));
  assert.equal(done.run.status, "completed");
  assert.equal(await c4.getByToken("tok_mix_03"), null);
  const admitted = await c4.idx("hooks", "reserve", ["tok_mix_03", { runId: "wrun_mix_other", hookId: "hk_other" }]);
  assert.equal(admitted.admitted, true, JSON.stringify(admitted));
  await c4.idx("hooks", "release-reservation", ["tok_mix_03", { runId: "wrun_mix_other", hookId: "hk_other" }, admitted.reservation]);
});

test("a run driven by the 0.4 client is visible to the 0.3 client", async () => {
  const runId = "wrun_mix_04";
  const run = await startRun(c4, runId, "wf-mix-04");
  ok(await c4.createEvent(runId, { eventType: "hook_created", specVersion: 6, correlationId: "hk_mix_04", eventData: { token: "tok_mix_04" } }));
  const acks = await c4.writeMulti(runId, "mix-04", [bytes(4, 0), bytes(), bytes(4, 2)]);
  assert.deepEqual(acks, [{ count: 3, startIndex: 0, tailIndex: 2 }]);

  // Listed and read through the 0.3 `index` facade.
  const ix = (method, args) => w.rpc("index", "index", method, args);
  const listed = await ix("list", [{ prefix: "runall:" }]);
  assert.ok(
    listed.keys.some((k) => k.name === `runall:${ms13(run.createdAt)}:${runId}`),
    JSON.stringify(listed),
  );
  assert.notEqual(await ix("get", [`run:wf-mix-04:${ms13(run.createdAt)}:${runId}`]), null);
  const hook = { runId, hookId: "hk_mix_04", token: "tok_mix_04" };
  assert.deepEqual(hookOf(await ix("get", ["hook:tok_mix_04"])), hook);
  assert.deepEqual(hookOf(await ix("get", ["hookid:hk_mix_04"])), hook);
  // Its token blocks a 0.3 admission.
  assert.deepEqual(await ix("reserveHookToken", ["tok_mix_04", { runId: "wrun_mix_thief", hookId: "hk_thief" }]), {
    claimed: false,
    holder: { runId, hookId: "hk_mix_04" },
  });
  // Its binary-written stream reads back through the 0.3 JSON methods.
  const page = await w.rpc("streams", "stream:mix-04", "getChunks", [{ startIndex: 0, limit: 10 }]);
  assert.deepEqual(
    page.chunks.map((c) => [...c]),
    [[4, 0], [], [4, 2]],
  );
  assert.equal(page.done, false);
  await c4.closeStream(runId, "mix-04");
  const info = await w.rpc("streams", "stream:mix-04", "getInfo", []);
  assert.equal(info.done, true);
  assert.equal(info.tailIndex ?? info.count - 1, 2);
  assert.deepEqual(await w.rpc("streams", `run-streams:${runId}`, "listStreams", [runId]), ["mix-04"]);

  // A failed stream: 0.3 readers get the stored error instead of polling forever.
  await c4.writeMulti(runId, "mix-04-err", [bytes(1)]);
  await c4.failStream(runId, "mix-04-err", { name: "ProducerError", message: "it broke" });
  const failed = await w.rpc.raw("streams", "stream:mix-04-err", "getChunks", [{ startIndex: 0, limit: 10 }]);
  assert.equal(failed.status, 500, failed.text);
  assert.match(failed.text, /it broke/);

  // The run ends: the hook no longer resolves for the 0.3 client either, and once the
  // terminal cleanup has released it, a 0.3 owner can take the token.
  ok(await c4.createEvent(runId, { eventType: "run_completed", specVersion: 6, eventData: { output: bytes(9) } }));
  assert.equal(await ix("get", ["hook:tok_mix_04"]), null);
  assert.equal(await ix("get", ["hookid:hk_mix_04"]), null);
  let claim;
  for (let i = 0; i < 50; i++) {
    claim = await ix("reserveHookToken", ["tok_mix_04", { runId: "wrun_mix_next", hookId: "hk_next" }]);
    if (claim.claimed) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.deepEqual(claim, { claimed: true });
});

test("a token claimed by one generation is refused to the other, both ways, under concurrency", async () => {
  // 20 owners of each generation race for one token: exactly one wins.
  const owners = Array.from({ length: 40 }, (_, i) => ({ runId: `wrun_race_${i}`, hookId: `hk_race_${i}` }));
  const answers = await Promise.all(
    owners.map((o, i) =>
      i % 2
        ? w.rpc("index", "index", "reserveHookToken", ["tok_mix_race", o]).then((a) => a.claimed)
        : c4.idx("hooks", "reserve", ["tok_mix_race", o]).then((a) => a.admitted),
    ),
  );
  assert.equal(answers.filter(Boolean).length, 1, JSON.stringify(answers));
});

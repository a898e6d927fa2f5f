// WorkflowRunDO end to end on Miniflare over the real HTTP RPC (spec run-do.md, client.md §3):
// the reference client's call sequences for runs, steps, hooks (IndexDO token dance), waits,
// attributes, terminal transitions, pagination, thrown errors and a concurrent burst.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startWorker } from "./lib/harness.mjs";
import { ms13, worldClient } from "./lib/world-client.mjs";

let w;
before(async () => {
  w = await startWorker();
});
after(async () => {
  await w?.dispose();
});

const runs = (runId, method, args = []) => w.rpc("runs", runId, method, args);
const ix = (method, args = []) => w.rpc("index", "index", method, args);
const bytes = (...b) => new Uint8Array(b);
const slot = (n) => `evnt_${String(n).padStart(26, "0")}`;
const create = (runId, data, params) => worldClient(w.rpc).createEvent(runId, data, params);

const runCreated = (workflowName = "wf", input = bytes(1, 2, 3)) => ({
  eventType: "run_created",
  specVersion: 6,
  eventData: { deploymentId: "dep", workflowName, input },
});

async function startedRun(runId) {
  await create(runId, runCreated());
  return create(runId, { eventType: "run_started", specVersion: 6 });
}

test("create and start a run: entity, preload, index keys, reads", async () => {
  const id = "wrun_it_a";
  const created = await create(id, runCreated("wf-it"));
  assert.equal(created.ok, true);
  assert.equal(created.event.eventId, slot(1));
  assert.equal(created.run.status, "pending");
  assert.ok(created.run.createdAt instanceof Date);
  assert.deepEqual(created.run.input, bytes(1, 2, 3));
  assert.deepEqual(created.runCreated, { workflowName: "wf-it", createdAt: created.run.createdAt });
  assert.equal(created.maxEvents, 25000);
  const started = await create(id, { eventType: "run_started", specVersion: 6 });
  assert.equal(started.run.status, "running");
  assert.deepEqual(started.events.map((e) => e.eventType), ["run_created", "run_started"]);
  // The preload's cursor is the position past its last event, where the runtime resumes.
  assert.equal(started.cursor, slot(2));
  assert.equal(started.hasMore, false);
  const replay = await create(id, { eventType: "run_started", specVersion: 6 });
  assert.equal(replay.event, undefined);
  assert.deepEqual(replay.run, started.run);
  const got = await runs(id, "getRun");
  assert.deepEqual(got, { ok: true, value: started.run });
  const keys = await ix("list", [{ prefix: "run:wf-it:" }]);
  assert.deepEqual(keys.keys.map((k) => k.name), [`run:wf-it:${ms13(created.run.createdAt)}:${id}`]);
  assert.equal(JSON.parse(await ix("get", [keys.keys[0].name])).status, "running");
  assert.deepEqual(await runs("wrun_it_missing", "getRun"), { ok: true, value: null });
});

test("steps through retry and completion; lazy start; eventCount report", async () => {
  const id = "wrun_it_steps";
  await startedRun(id);
  const s = await create(id, { eventType: "step_created", specVersion: 6, correlationId: "s1", eventData: { stepName: "st", input: bytes(9) } });
  assert.equal(s.step.status, "pending");
  assert.equal(s.step.attempt, 0);
  assert.equal((await create(id, { eventType: "step_started", specVersion: 6, correlationId: "s1" })).step.attempt, 1);
  const retry = await create(id, { eventType: "step_retrying", specVersion: 6, correlationId: "s1", eventData: { error: "flaky", retryAfter: new Date(Date.now() + 60_000) } });
  assert.equal(retry.step.status, "pending");
  assert.deepEqual(retry.step.error, { message: "flaky" });
  const early = await create(id, { eventType: "step_started", specVersion: 6, correlationId: "s1" });
  assert.equal(early.code, "TOO_EARLY");
  assert.ok(early.retryAfterSeconds >= 59 && early.retryAfterSeconds <= 61);
  await create(id, { eventType: "step_retrying", specVersion: 6, correlationId: "s1", eventData: { error: "again", retryAfter: new Date(946684800000) } });
  assert.equal((await create(id, { eventType: "step_started", specVersion: 6, correlationId: "s1" })).step.attempt, 2);
  const done = await create(id, { eventType: "step_completed", specVersion: 6, correlationId: "s1", eventData: { result: bytes(7) } });
  assert.equal(done.step.status, "completed");
  assert.deepEqual(done.step.output, bytes(7));
  const conflict = await create(id, { eventType: "step_completed", specVersion: 6, correlationId: "s1", eventData: { result: 1 } });
  assert.deepEqual([conflict.code, conflict.message], ["ENTITY_CONFLICT", 'Cannot modify step in terminal state "completed"']);

  const before = (await runs(id, "listEvents", [{ limit: 1000 }])).value.data.length;
  const lazy = await create(id, { eventType: "step_started", specVersion: 6, correlationId: "s2", eventData: { stepName: "lz", input: bytes(5), attempt: 1 } }, { eventCount: before });
  assert.equal(lazy.stepCreated, true);
  assert.equal(lazy.event.eventId, slot(before + 2));
  assert.deepEqual(lazy.events.map((e) => [e.eventType, e.eventId]), [["step_created", slot(before + 1)]]);
  assert.equal(lazy.event.eventData.input, undefined);
  const steps = await runs(id, "listSteps", [{ limit: 20, sortOrder: "asc" }]);
  assert.deepEqual(steps.value.data.map((x) => x.stepId), ["s1", "s2"]);
  assert.deepEqual((await runs(id, "getStep", ["s2"])).value, lazy.step);
});

test("hooks: reserve -> applyEvent -> finalize, resume, dispose, conflicts, release on terminal", async () => {
  const a = "wrun_it_hooks_a";
  const b = "wrun_it_hooks_b";
  await startedRun(a);
  await startedRun(b);
  const hook = await create(a, { eventType: "hook_created", specVersion: 6, correlationId: "h1", eventData: { token: "tok-it-1" } });
  assert.deepEqual(hook.hookToIndex, hook.hook);
  assert.equal(hook.hook.isWebhook, false);
  const byToken = JSON.parse(await ix("get", ["hook:tok-it-1"]));
  assert.deepEqual([byToken.runId, byToken.hookId], [a, "h1"]);
  assert.ok(await ix("get", ["hookid:h1"]));

  // Another run asking for the same token gets a hook_conflict event and no hook.
  const clash = await create(b, { eventType: "hook_created", specVersion: 6, correlationId: "h9", eventData: { token: "tok-it-1" } });
  assert.equal(clash.event.eventType, "hook_conflict");
  assert.deepEqual(clash.event.eventData, { token: "tok-it-1", conflictingRunId: a });
  assert.equal(clash.hook, undefined);
  assert.equal(JSON.parse(await ix("get", ["hook:tok-it-1"])).runId, a);

  // Exact duplicate: ENTITY_CONFLICT, token still maps to the original.
  const dup = await create(a, { eventType: "hook_created", specVersion: 6, correlationId: "h1", eventData: { token: "tok-it-1" } });
  assert.deepEqual([dup.code, dup.message], ["ENTITY_CONFLICT", 'Hook "h1" already created']);

  // Resume with a resumeId is idempotent.
  const recv = (params) => create(a, { eventType: "hook_received", specVersion: 6, correlationId: "h1", eventData: { payload: bytes(4) } }, params);
  const r1 = await recv({ resumeId: "res-1", resumePayloadDigest: "d1" });
  const r2 = await recv({ resumeId: "res-1", resumePayloadDigest: "d1" });
  assert.equal(r2.event.eventId, r1.event.eventId);
  assert.equal((await recv({ resumeId: "res-1", resumePayloadDigest: "d2" })).code, "ENTITY_CONFLICT");

  // Dispose releases both lookups; a replayed resume still answers.
  const disposed = await create(a, { eventType: "hook_disposed", specVersion: 6, correlationId: "h1" });
  assert.deepEqual(disposed.releasedHooks, [{ hookId: "h1", token: "tok-it-1" }]);
  assert.equal(await ix("get", ["hook:tok-it-1"]), null);
  assert.equal(await ix("get", ["hookid:h1"]), null);
  assert.equal((await recv({ resumeId: "res-1" })).event.eventId, r1.event.eventId);
  assert.deepEqual((await runs(a, "listHooks", [{ limit: 100 }])).value.data, []);

  // A terminal run releases its live hooks' tokens.
  await create(a, { eventType: "hook_created", specVersion: 6, correlationId: "h2", eventData: { token: "tok-it-2", metadata: bytes(1) } });
  assert.ok(await ix("get", ["hook:tok-it-2"]));
  const done = await create(a, { eventType: "run_completed", specVersion: 6, eventData: { output: bytes(1) } });
  assert.deepEqual(done.releasedHooks, [{ hookId: "h2", token: "tok-it-2" }]);
  assert.equal(await ix("get", ["hook:tok-it-2"]), null);
  // The token is free for another run now.
  const reuse = await create(b, { eventType: "hook_created", specVersion: 6, correlationId: "h3", eventData: { token: "tok-it-2" } });
  assert.equal(reuse.hook.runId, b);
});

test("waits and attributes", async () => {
  const id = "wrun_it_wa";
  await startedRun(id);
  const wc = await create(id, { eventType: "wait_created", specVersion: 6, correlationId: "wait-a", eventData: { resumeAt: new Date("2099-01-01T00:00:00.000Z") } });
  assert.deepEqual([wc.wait.waitId, wc.wait.status], [`${id}-wait-a`, "waiting"]);
  assert.equal((await create(id, { eventType: "wait_created", specVersion: 6, correlationId: "wait-a", eventData: { resumeAt: new Date() } })).code, "ENTITY_CONFLICT");
  const done = await create(id, { eventType: "wait_completed", specVersion: 6, correlationId: "wait-a" });
  assert.equal(done.wait.status, "completed");
  assert.deepEqual(done.wait.createdAt, wc.wait.createdAt);
  assert.equal((await create(id, { eventType: "wait_completed", specVersion: 6, correlationId: "wait-a" })).code, "ENTITY_CONFLICT");

  const attr = (changes, correlationId) => create(id, { eventType: "attr_set", specVersion: 6, correlationId, eventData: { changes, writer: { type: "workflow" } } });
  const a1 = await attr([{ key: "region", value: "us-west" }], "attr-1");
  assert.deepEqual(a1.run.attributes, { region: "us-west" });
  assert.equal((await attr([{ key: "region", value: "eu" }], "attr-1")).code, "ENTITY_CONFLICT");
  await assert.rejects(attr([{ key: "$x", value: "v" }]), (e) => e.status === 500 && e.name === "Error" && e.message.startsWith('AttributeValidationError: Attribute key "$x" starts with reserved prefix'));
  const a2 = await attr([{ key: "region", value: null }, { key: "tier", value: "gold" }]);
  assert.deepEqual(a2.run.attributes, { tier: "gold" });
});

test("thrown errors are HTTP 500 and write nothing", async () => {
  const id = "wrun_it_err";
  await startedRun(id);
  await assert.rejects(create(id, { eventType: "wait_created", specVersion: 6, correlationId: "w", eventData: { resumeAt: "not a date" } }), (e) => e.status === 500 && e.name === "Error" && e.message.startsWith("ZodError: [\n  {\n    \"expected\": \"date\""));
  await assert.rejects(create(id, { eventType: "run_completed", specVersion: 6 }), (e) => e.name === "TypeError" && e.message === "Cannot read properties of undefined (reading 'output')");
  const next = await create(id, { eventType: "run_cancelled", specVersion: 6 });
  assert.equal(next.event.eventId, slot(3));
  const again = await create(id, { eventType: "run_cancelled", specVersion: 6 });
  assert.equal(again.event.eventId, slot(4), "repeated cancel appends");
  const late = await create(id, { eventType: "run_started", specVersion: 6 });
  assert.deepEqual([late.code, late.message], ["RUN_EXPIRED", `Workflow run "${id}" is already in terminal state "cancelled"`]);
});

test("pagination across pages: events asc/desc, steps by creation time", async () => {
  const id = "wrun_it_pages";
  await startedRun(id);
  for (const sid of ["z-first", "z-second", "a-third", "m-fourth", "b-fifth"]) {
    await create(id, { eventType: "step_created", specVersion: 6, correlationId: sid, eventData: { stepName: "n", input: bytes(1) } });
    await new Promise((r) => setTimeout(r, 3)); // distinct creation milliseconds
  }
  const all = [];
  let cursor;
  for (;;) {
    const page = (await runs(id, "listEvents", [{ limit: 3, cursor, sortOrder: "asc" }])).value;
    all.push(...page.data.map((e) => e.eventId));
    // Every page's cursor is its last event's id, the last page's too.
    assert.equal(page.cursor, all.at(-1));
    cursor = page.cursor;
    if (!page.hasMore) break;
  }
  assert.deepEqual(all, [1, 2, 3, 4, 5, 6, 7].map(slot));
  // From the last page's cursor: an empty page with a null cursor.
  assert.deepEqual((await runs(id, "listEvents", [{ limit: 3, cursor, sortOrder: "asc" }])).value, { data: [], cursor: null, hasMore: false });
  const desc = (await runs(id, "listEvents", [{ limit: 3, sortOrder: "desc" }])).value;
  assert.deepEqual(desc.data.map((e) => e.eventId), [7, 6, 5].map(slot));
  const desc2 = (await runs(id, "listEvents", [{ limit: 3, sortOrder: "desc", cursor: desc.cursor }])).value;
  assert.deepEqual(desc2.data.map((e) => e.eventId), [4, 3, 2].map(slot));
  const steps = [];
  cursor = undefined;
  for (;;) {
    const page = (await runs(id, "listSteps", [{ limit: 2, cursor, sortOrder: "asc" }])).value;
    steps.push(...page.data.map((s) => s.stepId));
    if (!page.hasMore) break;
    assert.match(page.cursor, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z:/);
    cursor = page.cursor;
  }
  assert.deepEqual(steps, ["z-first", "z-second", "a-third", "m-fourth", "b-fifth"]);
  const neg = await runs(id, "listEvents", [{ limit: -1 }]).catch((e) => e);
  assert.equal(neg.status, 500);
  assert.equal(neg.errorName, "TypeError");
});

test("a concurrent burst of 50 step_created plus reads loses nothing", async () => {
  const id = "wrun_it_burst";
  await startedRun(id);
  const writes = Array.from({ length: 50 }, (_, i) =>
    w.rpc("runs", id, "applyEvent", [{ runId: id, data: { eventType: "step_created", specVersion: 6, correlationId: `b${i}`, eventData: { stepName: "n", input: bytes(i) } }, cleanup: { retentionMs: 0, queueShards: 1 } }]),
  );
  const reads = Array.from({ length: 20 }, () => runs(id, "getRun"));
  const results = await Promise.all([...writes, ...reads]);
  for (const r of results.slice(0, 50)) assert.equal(r.ok, true);
  const ids = results.slice(0, 50).map((r) => r.event.eventId).sort();
  assert.deepEqual(ids, Array.from({ length: 50 }, (_, i) => slot(i + 3)));
  const events = (await runs(id, "listEvents", [{ limit: 1000 }])).value.data;
  assert.equal(events.length, 52);
  const steps = (await runs(id, "listSteps", [{ limit: 100 }])).value.data;
  assert.equal(steps.length, 50);
  assert.deepEqual(new Set(steps.map((s) => s.stepId)).size, 50);
});

test("two runs racing for one token: one hook_created, one hook_conflict", async () => {
  const [a, b] = ["wrun_it_race_a", "wrun_it_race_b"];
  await startedRun(a);
  await startedRun(b);
  const [ra, rb] = await Promise.all([
    create(a, { eventType: "hook_created", specVersion: 6, correlationId: "ha", eventData: { token: "tok-race" } }),
    create(b, { eventType: "hook_created", specVersion: 6, correlationId: "hb", eventData: { token: "tok-race" } }),
  ]);
  const types = [ra.event.eventType, rb.event.eventType].sort();
  assert.deepEqual(types, ["hook_conflict", "hook_created"]);
  const winner = ra.event.eventType === "hook_created" ? a : b;
  assert.equal(JSON.parse(await ix("get", ["hook:tok-race"])).runId, winner);
  const hooks = [...(await runs(a, "listHooks")).value.data, ...(await runs(b, "listHooks")).value.data];
  assert.equal(hooks.length, 1);
});

test("a lost index publication is repaired by replaying hook_created", async () => {
  const id = "wrun_it_repair";
  await startedRun(id);
  const owner = { runId: id, hookId: "hr" };
  // First attempt: reserved and committed, but the client died before finalizeHookIndexes.
  assert.deepEqual(await ix("reserveHookToken", ["tok-repair", owner]), { claimed: true });
  const first = await runs(id, "applyEvent", [{ runId: id, data: { eventType: "hook_created", specVersion: 6, correlationId: "hr", eventData: { token: "tok-repair" } }, tokenHolder: null, cleanup: { retentionMs: 0, queueShards: 1 } }]);
  assert.equal(first.ok, true);
  assert.equal(await ix("get", ["hook:tok-repair"]), null);
  // The replay goes through the normal sequence and publishes the index.
  const replay = await create(id, { eventType: "hook_created", specVersion: 6, correlationId: "hr", eventData: { token: "tok-repair" } });
  assert.equal(replay.event, undefined);
  assert.deepEqual(replay.hookToIndex, first.hook);
  assert.equal(JSON.parse(await ix("get", ["hook:tok-repair"])).hookId, "hr");
  assert.equal(JSON.parse(await ix("get", ["hookid:hr"])).runId, id);
});

test("resilient start over the wire: run_started creates the missing run", async () => {
  const id = "wrun_it_resilient";
  const out = await create(id, { eventType: "run_started", specVersion: 6, eventData: { deploymentId: "dep", workflowName: "wf-res", input: bytes(4, 2) } }, { eventCount: 0 });
  assert.equal(out.run.status, "running");
  assert.deepEqual(out.runCreated, { workflowName: "wf-res", createdAt: out.run.createdAt });
  assert.deepEqual(out.events.map((e) => e.eventType), ["run_created"]);
  assert.deepEqual((await runs(id, "listEvents")).value.data.map((e) => e.eventType), ["run_created", "run_started"]);
  const listed = await ix("list", [{ prefix: "run:wf-res:" }]);
  assert.equal(listed.keys.length, 1);
});

test("a 1.9 MiB step payload is stored and read back exactly (packed record, ~2 MB per value like the reference)", async () => {
  const id = "wrun_it_large";
  await startedRun(id);
  const payload = new Uint8Array(1_900_000);
  for (let i = 0; i < payload.length; i++) payload[i] = (i * 31) & 0xff;
  const out = await create(id, { eventType: "step_created", specVersion: 6, correlationId: "big", eventData: { stepName: "s", input: payload } });
  assert.equal(out.ok, true);
  const step = await runs(id, "getStep", ["big"]);
  assert.ok(Buffer.from(step.value.input).equals(Buffer.from(payload)), "step input round-trips");
  const page = await runs(id, "listEvents", [{ limit: 10 }]);
  const ev = page.value.data.find((e) => e.correlationId === "big");
  assert.ok(Buffer.from(ev.eventData.input).equals(Buffer.from(payload)), "event payload round-trips");
  const done = await create(id, { eventType: "step_completed", specVersion: 6, correlationId: "big", eventData: { result: bytes(1) } });
  assert.equal(done.ok, true);
  // Over the platform's value limit: a thrown 500, nothing written.
  const tooBig = await w.rpc.raw("runs", id, "applyEvent", [
    { runId: id, data: { eventType: "step_created", specVersion: 6, correlationId: "huge", eventData: { stepName: "s", input: new Uint8Array(2_300_000) } }, cleanup: { retentionMs: 0, queueShards: 1 } },
  ]);
  assert.equal(tooBig.status, 500);
  assert.match(tooBig.value.error.message, /too big/);
  assert.equal((await runs(id, "getStep", ["huge"])).value, null);
});

/** `JSON.stringify` with every object's keys in sorted order: the encoder's exact form. */
const sortedJson = (text) =>
  JSON.stringify(JSON.parse(text), (_, v) => (v && typeof v === "object" && !Array.isArray(v) ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, v[k]])) : v));

test("reads answer stored records byte for byte as the encoder writes them, whether answered as stored or decoded first", async () => {
  // Records the reads pass through as stored (integers, strings, tagged dates and bytes) and
  // ones they must decode first: numbers whose stored form differs from JSON.stringify's
  // (1e21, 1e-7, a fraction, an integer beyond 15 digits), a string under a date key, a
  // string with a line separator.
  const id = "wrun_it_stored";
  await startedRun(id);
  const odd = { big: 1e21, tiny: 1e-7, frac: 0.1, long: 12345678901234567, when: new Date(Date.UTC(2026, 0, 2)), sep: "a\u2028b", ok: 1 };
  const created = await create(id, { eventType: "step_created", specVersion: 6, correlationId: "odd", eventData: { stepName: "s", input: odd } });
  assert.equal(created.ok, true);
  await create(id, { eventType: "step_created", specVersion: 6, correlationId: "plain", eventData: { stepName: "s", input: bytes(1, 2) } });
  const hook = await create(id, { eventType: "hook_created", specVersion: 6, correlationId: "hk", eventData: { token: "tok-stored", metadata: { retryAfter: "soon", n: 2.5 } } });
  assert.equal(hook.ok, true);
  for (const [method, args] of [
    ["listEvents", [{ limit: 100 }]],
    ["listEvents", [{ limit: 2, sortOrder: "desc" }]],
    ["getRun", []],
    ["getStep", ["odd"]],
    ["getStep", ["plain"]],
    ["getEvent", [slot(3)]],
    ["listSteps", []],
    ["listHooks", []],
  ]) {
    const out = await w.rpc.raw("runs", id, method, args);
    assert.equal(out.status, 200, method);
    assert.equal(out.text, sortedJson(out.text), `${method} answers the encoder's exact form`);
  }
  // The flow handler's resume (run_started of a running run: the preload) and a step event
  // with sinceCursor answer pages of events the same way.
  for (const [data, params] of [
    [{ eventType: "run_started", specVersion: 6 }, undefined],
    [{ eventType: "step_started", specVersion: 6, correlationId: "plain" }, { sinceCursor: slot(2) }],
  ]) {
    const out = await w.rpc.raw("runs", id, "applyEvent", [{ runId: id, data, params, cleanup: { retentionMs: 0, queueShards: 1 } }]);
    assert.equal(out.status, 200, data.eventType);
    assert.ok(out.value.events.length >= 3, data.eventType);
    assert.equal(out.text, sortedJson(out.text), `${data.eventType} answers the encoder's exact form`);
    assert.match(out.text, /"big":1e\+21,/);
  }
  const events = await w.rpc.raw("runs", id, "listEvents", [{ limit: 100 }]);
  assert.match(events.text, /"big":1e\+21,/);
  assert.match(events.text, /"frac":0\.1,/);
  assert.match(events.text, /"long":12345678901234568,/);
  assert.match(events.text, /"tiny":1e-7,/);
  assert.match(events.text, /"when":\{"__type":"Date","iso":"2026-01-02T00:00:00.000Z"\}/);
  const page = await w.rpc.raw("runs", id, "listEvents", [{ limit: 2 }]);
  assert.equal(page.value.value.cursor, slot(2));
  assert.equal(page.value.value.hasMore, true);
  const step = await runs(id, "getStep", ["odd"]);
  assert.deepEqual(step.value.input, odd);
});

// Spec versions over HTTP (issue #32), through the call sequences of both client
// generations: runtime 5.0.0-beta.55 (@workflow/world 5.0.0-beta.37) stamps run_created and
// run_started with the World's declared 6 but its step, hook, wait and terminal events with
// 7, and a client rebuilt on that @workflow/world creates runs at 7. The worker serves 6
// through 7, stores the version each request carries, and refuses anything else with
// RUN_NOT_SUPPORTED (the client's RunNotSupportedError).

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startWorker } from "./lib/harness.mjs";
import { worldClient } from "./lib/world-client.mjs";
import { worldClient040 } from "./lib/world-client-040.mjs";

let w;
const clients = {};
before(async () => {
  w = await startWorker();
  clients["0.3"] = worldClient(w.rpc, { retentionMs: 0, queueShards: 1 });
  clients["0.4"] = worldClient040({ url: w.url, secret: w.secret }, { retentionMs: 0, queueShards: 1 });
});
after(() => w?.dispose());

const bytes = (...xs) => new Uint8Array(xs);
const ok = (out) => {
  assert.equal(out.ok, true, JSON.stringify(out));
  return out;
};
const runCreated = (specVersion) => ({
  eventType: "run_created",
  specVersion,
  eventData: { deploymentId: "dep-sv", workflowName: "wf-sv", input: bytes(1, 2, 3) },
});
const stored = async (runId) => (await w.rpc("runs", runId, "listEvents", [{ limit: 100 }])).value.data.map((e) => [e.eventType, e.specVersion]);
const getRun = async (runId) => (await w.rpc("runs", runId, "getRun")).value;

for (const gen of ["0.3", "0.4"]) {
  const tag = gen.replace(".", "");

  test(`${gen} client: events at 7 on a run created at 6 are accepted and stored with 7`, async () => {
    const c = clients[gen];
    const runId = `wrun_sv_mixed_${tag}`;
    assert.equal(ok(await c.createEvent(runId, runCreated(6))).run.specVersion, 6);
    ok(await c.createEvent(runId, { eventType: "run_started", specVersion: 6 }));
    const step = ok(await c.createEvent(runId, { eventType: "step_created", specVersion: 7, correlationId: "s1", eventData: { stepName: "st", input: bytes(9) } }));
    assert.equal(step.event.specVersion, 7);
    assert.equal(step.step.specVersion, 7);
    ok(await c.createEvent(runId, { eventType: "step_started", specVersion: 7, correlationId: "s1" }));
    ok(await c.createEvent(runId, { eventType: "step_completed", specVersion: 7, correlationId: "s1", eventData: { result: bytes(7) } }));
    const hook = ok(await c.createEvent(runId, { eventType: "hook_created", specVersion: 7, correlationId: `hk_sv_${tag}`, eventData: { token: `tok_sv_${tag}` } }));
    assert.equal(hook.hook.specVersion, 7);
    const wait = ok(await c.createEvent(runId, { eventType: "wait_created", specVersion: 7, correlationId: "w1", eventData: { resumeAt: new Date(Date.now() + 60_000) } }));
    assert.equal(wait.wait.specVersion, 7);
    ok(await c.createEvent(runId, { eventType: "wait_completed", specVersion: 7, correlationId: "w1" }));
    const end = ok(await c.createEvent(runId, { eventType: "run_completed", specVersion: 7, eventData: { output: bytes(4) } }));
    assert.equal(end.run.status, "completed");
    assert.equal(end.run.specVersion, 6, "the run keeps the version it was created with");
    assert.deepEqual(await stored(runId), [
      ["run_created", 6],
      ["run_started", 6],
      ["step_created", 7],
      ["step_started", 7],
      ["step_completed", 7],
      ["hook_created", 7],
      ["wait_created", 7],
      ["wait_completed", 7],
      ["run_completed", 7],
    ]);
    assert.equal((await getRun(runId)).specVersion, 6);
  });

  test(`${gen} client: a run created at 7 is served and its record carries 7`, async () => {
    const c = clients[gen];
    const runId = `wrun_sv_seven_${tag}`;
    const created = ok(await c.createEvent(runId, runCreated(7)));
    assert.equal(created.run.specVersion, 7);
    assert.equal(created.event.specVersion, 7);
    const started = ok(await c.createEvent(runId, { eventType: "run_started", specVersion: 7 }));
    assert.equal(started.run.status, "running");
    assert.deepEqual(started.events.map((e) => [e.eventType, e.specVersion]), [["run_created", 7], ["run_started", 7]]);
    ok(await c.createEvent(runId, { eventType: "step_created", specVersion: 6, correlationId: "s1", eventData: { stepName: "st", input: bytes(1) } }));
    const end = ok(await c.createEvent(runId, { eventType: "run_completed", specVersion: 7, eventData: { output: bytes(2) } }));
    assert.equal(end.run.specVersion, 7);
    const run = await getRun(runId);
    assert.equal(run.status, "completed");
    assert.equal(run.specVersion, 7);
  });

  test(`${gen} client: a version above 7 or below 6 is refused with RUN_NOT_SUPPORTED`, async () => {
    const c = clients[gen];
    const runId = `wrun_sv_refused_${tag}`;
    assert.deepEqual(await c.createEvent(runId, runCreated(8)), {
      ok: false,
      code: "RUN_NOT_SUPPORTED",
      message: `Run "${runId}" uses unsupported specVersion 8; this world supports 6 through 7`,
      runSpecVersion: 8,
    });
    assert.deepEqual(await c.createEvent(runId, runCreated(5)), {
      ok: false,
      code: "RUN_NOT_SUPPORTED",
      message: `Run "${runId}" uses unsupported specVersion 5; this world requires 6`,
      runSpecVersion: 5,
    });
    assert.equal(await getRun(runId), null, "a refusal creates nothing");
    // On a served run, an event above the ceiling writes nothing either.
    ok(await c.createEvent(runId, runCreated(6)));
    const refused = await c.createEvent(runId, { eventType: "step_created", specVersion: 8, correlationId: "s1", eventData: { stepName: "st", input: bytes(1) } });
    assert.deepEqual([refused.code, refused.runSpecVersion], ["RUN_NOT_SUPPORTED", 8]);
    assert.deepEqual(await stored(runId), [["run_created", 6]]);
  });
}

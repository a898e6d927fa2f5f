// Crash consistency: SIGKILL of workerd in the middle of a mixed burst, over persisted
// Durable Object state, at several points (issue #11, "Also build").
//
// Each round starts the built worker on the same persistence directory, verifies what
// the earlier rounds left, then runs a burst of concurrent writes the way the client sends
// them — run events (tests/lib/world-client.mjs: reserve → applyEvent → index writes), stream
// chunks (registerStream + writeChunk), plain index writes and queue enqueues (delayed an
// hour, so nothing is delivered) — and kills the workerd process after a round-specific
// delay. Checked after every restart:
//   * every acknowledged write is present: events (id, type, correlation id), chunks
//     (index and bytes), index values, queue messages (re-enqueueing an acknowledged
//     message's idempotency key is deduplicated, so its row exists);
//   * nothing is half-applied: event ids are dense 1..N; every step record matches the
//     last event of its step and every step_created event has its step; the run's status
//     matches its events; every stored chunk holds the bytes written for its index; the
//     queue's pending count grows by exactly the messages re-enqueueing created;
//   * ids continue densely: the next round's events and chunks take the next ids.

import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SCRIPT_PATH, startWorker } from "./lib/harness.mjs";
import { worldClient } from "./lib/world-client.mjs";

const RUNS = ["wrun_crash_a", "wrun_crash_b", "wrun_crash_c"];
const STREAMS = ["crash-s1", "crash-s2"];
/** Milliseconds between the burst's first acknowledged write and each kill. */
const KILL_AFTER = [100, 400, 800, 1400, 2200];
const DEAD_TARGET = "http://127.0.0.1:9";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const evId = (n) => `evnt_${String(n).padStart(26, "0")}`;
const chunkBytes = (stream, i) => new Uint8Array(Buffer.from(`${stream}:${i}:${"x".repeat(i % 7)}`));

/** The live workerd processes started by this process (Miniflare's runtime). */
function workerdChildren() {
  const out = [];
  for (const e of readdirSync("/proc")) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const stat = readFileSync(`/proc/${e}/stat`, "utf8");
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const [state, ppid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(ppid) === process.pid && state !== "Z" && comm.includes("workerd")) out.push(Number(e));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

async function withTimeout(promise, ms) {
  let timer;
  return Promise.race([promise.catch(() => {}), new Promise((r) => (timer = setTimeout(r, ms)))]).finally(() => clearTimeout(timer));
}

/** What the tests saw acknowledged, across rounds. */
const acked = {
  events: new Map(RUNS.map((r) => [r, []])), // {eventId, eventType, correlationId}
  chunks: new Map(STREAMS.map((s) => [s, -1])), // highest acknowledged index
  index: new Map(), // key -> value
  messages: new Set(), // idempotency keys
  attemptedMessages: new Set(),
};

const STEP_STATUS = { step_created: "pending", step_started: "running", step_completed: "completed" };

async function verify(w, round) {
  const c = worldClient(w.rpc);
  for (const runId of RUNS) {
    const page = await w.rpc("runs", runId, "listEvents", [{ limit: 1000, sortOrder: "asc" }]);
    const events = page.value.data;
    assert.deepEqual(
      events.map((e) => e.eventId),
      events.map((_, i) => evId(i + 1)),
      `round ${round}: ${runId} event ids are dense`,
    );
    const byId = new Map(events.map((e) => [e.eventId, e]));
    for (const a of acked.events.get(runId)) {
      const e = byId.get(a.eventId);
      assert.ok(e, `round ${round}: acknowledged ${a.eventType} ${a.eventId} of ${runId} is missing`);
      assert.equal(e.eventType, a.eventType);
      assert.equal(e.correlationId, a.correlationId);
    }
    // Steps match their events.
    const lastStepEvent = new Map();
    for (const e of events) if (STEP_STATUS[e.eventType]) lastStepEvent.set(e.correlationId, e.eventType);
    const steps = (await w.rpc("runs", runId, "listSteps", [{ limit: 1000 }])).value.data;
    assert.equal(steps.length, lastStepEvent.size, `round ${round}: ${runId} has one step per step_created event`);
    for (const s of steps) {
      assert.equal(s.status, STEP_STATUS[lastStepEvent.get(s.stepId)], `round ${round}: step ${s.stepId} status vs its events`);
    }
    const run = (await w.rpc("runs", runId, "getRun", [])).value;
    const types = new Set(events.map((e) => e.eventType));
    if (!types.has("run_created")) assert.equal(run, null, `round ${round}: ${runId} exists without run_created`);
    else assert.equal(run.status, types.has("run_started") ? "running" : "pending", `round ${round}: ${runId} status vs events`);
  }
  for (const stream of STREAMS) {
    const info = await w.rpc("streams", `stream:${stream}`, "getInfo", []);
    const tail = info.tailIndex;
    assert.ok(tail >= acked.chunks.get(stream), `round ${round}: ${stream} lost acknowledged chunks (tail ${tail})`);
    let next = 0;
    while (next <= tail) {
      const page = await w.rpc("streams", `stream:${stream}`, "getChunks", [{ startIndex: next, limit: 64 }]);
      assert.ok(page.chunks.length > 0, `round ${round}: ${stream} chunk ${next} unreadable`);
      for (const chunk of page.chunks) {
        assert.deepEqual(Buffer.from(chunk), Buffer.from(chunkBytes(stream, next)), `round ${round}: ${stream} chunk ${next}`);
        next++;
      }
    }
    assert.equal(next, tail + 1);
    const registered = await w.rpc("streams", `run-streams:${RUNS[0]}`, "listStreams", []);
    if (tail >= 0) assert.ok(registered.includes(stream), `round ${round}: ${stream} written but not registered`);
  }
  for (const [key, value] of acked.index) {
    assert.equal(await c.ix("get", [key]), value, `round ${round}: index ${key}`);
  }
  // Queue: every acknowledged message is still there (its idempotency key dedups).
  const before = await w.rpc("queue", "q:0", "stats", []);
  let created = 0;
  for (const key of acked.attemptedMessages) {
    const out = await c.enqueue(message(key));
    assert.equal(out.ok, true);
    if (acked.messages.has(key)) assert.equal(out.deduped, true, `round ${round}: acknowledged message ${key} is missing`);
    if (!out.deduped) created++;
    acked.messages.add(key);
  }
  const after = await w.rpc("queue", "q:0", "stats", []);
  assert.equal(after.pending, before.pending + created, `round ${round}: queue pending count vs messages`);
  assert.equal(after.inflight, 0);
}

function message(key) {
  return { messageId: `msg-${key}`, queueName: "__wkf_workflow_crash", body: JSON.stringify({ key }), runId: RUNS[0], idempotencyKey: key, delaySeconds: 3600, targetBaseUrl: DEAD_TARGET };
}

/** One burst: four concurrent writers until `signal.stop`. Returns how many writes were acknowledged. */
async function burst(w, round, signal) {
  const c = worldClient(w.rpc);
  let count = 0;
  const record = (runId, out) => {
    if (out?.event) acked.events.get(runId).push({ eventId: out.event.eventId, eventType: out.event.eventType, correlationId: out.event.correlationId });
    count++;
    signal.progress++;
  };
  const runWriter = async (runId, r) => {
    const run = (await w.rpc("runs", runId, "getRun", [])).value;
    if (!run) record(runId, await c.createEvent(runId, { eventType: "run_created", specVersion: 6, eventData: { deploymentId: "dep", workflowName: "wf-crash", input: new Uint8Array([r]) } }));
    if (!run || run.status === "pending") record(runId, await c.createEvent(runId, { eventType: "run_started", specVersion: 6 }, { skipPreload: true }));
    for (let i = 0; !signal.stop; i++) {
      const step = `r${round}s${i}`;
      for (const [eventType, eventData] of [
        ["step_created", { stepName: "st", input: new Uint8Array([i & 255]) }],
        ["step_started", { attempt: 1 }],
        ["step_completed", { result: new Uint8Array([1, i & 255]) }],
      ]) {
        if (signal.stop) return;
        record(runId, await c.createEvent(runId, { eventType, specVersion: 6, correlationId: step, eventData }));
      }
    }
  };
  const streamWriter = async (stream) => {
    let next = (await w.rpc("streams", `stream:${stream}`, "getInfo", [])).tailIndex + 1;
    while (!signal.stop) {
      const index = await c.writeToStream(RUNS[0], stream, chunkBytes(stream, next));
      assert.equal(index, next, `${stream}: the next chunk takes the next index`);
      acked.chunks.set(stream, index);
      next++;
      count++;
      signal.progress++;
    }
  };
  const indexWriter = async () => {
    for (let i = 0; !signal.stop; i++) {
      const key = `crash:${round}:${i}`;
      await c.ix("put", [key, `v${round}:${i}`]);
      acked.index.set(key, `v${round}:${i}`);
      count++;
      signal.progress++;
    }
  };
  const queueWriter = async () => {
    for (let i = 0; !signal.stop; i++) {
      const key = `ik-${round}-${i}`;
      acked.attemptedMessages.add(key);
      const out = await c.enqueue(message(key));
      assert.equal(out.ok, true);
      acked.messages.add(key);
      count++;
      signal.progress++;
    }
  };
  const writers = [...RUNS.map((r, i) => runWriter(r, i)), ...STREAMS.map(streamWriter), indexWriter(), queueWriter()];
  // A writer stops at its first failure (the runtime died); a wrong answer fails the test.
  const results = await Promise.allSettled(writers);
  for (const r of results) {
    if (r.status === "rejected" && r.reason instanceof assert.AssertionError) throw r.reason;
  }
  return count;
}

test("crash consistency: SIGKILL of workerd mid-burst at several points loses no acknowledged write", { timeout: 120_000, skip: !existsSync(SCRIPT_PATH) && "build/index.js missing (npm run build)" }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "celld-crash-"));
  const started = Date.now();
  let w;
  try {
    for (let round = 0; round <= KILL_AFTER.length; round++) {
      w = await startWorker({ persistDir: dir });
      await verify(w, round);
      if (round === KILL_AFTER.length) break;
      const pids = workerdChildren();
      assert.equal(pids.length, 1, `one workerd child expected, found ${pids}`);
      const signal = { stop: false, progress: 0 };
      const running = burst(w, round, signal);
      for (const deadline = Date.now() + 20_000; signal.progress === 0 && Date.now() < deadline; ) await sleep(5);
      await sleep(KILL_AFTER[round]);
      process.kill(pids[0], "SIGKILL");
      signal.stop = true;
      const n = await running;
      console.log(`# round ${round}: workerd killed ${KILL_AFTER[round]} ms into the burst, after ${n} acknowledged writes`);
      assert.ok(n > 0, "the burst made progress before the kill");
      await withTimeout(w.dispose(), 5000);
      w = undefined;
    }
    const events = [...acked.events.values()].reduce((a, e) => a + e.length, 0);
    console.log(
      `# ${KILL_AFTER.length} kills in ${((Date.now() - started) / 1000).toFixed(1)} s: verified ${events} events, ` +
        `${[...acked.chunks.values()].reduce((a, t) => a + t + 1, 0)} chunks, ${acked.index.size} index values, ${acked.messages.size} messages`,
    );
  } finally {
    if (w) await withTimeout(w.dispose(), 5000);
    rmSync(dir, { recursive: true, force: true });
  }
});

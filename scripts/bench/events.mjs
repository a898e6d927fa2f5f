// Workload "events": 50 runs, each `run_created` then 31 appended events (run_started and
// ten step_created/step_started/step_completed triples), 8 runs in parallel; then a full
// read-back of every run's events through listEvents, verified. Each event is what the
// real client sends for it (tests/lib/world-client.mjs createEvent): applyEvent, then the
// index writes (run_created: two putOwned; events with a correlationId: one putOwned).

import { latencySummary, pool } from "./stats.mjs";
import { worldClient } from "../../tests/lib/world-client.mjs";

const RUNS = 50;
const PARALLEL = 8;
const STEPS = 10;

export async function eventsWorkload(worker) {
  const latencies = [];
  let requests = 0;
  const counted = (...a) => (requests++, worker.rpc(...a));
  counted.raw = (...a) => (requests++, worker.rpc.raw(...a));
  const client = worldClient(counted);
  const tag = Date.now().toString(36);
  const runIds = Array.from({ length: RUNS }, (_, i) => `wrun_bench_${tag}_${i}`);
  const append = async (runId, eventType, extra) => {
    const t0 = performance.now();
    const out = await client.createEvent(runId, { eventType, specVersion: 6, ...extra });
    latencies.push(performance.now() - t0);
    if (!out || out.ok !== true) throw new Error(`${eventType} on ${runId} failed: ${JSON.stringify(out)}`);
    return out;
  };
  const input = new Uint8Array(64).fill(7);
  const started = performance.now();
  await pool(RUNS, PARALLEL, async (i) => {
    const runId = runIds[i];
    await append(runId, "run_created", { eventData: { deploymentId: "bench", workflowName: "bench", input } });
    await append(runId, "run_started", {});
    for (let s = 0; s < STEPS; s++) {
      const correlationId = `step_${s}`;
      await append(runId, "step_created", { correlationId, eventData: { stepName: "work", input } });
      await append(runId, "step_started", { correlationId });
      await append(runId, "step_completed", { correlationId, eventData: { result: input } });
    }
  });
  const seconds = (performance.now() - started) / 1000;
  const total = latencies.length;
  const sent = requests;

  // Read back and verify: dense ids, order, types.
  let verified = 0;
  for (const runId of runIds) {
    const events = [];
    let cursor;
    for (;;) {
      const page = await worker.rpc("runs", runId, "listEvents", [{ limit: 100, cursor, sortOrder: "asc" }]);
      if (!page.ok) throw new Error(`listEvents ${runId}: ${JSON.stringify(page)}`);
      events.push(...page.value.data);
      if (!page.value.hasMore) break;
      cursor = page.value.cursor;
    }
    if (events.length !== 2 + 3 * STEPS) throw new Error(`${runId}: ${events.length} events read back`);
    events.forEach((e, i) => {
      const want = `evnt_${String(i + 1).padStart(26, "0")}`;
      if (e.eventId !== want) throw new Error(`${runId}: event ${i} has id ${e.eventId}, want ${want}`);
    });
    verified += events.length;
  }
  return [
    `events: ${total} events (client sequence: ${sent} requests) over ${RUNS} runs (${PARALLEL} in parallel) in ${seconds.toFixed(2)} s = ${(total / seconds).toFixed(0)} events/s`,
    `events: createEvent latency ${latencySummary(latencies)}`,
    `events: read back and verified ${verified} events (dense ids, order)`,
  ];
}

// The 0.4 wire bench's client side (tests/conformance/bench/wire.mjs starts it): the real
// world-celld 0.4.0 client on Node 22, against the server named by CELLD_FLEET_URL and
// CELLD_WORLD_SECRET. Runs one workload (WIRE_WORKLOAD) and prints its figures as one JSON
// line on stdout:
//
//   events         50 runs (8 at a time), each run_created, run_started, ten
//                  step_created/step_started/step_completed triples and run_completed, through
//                  world.events.create (the client's whole sequence: applyEvent, and the index
//                  commit of a run-carrying outcome); every run's log read back and checked
//   streams        8 streams at once, 64 chunks of 64 KiB each: written one chunk per
//                  request (streams.write), closed, then read to the end (streams.get)
//   streams-batch  the same chunks written 32 per request (streams.writeMulti)
//
// Figures: events/s and the latency percentiles of events.create; MiB/s written and read.

import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { percentile, pool } from "../../../scripts/bench/stats.mjs";

const PROFILE_DIR = process.env.WIRE_PROFILE_DIR;
const { createCelldWorld } = await import(pathToFileURL(join(PROFILE_DIR, "node_modules", "world-celld-0.4", "dist", "index.js")).href);
const world = createCelldWorld({ fleetUrl: process.env.CELLD_FLEET_URL, secret: process.env.CELLD_WORLD_SECRET });

// WIRE_SCALE=small: a few runs and chunks (the bench's own test).
const small = process.env.WIRE_SCALE === "small";
const RUNS = small ? 4 : 50;
const PARALLEL = 8;
const STEPS = small ? 2 : 10;
const STREAMS = small ? 2 : 8;
const CHUNKS = small ? 32 : 64;
const CHUNK_BYTES = 64 * 1024;
const BATCH = 32;

async function events() {
  const latencies = [];
  const input = new Uint8Array(64).fill(7);
  const create = async (runId, data) => {
    const t0 = performance.now();
    const out = await world.events.create(runId, { specVersion: 6, ...data });
    latencies.push(performance.now() - t0);
    return out;
  };
  const runIds = [];
  const started = performance.now();
  await pool(RUNS, PARALLEL, async (i) => {
    const created = await create("", { eventType: "run_created", eventData: { deploymentId: "bench", workflowName: "bench", input } });
    const runId = created.run.runId;
    runIds[i] = runId;
    await create(runId, { eventType: "run_started" });
    for (let s = 0; s < STEPS; s++) {
      const correlationId = `step_${s}`;
      await create(runId, { eventType: "step_created", correlationId, eventData: { stepName: "work", input } });
      await create(runId, { eventType: "step_started", correlationId });
      await create(runId, { eventType: "step_completed", correlationId, eventData: { result: input } });
    }
    await create(runId, { eventType: "run_completed", eventData: { output: input } });
  });
  const seconds = (performance.now() - started) / 1000;
  for (const runId of runIds) {
    const page = await world.events.list({ runId, pagination: { limit: 1000, sortOrder: "asc" } });
    const want = 3 + 3 * STEPS;
    if (page.data.length !== want) throw new Error(`${runId}: ${page.data.length} events read back, want ${want}`);
  }
  latencies.sort((a, b) => a - b);
  return { events: latencies.length, seconds, perSecond: latencies.length / seconds, p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
}

async function streams(batched) {
  const chunk = (s, c) => new Uint8Array(CHUNK_BYTES).fill((s * 31 + c) % 251);
  const tag = `${Date.now().toString(36)}_${batched ? "b" : "u"}`;
  const runId = `wrun_wire_${tag}`;
  const names = Array.from({ length: STREAMS }, (_, s) => `wire_${tag}_${s}`);
  const mib = (STREAMS * CHUNKS * CHUNK_BYTES) / (1024 * 1024);
  let t0 = performance.now();
  await Promise.all(
    names.map(async (name, s) => {
      if (batched) {
        for (let c = 0; c < CHUNKS; c += BATCH) {
          await world.streams.writeMulti(runId, name, Array.from({ length: BATCH }, (_, k) => chunk(s, c + k)));
        }
      } else {
        for (let c = 0; c < CHUNKS; c++) await world.streams.write(runId, name, chunk(s, c));
      }
      await world.streams.close(runId, name);
    }),
  );
  const writeSeconds = (performance.now() - t0) / 1000;
  t0 = performance.now();
  await Promise.all(
    names.map(async (name, s) => {
      const reader = (await world.streams.get(runId, name, 0)).getReader();
      let c = 0;
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        const want = chunk(s, c);
        if (value.byteLength !== CHUNK_BYTES || value[0] !== want[0] || value[CHUNK_BYTES - 1] !== want[0]) throw new Error(`${name}: chunk ${c} differs`);
        c++;
      }
      if (c !== CHUNKS) throw new Error(`${name}: read ${c} chunks, want ${CHUNKS}`);
    }),
  );
  const readSeconds = (performance.now() - t0) / 1000;
  return { mib, writeSeconds, readSeconds, writeMiBps: mib / writeSeconds, readMiBps: mib / readSeconds };
}

const workload = process.env.WIRE_WORKLOAD;
const result = workload === "events" ? await events() : workload === "streams" ? await streams(false) : workload === "streams-batch" ? await streams(true) : null;
if (!result) throw new Error(`unknown WIRE_WORKLOAD ${workload}`);
console.log(JSON.stringify(result));

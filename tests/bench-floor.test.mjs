// The floor of `npm run bench:cpu -- --floor` (scripts/bench/floor/index.js) serves every
// workload it claims, with answers the workloads accept, and so does the build: a few
// operations of each `FLOOR_WORKLOADS` workload, its setup and its check, on both. A floor
// that no longer answered what the workloads expect would fail the benchmark instead of
// measuring it. Every other workload runs a few operations on the build alike.

import { test } from "node:test";
import assert from "node:assert/strict";
import { startWorker } from "./lib/harness.mjs";
import { CPU_WORKLOADS, FLOOR_SCRIPT, FLOOR_WORKLOADS, drive, workloadContext } from "../scripts/bench/cpu.mjs";

const OPS_PER_LANE = 6;
const LANES = 2;

async function runWorkloads(scriptPath, names = FLOOR_WORKLOADS) {
  const worker = await startWorker({ vars: { WORLD_SECRET: "bench-secret" }, scriptPath });
  const ctx = workloadContext(worker, null, undefined);
  try {
    const notes = {};
    for (const name of names) {
      const w = CPU_WORKLOADS[name];
      ctx.state = { perLane: OPS_PER_LANE };
      if (w.setup) await w.setup(ctx);
      const latencies = await drive(ctx, w, LANES, OPS_PER_LANE, "run");
      assert.equal(latencies.length, LANES * OPS_PER_LANE, name);
      notes[name] = w.check ? await w.check(ctx) : "";
    }
    return notes;
  } finally {
    for (const close of ctx.cleanups) await close();
    await worker.dispose();
  }
}

test("the floor serves the floor workloads as the workloads expect", async () => {
  const notes = await runWorkloads(FLOOR_SCRIPT);
  assert.equal(notes.event, `${LANES * OPS_PER_LANE} events read back`);
  assert.match(notes.enqueue, /^\d+ pending$/);
});

test("the build serves the floor workloads alike", async () => {
  const notes = await runWorkloads(undefined);
  assert.equal(notes.event, `${LANES * OPS_PER_LANE} events read back`);
  assert.match(notes.enqueue, /^\d+ pending$/);
});

test("the build serves every other workload of bench:cpu", async () => {
  const others = Object.keys(CPU_WORKLOADS).filter((n) => !FLOOR_WORKLOADS.includes(n));
  assert.ok(others.includes("run040") && others.includes("runHook040"), others.join());
  const notes = await runWorkloads(undefined, others);
  assert.deepEqual(Object.keys(notes), others);
});

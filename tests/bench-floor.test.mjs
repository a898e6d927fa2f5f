// The floor of `npm run bench:cpu -- --floor` (scripts/bench/floor/index.js) serves every
// workload it claims, with answers the workloads accept, and so does the build: a few
// operations of each `FLOOR_WORKLOADS` workload, its setup and its check, on both. A floor
// that no longer answered what the workloads expect would fail the benchmark instead of
// measuring it. Every other workload runs a few operations on the build alike.

import { test } from "node:test";
import assert from "node:assert/strict";
import { startWorker } from "./lib/harness.mjs";
import { CPU_WORKLOADS, FLOOR_SCRIPT, FLOOR_WORKLOADS, drive, interleavedRun, workloadContext } from "../scripts/bench/cpu.mjs";
import { SCRIPT_PATH } from "./lib/harness.mjs";

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

test("--max-steal measures a round of slices again while the host's steal is over the limit, at most 3 times, and keeps only the round it measured last", { skip: process.platform !== "linux" && "reads /proc" }, async () => {
  // The rounds' host counters, faked: each round reads them before and after; a round
  // listed as stolen sees 50 % steal. Rounds in order: health slice 1 (stolen four times:
  // redone three times, then kept over the limit), health slice 2, event slice 1 (stolen
  // once), event slice 2, health (again) slices 1 and 2.
  const stolen = [true, true, true, true, false, true, false, false, false, false];
  let calls = 0;
  let steal = 0;
  let total = 0;
  const hostCpu = () => {
    total += 100;
    if (calls++ % 2 === 1 && stolen.shift()) steal += 50;
    return { steal, total };
  };
  const opts = { concurrency: 2, slices: 2, opsOverride: 8, maxSteal: 2, hostCpu };
  const [run] = await interleavedRun([{ label: "A", script: SCRIPT_PATH }], ["event"], opts);
  assert.equal(stolen.length, 0, "every round read the counters");
  const { health, event } = run.workloads;
  const again = run.workloads["health (again)"];
  assert.equal(health.redoneSlices, 3);
  assert.deepEqual(health.slices.map((x) => x.stealPct), [50, 0]);
  assert.equal(event.redoneSlices, 1);
  assert.deepEqual(event.slices.map((x) => x.stealPct), [0, 0]);
  assert.equal(again.redoneSlices, 0);
  // The figures are the kept rounds' (2 × 2 lanes × 2 operations), the check counts every
  // event written (one more round of 2 per lane).
  assert.equal(event.ops, 8);
  assert.equal(event.note, "12 events read back");
});

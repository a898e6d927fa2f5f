// Workload "index": the sharded index under the 0.3 client's call sequences (issue #9).
// N runs in parallel (N = 64 by default, BENCH_INDEX_RUNS to change), each doing what the
// 0.3.0 client does: every applyEvent followed by its `index` calls — `putOwned` of the two
// run keys on each run status change and of a `correlation:` key per event with a
// correlationId — and one hook (reserveHookToken, hook_created, finalizeHookIndexes,
// hook_disposed, deleteHookIndexes). Before the workload a cron tick runs the (empty)
// archive migration, as on a fresh deployment, so the facade stops consulting the archive.
//
// Reports events/s and the distribution of the index calls over the Durable Object
// instances that serve them. The instance of each call is the facade table's
// (src/facade/mod.rs, tested case by case): FNV-1a-32 of the runId / token / hookId picks
// the shard; the run DO lifecycle checks are counted separately (they land on the run's
// own instance). Figures, not assertions — except that every call must succeed.

import { latencySummary, pool } from "./stats.mjs";

const RUNS = Number(process.env.BENCH_INDEX_RUNS) || 64;
const STEPS = 8;

function fnv1a32(text) {
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(text)) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  return hash;
}
const hex = (n) => n.toString(16).padStart(2, "0");
const catalog = (runId) => `run-catalog:v1:${hex(fnv1a32(runId) % 16)}`;
const tokenShard = (token) => `hook-token:v1:${hex(fnv1a32(token) % 32)}`;
const idShard = (hookId) => `hook-id:v1:${hex(fnv1a32(hookId) % 32)}`;

export async function indexWorkload(worker) {
  await (await worker.mf.getWorker()).scheduled({ cron: "*/10 * * * *" });
  const counts = new Map();
  const hit = (instance) => counts.set(instance, (counts.get(instance) ?? 0) + 1);
  let lifecycle = 0;
  const latencies = [];
  let events = 0;
  let indexCalls = 0;
  const tag = Date.now().toString(36);

  const ix = async (method, args, instances) => {
    const t0 = performance.now();
    await worker.rpc("index", "index", method, args);
    latencies.push(performance.now() - t0);
    indexCalls++;
    instances.forEach(hit);
  };
  const apply = async (runId, data, extra = {}) => {
    const out = await worker.rpc("runs", runId, "applyEvent", [
      { runId, data: { specVersion: 6, ...data }, ...extra, cleanup: { retentionMs: 0, queueShards: 1 } },
    ]);
    if (!out || out.ok !== true) throw new Error(`${data.eventType} on ${runId}: ${JSON.stringify(out)}`);
    events++;
    return out;
  };
  const ms13 = (d) => String(d.getTime()).padStart(13, "0");

  const started = performance.now();
  await pool(RUNS, RUNS, async (i) => {
    const runId = `wrun_ix_${tag}_${i}`;
    const home = catalog(runId);
    let run;
    const publishRun = async () => {
      const meta = JSON.stringify({ runId, status: run.status });
      for (const key of [`run:bench:${ms13(run.createdAt)}:${runId}`, `runall:${ms13(run.createdAt)}:${runId}`]) {
        lifecycle++;
        await ix("putOwned", [runId, key, meta], [home]);
      }
    };
    const correlate = async (out) => {
      const e = out.event;
      const key = `correlation:${encodeURIComponent(e.correlationId)}:${ms13(e.createdAt)}:${e.eventId}:${runId}`;
      await ix("putOwned", [runId, key, JSON.stringify({ runId, eventId: e.eventId })], [home]);
    };
    const input = new Uint8Array(32).fill(i & 255);
    run = (await apply(runId, { eventType: "run_created", eventData: { deploymentId: "bench", workflowName: "bench", input } })).run;
    await publishRun();
    run = (await apply(runId, { eventType: "run_started" }, { params: { skipPreload: true } })).run;
    await publishRun();
    for (let s = 0; s < STEPS; s++) {
      const correlationId = `step_${s}`;
      await correlate(await apply(runId, { eventType: "step_created", correlationId, eventData: { stepName: "work", input } }));
      await correlate(await apply(runId, { eventType: "step_started", correlationId }));
      await correlate(await apply(runId, { eventType: "step_completed", correlationId, eventData: { result: input } }));
    }
    // One hook.
    const token = `tok_${tag}_${i}`;
    const hookId = `hook_${i}`;
    const owner = { runId, hookId };
    await ix("reserveHookToken", [token, owner], [tokenShard(token), idShard(hookId)]);
    const created = await apply(runId, { eventType: "hook_created", correlationId: hookId, eventData: { token } }, { tokenHolder: null });
    await correlate(created);
    lifecycle += 3; // the facade's check, and each shard's
    await ix("finalizeHookIndexes", [token, hookId, JSON.stringify({ runId, hookId, token }), owner], [tokenShard(token), idShard(hookId)]);
    await correlate(await apply(runId, { eventType: "hook_disposed", correlationId: hookId }));
    await ix("deleteHookIndexes", [token, hookId, owner], [tokenShard(token), idShard(hookId)]);
    run = (await apply(runId, { eventType: "run_completed", eventData: { output: input } })).run;
    await publishRun();
  });
  const seconds = (performance.now() - started) / 1000;

  // Read back: every run lists.
  let listed = 0;
  let cursor;
  for (;;) {
    const page = await worker.rpc("index", "index", "list", [{ prefix: `runall:`, cursor }]);
    listed += page.keys.filter((k) => k.name.includes(`wrun_ix_${tag}_`)).length;
    if (page.list_complete) break;
    cursor = page.cursor;
  }
  if (listed !== RUNS) throw new Error(`${listed} of ${RUNS} runs listed`);

  const total = [...counts.values()].reduce((a, b) => a + b, 0);
  const sorted = [...counts.entries()].sort((a, b) => b[1] - a[1]);
  const [busiest, most] = sorted[0];
  const share = (n) => `${((100 * n) / total).toFixed(1)}%`;
  const family = (prefix) => sorted.filter(([k]) => k.startsWith(prefix));
  const spread = (prefix) => {
    const f = family(prefix);
    const v = f.map(([, n]) => n);
    return `${f.length} instances, ${Math.min(...v)}–${Math.max(...v)} calls each`;
  };
  return [
    `index: ${RUNS} runs in parallel, ${events} events and ${indexCalls} index calls in ${seconds.toFixed(2)} s = ${(events / seconds).toFixed(0)} events/s, ${(indexCalls / seconds).toFixed(0)} index calls/s`,
    `index: index call latency ${latencySummary(latencies)}`,
    `index: ${total} shard calls — catalog ${spread("run-catalog:")}; hook tokens ${spread("hook-token:")}; hook ids ${spread("hook-id:")}; archive 0 (migration done); plus ${lifecycle} run-DO lifecycle checks on the runs' own instances`,
    `index: busiest instance ${busiest} with ${most} calls = ${share(most)} of the index calls (limit asked: 12.5%)`,
    `index: ${listed} runs listed back through the facade`,
  ];
}

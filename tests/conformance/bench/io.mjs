// The I/O bench (npm run bench -- io): K workflows started together whose steps wait on the
// outside world (a timer in the step body, bench/workflows/io.ts), through a real
// world-celld client and the Workflow runtime, on three Worlds in turn within one run:
//
//   ours        the built worker (lib/workers.mjs startServer "ours", default variables)
//   reference   the TypeScript reference worker of the same client generation
//   local       @workflow/world-local: the same app on the in-process World (its own queue
//               delivers to the app by HTTP; the same for either client, so it runs once)
//
// Scenarios (full scale):
//   seq      100 workflows of 3 sequential 1 s steps, started together
//   par      one workflow with a Promise.all of 100 1 s steps
//   refuse   `seq` against an app that answers 429 (Retry-After: 1) to any delivery above
//            20 concurrent
//
// Every delivery goes straight to the app, as a user runs it: world-local's to the app's own
// port (its default), a client's to WORKFLOW_BASE_URL, the app's address. The app counts them
// itself (lib/app-server.mjs GET /deliveries: open at once, refused, failed), an increment
// and a push in the process that serves them, and refuses above the scenario's limit there
// (BENCH_DELIVERY_LIMIT, 429 before the runtime sees it). A proxy of this process used to do
// that, and slowed world-local to about half its speed (docs/performance.md, "The I/O
// bench's instrument"). Each World gets a fresh server and app per scenario (a queue's pace
// lives in its memory), warmed up by one 1-step workflow.
//
// Per World and scenario: the slowest run (completedAt − createdAt, the World's clock),
// p50, the makespan (first createdAt → last completedAt), deliveries accepted per second
// of makespan, the most concurrent deliveries at the app, refused (429), failed deliveries
// (answered 5xx by the app), dead letters (ours and the reference: the queue
// shard's), step bodies run more than once, and for ours deliveryStats() of the queue
// shard's partitions and their couriers (q:0, q:0~1, …, q:0~3#courier:0, …; every
// peakConnections must be <= 6).
// Every run is checked: completed, with its expected output. A wrong run throws.

import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { hostCpu, stealPct } from "../../../scripts/bench/proc.mjs";
import { percentile } from "../../../scripts/bench/stats.mjs";
import { rpc } from "../../lib/rpc.mjs";
import { startApp } from "../lib/app.mjs";
import { buildApp, CLIENTS, ensureProfile, PROFILES } from "../lib/profile.mjs";
import { clientsArg, flagValue, profileArg, varArg } from "../../../scripts/bench/args.mjs";
import { processCpuMs, startServer } from "../lib/workers.mjs";

export const WORKFLOWS_DIR = fileURLToPath(new URL("./workflows", import.meta.url));
export const FILE = "workflows/io.ts";
export const WORLDS = ["ours", "reference", "local"];
export const SHARD = "q:0";
export const COURIERS = 26;
/** The platform's limit of outgoing connections waiting for headers per invocation. */
export const MAX_CONNECTIONS = 6;
/** The reference's (and the floor's) concurrent deliveries per shard. */
export const REFERENCE_INFLIGHT = 5;

/** The scenarios at each scale. `limit`: the app refuses (429) deliveries above it (null: never). */
export const SCALES = {
  full: [
    { name: "seq", label: "100 × 3 sequential 1 s steps", workflow: "ioSequential", workflows: 100, steps: 3, ms: 1000, limit: null },
    { name: "par", label: "Promise.all of 100 1 s steps", workflow: "ioParallel", workflows: 1, steps: 100, ms: 1000, limit: null },
    { name: "refuse", label: "100 × 3 sequential 1 s steps, app refuses above 20", workflow: "ioSequential", workflows: 100, steps: 3, ms: 1000, limit: 20 },
  ],
  small: [{ name: "seq-small", label: "10 × 2 sequential 300 ms steps", workflow: "ioSequential", workflows: 10, steps: 2, ms: 300, limit: null }],
};

/** What a workflow of io.ts returns: `${tag}:${1 + … + steps}`. */
export function expectedOutput(tag, steps) {
  return `${tag}:${(steps * (steps + 1)) / 2}`;
}

/**
 * The time a sequential scenario takes when the World runs `inflight` deliveries at a time
 * (each workflow's steps run inside one delivery): ceil(workflows / inflight) waves of
 * steps × ms.
 */
export function sequentialAt(s, inflight = REFERENCE_INFLIGHT) {
  return Math.ceil(s.workflows / inflight) * s.steps * s.ms;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Builds (or reuses) the I/O bench's app of a profile (its own directory: .bench-io). */
export function ioApp(profile) {
  ensureProfile(profile);
  return buildApp(profile, ".bench-io", { template: null, workflowsDir: WORKFLOWS_DIR });
}

/**
 * One World, fresh: its server (none for local) and the app on it, refusing above the
 * scenario's limit (`limit`, null: never). `oursVars`: variables of our worker.
 */
async function startWorld({ world, client, profile, dir, limit, oursVars = {}, uncounted = false }) {
  const counting = { ...(limit ? { BENCH_DELIVERY_LIMIT: String(limit) } : {}), ...(uncounted ? { BENCH_COUNT_DELIVERIES: "0" } : {}) };
  let server = null;
  let app = null;
  let dataDir = null;
  try {
    if (world === "local") {
      dataDir = mkdtempSync(join(os.tmpdir(), "io-bench-local-"));
      app = await startApp({
        profile,
        dir,
        client,
        server: { env: {} },
        worldModule: "@workflow/world-local",
        env: { WORKFLOW_LOCAL_DATA_DIR: dataDir, ...counting },
      });
    } else {
      server = await startServer({ server: world, client, profile, vars: world === "ours" ? oursVars : {} });
      app = await startApp({ profile, dir, client, server, env: { WORKFLOW_BASE_URL: "self", ...counting } });
    }
  } catch (err) {
    await server?.dispose().catch(() => {});
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
  return {
    world,
    client,
    server,
    app,
    async stop() {
      await app.stop().catch(() => {});
      await server?.dispose().catch(() => {});
      if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * The queue instances of client shard `SHARD` under the worker variables `vars` (as
 * src/config.rs reads them): its partitions (`q:0`, `q:0~1`, …; QUEUE_PARTITIONS, default
 * 16, at most QUEUE_MAX_INFLIGHT) and the couriers each may wake for its share of
 * QUEUE_MAX_INFLIGHT (src/queue/pace.rs: six deliveries a courier).
 */
export function queueInstances(vars = {}) {
  const maxInflight = Number(vars.QUEUE_MAX_INFLIGHT) || 128;
  const partitions = Math.min(Number(vars.QUEUE_PARTITIONS) || 16, maxInflight);
  const out = [];
  for (let p = 0; p < partitions; p++) {
    const name = p === 0 ? SHARD : `${SHARD}~${p}`;
    const share = Math.ceil(maxInflight / partitions);
    out.push(name, ...Array.from({ length: Math.min(COURIERS, Math.ceil(share / 6)) }, (_, i) => `${name}#courier:${i}`));
  }
  return out;
}

/** deliveryStats() of our queue shard's partitions and every courier they may use. */
export async function gateStats(server, vars = {}) {
  const ns = await server.mf.getDurableObjectNamespace("WORKFLOW_QUEUE");
  const out = {};
  for (const name of queueInstances(vars)) out[name] = await ns.get(ns.idFromName(name)).deliveryStats();
  return out;
}

/** Whether an instance named in gateStats() is a courier. */
export const isCourier = (name) => name.includes("#courier:");

/** The partitions' counters of a gateStats() answer as one: deliveries summed, the pace summed, the peak the highest. */
export function partitionsTotal(stats) {
  const parts = Object.entries(stats).filter(([n]) => !isCourier(n)).map(([, x]) => x);
  const sum = (k) => parts.reduce((n, x) => n + (x[k] ?? 0), 0);
  return { partitions: parts.length, direct: sum("direct"), lent: sum("lent"), pace: sum("pace"), peakConnections: Math.max(0, ...parts.map((x) => x.peakConnections ?? 0)) };
}

/** The queue shard's pending/inflight/dead letters (ours: its RPC route; reference: its Durable Object). */
async function queueState(side) {
  if (side.world === "ours") {
    const target = { url: side.server.url, secret: side.server.secret };
    const stats = await rpc(target, "queue", SHARD, "stats", []);
    const dead = await rpc(target, "queue", SHARD, "listDeadLetters", []);
    return { pending: stats.pending, inflight: stats.inflight, deadLetters: dead.data.length };
  }
  if (side.world === "reference") {
    const ns = await side.server.mf.getDurableObjectNamespace("WORKFLOW_QUEUE");
    const stub = ns.get(ns.idFromName(SHARD));
    const stats = await stub.stats();
    return { pending: stats.pending, inflight: stats.inflight, deadLetters: stats.deadLetters };
  }
  return null;
}

const TERMINAL = new Set(["run_completed", "run_failed", "run_cancelled"]);

/**
 * Waits until every run is terminal. Through a world-celld client it reads the app's trace
 * (the terminal event's request answered), so waiting adds no request to the server; on
 * world-local it reads the runs (in-process). Then the records.
 */
export async function waitAll(side, runIds, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  const pending = new Set(runIds);
  while (pending.size > 0) {
    if (Date.now() > deadline) throw new Error(`${pending.size} of ${runIds.length} runs not finished after ${timeoutMs} ms (e.g. ${[...pending][0]})`);
    if (side.world === "local") {
      for (const id of [...pending]) {
        const r = await side.app.run(id).catch(() => null);
        if (r && r.status !== "pending" && r.status !== "running") pending.delete(id);
      }
    } else {
      const trace = await side.app.trace();
      for (const e of trace) if (e.kind === "request" && TERMINAL.has(e.eventType) && e.status >= 200 && e.status < 300 && e.ok !== false) pending.delete(e.runId);
    }
    if (pending.size > 0) await sleep(200);
  }
  return Promise.all(runIds.map((id) => side.app.run(id)));
}

/**
 * Where a burst's time went, from the client's requests (the app's trace; ms from the
 * start): when the last step_completed was answered, when the first and the accepted
 * run_completed were sent, and per request kind the time spent waiting on the server (sum
 * of durations) and the most open at once.
 */
export function tracePhases(trace, t0) {
  const reqs = trace.filter((e) => e.kind === "request" && e.end > 0);
  const rel = (ms) => (Number.isFinite(ms) ? Math.round(ms - t0) : null);
  const ends = (type) => reqs.filter((e) => e.eventType === type).map((e) => e.end);
  const completed = reqs.filter((e) => e.eventType === "run_completed");
  const byKind = {};
  for (const e of reqs) {
    const k = e.path.includes("/listEvents") ? "listEvents" : e.eventType || e.path.replace(/\/wrun_[0-9A-Za-z]+/, "").replace(/^\/v1\/(rpc\/)?/, "").replace(/\/q%3A\d+/, "");
    (byKind[k] ||= []).push([e.start, e.end]);
  }
  const waits = {};
  for (const [k, iv] of Object.entries(byKind)) {
    const d = iv.map(([a, b]) => b - a).sort((x, y) => x - y);
    waits[k] = { n: d.length, sumMs: Math.round(d.reduce((a, b) => a + b, 0)), p50Ms: Math.round(d[d.length >> 1]), maxMs: Math.round(d.at(-1)), peakOpen: peakOpen(iv) };
  }
  return {
    lastStepCompletedMs: rel(Math.max(...ends("step_completed"))),
    firstRunCompletedSentMs: rel(Math.min(...completed.map((e) => e.start))),
    runCompletedAcceptedMs: rel(Math.min(...completed.filter((e) => e.ok === true).map((e) => e.end))),
    runCompletedAttempts: completed.length,
    waits,
  };
}

/** The most intervals [a, b) open at once. */
function peakOpen(intervals) {
  const edges = intervals.flatMap(([a, b]) => [
    [a, 1],
    [b, -1],
  ]);
  edges.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  let open = 0;
  let peak = 0;
  for (const [, step] of edges) peak = Math.max(peak, (open += step));
  return peak;
}

const COUNTERS = ["queuedConnections", "connections", "direct", "lent"];
function statsDelta(before, after) {
  const out = {};
  for (const [name, a] of Object.entries(after)) {
    const b = before[name] || {};
    const o = { ...a };
    for (const k of COUNTERS) o[k] = (a[k] ?? 0) - (b[k] ?? 0);
    out[name] = o;
  }
  return out;
}

/** One scenario on one fresh World: warm-up, K workflows started together, checks, figures. */
export async function runScenario({ world, client, profile, dir, scenario: s, oursVars = {}, uncounted = false, timeoutMs = 240_000, log = () => {} }) {
  const side = await startWorld({ world, client, profile, dir, limit: s.limit, oursVars, uncounted });
  try {
    // Warm-up: one 1-step workflow (compiles the worker's and the runtime's code paths).
    const warmTag = `warm-${world}-${Date.now()}`;
    const { runId: warmId } = await side.app.start(FILE, "ioSequential", [warmTag, 1, 1]);
    const [warm] = await waitAll(side, [warmId], 60_000);
    if (warm.status !== "completed") throw new Error(`${world}: warm-up run ${warmId} ${warm.status}`);
    await sleep(100);
    const statsBefore = world === "ours" ? await gateStats(side.server, oursVars) : null;
    await side.app.resetDeliveries();
    if (world !== "local") await side.app.resetTrace();

    const tags = Array.from({ length: s.workflows }, (_, i) => `${s.name}-${world}-${client}-${i}`);
    // CPU over the scenario (utime+stime from /proc, read before and after: nothing on the
    // delivery path): the app's process and, for a worker, its workerd processes.
    const cpuOf = () => ({ app: processCpuMs(side.app.child.pid), server: (side.server?.pids() ?? []).reduce((a, pid) => a + processCpuMs(pid), 0) });
    const cpuBefore = cpuOf();
    const t0 = Date.now();
    const started = await Promise.all(tags.map((tag) => side.app.start(FILE, s.workflow, [tag, s.steps, s.ms])));
    const startedMs = Date.now() - t0;
    const runIds = started.map((r) => r.runId);
    log(`  ${world}: ${runIds.length} started in ${startedMs} ms`);
    const records = await waitAll(side, runIds, timeoutMs);
    const settledMs = Date.now() - t0;
    await sleep(300); // the queue's acknowledgements of the last deliveries
    const cpuAfter = cpuOf();

    // Checks: each run completed with its output; each step body ran (once).
    const errors = [];
    for (const [i, rec] of records.entries()) {
      if (rec.status !== "completed") {
        errors.push(`run ${rec.runId} ${rec.status}: ${JSON.stringify(rec.error ?? null).slice(0, 300)}`);
        continue;
      }
      const out = await side.app.output(rec.runId);
      if (out !== expectedOutput(tags[i], s.steps)) errors.push(`run ${rec.runId} returned ${JSON.stringify(out)}, expected ${JSON.stringify(expectedOutput(tags[i], s.steps))}`);
    }
    const mine = new Set(tags);
    const execs = (await side.app.executions()).filter((e) => Array.isArray(e) && mine.has(e[0]));
    const seen = new Map();
    for (const [tag, i] of execs) seen.set(`${tag}:${i}`, (seen.get(`${tag}:${i}`) || 0) + 1);
    const missing = s.workflows * s.steps - seen.size;
    if (missing > 0) errors.push(`${missing} step bodies never ran`);
    const reexecuted = [...seen.values()].reduce((n, c) => n + (c - 1), 0);

    const times = records.filter((r) => r.completedAt).map((r) => new Date(r.completedAt) - new Date(r.createdAt));
    const sorted = [...times].sort((a, b) => a - b);
    const createdMin = Math.min(...records.map((r) => new Date(r.createdAt).getTime()));
    const completedMax = Math.max(...records.map((r) => (r.completedAt ? new Date(r.completedAt).getTime() : NaN)));
    const makespanMs = completedMax - createdMin;
    const p = await side.app.deliveries();
    const result = {
      world,
      client: world === "local" ? null : CLIENTS[client],
      scenario: s.name,
      runs: records.length,
      completed: records.filter((r) => r.status === "completed").length,
      slowestMs: sorted[sorted.length - 1],
      p50Ms: percentile(sorted, 50),
      fastestMs: sorted[0],
      makespanMs,
      startedMs,
      settledMs,
      deliveries: p.accepted,
      deliveriesPerS: p.accepted / (makespanMs / 1000),
      peakAtApp: p.peak,
      peakSteps: peakOpen(execs.filter((e) => e[3] > 0).map((e) => [e[2], e[3]])),
      // first step body's start → last step body's end, on the app's clock
      stepSpanMs: execs.length ? Math.max(...execs.map((e) => e[3])) - Math.min(...execs.map((e) => e[2])) : NaN,
      // the longest a run waited from its creation to its first step body (five at a time:
      // the second wave waits a whole wave)
      firstStepDelayMs: Math.max(
        ...records.map((rec, i) => {
          const first = execs.find((e) => e[0] === tags[i] && e[1] === 0);
          return first ? first[2] - new Date(rec.createdAt).getTime() : NaN;
        }),
      ),
      // first run created → last run created (how together "together" was)
      createdSpreadMs: Math.max(...records.map((r) => new Date(r.createdAt).getTime())) - createdMin,
      refused: p.refused,
      failedDeliveries: p.failed,
      statuses: p.statuses,
      maxAttempt: Math.max(0, ...p.deliveries.map((d) => d.attempt || 0)),
      reexecuted,
      errors,
    };
    // Where the time went: each delivery [arrival, answer] in ms from the first start, its
    // status and attempt; through a client, the requests it sent the server.
    result.timeline = p.deliveries.map((d) => [d.at - t0, d.answeredAt ? d.answeredAt - t0 : null, d.status, d.attempt]);
    if (world !== "local") {
      const trace = await side.app.trace();
      result.requests = trace.filter((e) => e.kind === "request").length;
      const byKind = {};
      for (const e of trace) {
        if (e.kind !== "request") continue;
        const k = `${e.path.replace(/\/wrun_[0-9A-Za-z]+/, "").replace(/^\/v1\/(rpc\/)?/, "").replace(/\/q%3A\d+/, "")}${e.eventType ? ` ${e.eventType}` : ""}`;
        byKind[k] = (byKind[k] || 0) + 1;
      }
      result.requestsByKind = byKind;
      result.phases = tracePhases(trace, t0);
    }
    result.cpuMs = { app: Math.round(cpuAfter.app - cpuBefore.app), server: Math.round(cpuAfter.server - cpuBefore.server) };
    // The queue once every run is terminal, then how long until nothing is pending or in
    // flight (acknowledgements of the last deliveries; couriers report theirs to the shard).
    let q = await queueState(side).catch((err) => ({ error: String(err.message || err) }));
    if (q && !q.error) {
      result.queueAtEnd = { ...q };
      const tq = Date.now();
      while (q.pending + q.inflight > 0 && Date.now() - tq < 15_000) {
        await sleep(100);
        q = await queueState(side);
      }
      result.queueDrainMs = q.pending + q.inflight > 0 ? null : Date.now() - tq;
      if (result.queueDrainMs === null) errors.push(`the queue still holds ${q.pending} pending and ${q.inflight} in flight 15 s after the last run finished`);
    }
    if (q) {
      result.queue = q;
      result.deadLetters = q.deadLetters;
    }
    if (world === "ours") {
      const stats = statsDelta(statsBefore, await gateStats(side.server, oursVars));
      result.deliveryStats = stats;
      result.peakConnections = Math.max(...Object.values(stats).map((x) => x.peakConnections));
      result.shard = partitionsTotal(stats);
      result.couriersUsed = Object.entries(stats).filter(([n, x]) => isCourier(n) && x.connections > 0).length;
      if (result.peakConnections > MAX_CONNECTIONS) errors.push(`a queue object had ${result.peakConnections} connections waiting for headers at once (limit ${MAX_CONNECTIONS})`);
    }
    if (q && !q.error && q.deadLetters > 0) errors.push(`${q.deadLetters} dead letters`);
    return result;
  } finally {
    await side.stop();
  }
}

function machineStart() {
  const h = hostCpu();
  return { loadavg: os.loadavg(), host: h, at: Date.now(), idle: idleJiffies() };
}
function idleJiffies() {
  try {
    const v = readFileSync("/proc/stat", "utf8").split("\n", 1)[0].trim().split(/\s+/).slice(1).map(Number);
    return (v[3] || 0) + (v[4] || 0);
  } catch {
    return 0;
  }
}
function machineEnd(m) {
  const h = hostCpu();
  const total = h.total - m.host.total;
  return {
    loadavgStart: m.loadavg,
    loadavgEnd: os.loadavg(),
    stealPct: stealPct(m.host, h),
    busyPct: total > 0 ? (100 * (total - (idleJiffies() - m.idle))) / total : NaN,
    cpus: os.cpus().length,
    wallS: (Date.now() - m.at) / 1000,
  };
}

/**
 * The bench. Options: scale ("full" | "small"), clients (["0.4"]), worlds (WORLDS; local
 * runs once, with the first client), scenarios (names, default all of the scale), profile
 * ("beta42"), oursVars, log, onResult (called with each result and all so far). Returns {scale, profile, runtime, results: [...], machine}; a
 * result's `errors` lists what its checks found (empty when every run was right).
 */
export async function ioBench({ scale = "full", clients = ["0.4"], worlds = scale === "small" ? ["ours"] : WORLDS, scenarios, profile = "beta42", oursVars = {}, repeat = 1, uncounted = false, log = (m) => console.error(m), onResult = () => {} } = {}) {
  const all = SCALES[scale];
  if (!all) throw new Error(`unknown scale ${scale} (${Object.keys(SCALES).join(", ")})`);
  const chosen = scenarios ? all.filter((s) => scenarios.includes(s.name)) : all;
  if (chosen.length === 0) throw new Error(`no scenario among ${scenarios} (have: ${all.map((s) => s.name).join(", ")})`);
  const dir = ioApp(profile);
  const m0 = machineStart();
  const results = [];
  // Repetitions interleave the Worlds (ours, local, ours, local, …), so that a slow minute of
  // the machine falls on both.
  for (let rep = 0; rep < repeat; rep++) {
    for (const [ci, client] of clients.entries()) {
      for (const s of chosen) {
        for (const world of worlds) {
          if (world === "local" && ci > 0) continue; // no client involved: once is enough
          log(`io: ${s.name} (${s.label}) on ${world}${world === "local" ? "" : ` through ${CLIENTS[client]}`}`);
          const m = machineStart();
          let r;
          try {
            r = await runScenario({ world, client, profile, dir, scenario: s, oursVars, uncounted, log });
          } catch (err) {
            log(`  ${world}: failed (${err.message}); once more`);
            r = await runScenario({ world, client, profile, dir, scenario: s, oursVars, uncounted, log }).catch((e) => ({ world, client: world === "local" ? null : CLIENTS[client], scenario: s.name, errors: [String(e.message || e)] }));
          }
          r.machine = machineEnd(m);
          results.push(r);
          log(`  ${world}: ${summaryLine(r)}`);
          onResult(r, results);
        }
      }
    }
  }
  return { scale, profile, runtime: PROFILES[profile].runtime, date: new Date().toISOString(), scenarios: chosen, repeat, results, machine: machineEnd(m0) };
}

const f0 = (x) => (Number.isFinite(x) ? x.toFixed(0) : "–");
const f1 = (x) => (Number.isFinite(x) ? x.toFixed(1) : "–");

function summaryLine(r) {
  if (r.slowestMs === undefined) return `ERROR ${r.errors.join("; ")}`;
  return `slowest ${f0(r.slowestMs)} ms, p50 ${f0(r.p50Ms)}, makespan ${f0(r.makespanMs)} (created over ${f0(r.createdSpreadMs)}, first step ≤ ${f0(r.firstStepDelayMs)} after creation, steps over ${f0(r.stepSpanMs)}, ${r.peakSteps} step bodies at once), ${f1(r.deliveriesPerS)} deliveries/s, peak ${r.peakAtApp} at the app, ${r.refused} refused, ${r.failedDeliveries} failed${r.deadLetters !== undefined ? `, ${r.deadLetters} dead letters` : ""}${r.peakConnections !== undefined ? `, peakConnections ${r.peakConnections}` : ""}${r.cpuMs ? `; CPU app ${f0(r.cpuMs.app)} ms, server ${f0(r.cpuMs.server)} ms` : ""}${r.phases ? `; last step_completed ${f0(r.phases.lastStepCompletedMs)}, first run_completed sent ${f0(r.phases.firstRunCompletedSentMs)}, accepted ${f0(r.phases.runCompletedAcceptedMs)} (${r.phases.runCompletedAttempts} attempts), listEvents ${r.phases.waits.listEvents ? `${r.phases.waits.listEvents.n} × p50 ${r.phases.waits.listEvents.p50Ms} ms, ${r.phases.waits.listEvents.peakOpen} at once` : "none"}` : ""}${r.errors.length ? ` — CHECKS FAILED: ${r.errors.join("; ")}` : ""}`;
}

export function formatIo(res) {
  const lines = [];
  const m = res.machine;
  lines.push(
    `# I/O bench (${res.scale}), runtime ${res.runtime}, ${res.date}`,
    `machine: ${m.cpus} CPUs, load average ${m.loadavgStart.map((x) => x.toFixed(2)).join(" ")} → ${m.loadavgEnd.map((x) => x.toFixed(2)).join(" ")}, busy ${f0(m.busyPct)} %, host steal ${f1(m.stealPct)} %, ${f0(m.wallS)} s`,
    "",
  );
  for (const s of res.scenarios) {
    const ideal = s.workflow === "ioParallel" ? s.ms : Math.ceil(s.workflows / Math.min(s.workflows, s.limit ?? Infinity)) * s.steps * s.ms;
    const at5 = s.workflow === "ioParallel" ? Math.ceil(s.steps / REFERENCE_INFLIGHT) * s.ms : sequentialAt(s);
    lines.push(`- ${s.name}: ${s.label}; steps alone take ${ideal} ms at the concurrency the app allows, ${at5} ms five at a time`);
  }
  lines.push(
    "",
    "| scenario | World | client | slowest ms | p50 ms | makespan ms | deliveries | deliveries/s | peak at app | step bodies at once | refused (429) | failed | dead letters | steps re-run | requests | load avg (1 min) |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
  );
  for (const r of res.results) {
    if (r.slowestMs === undefined) {
      lines.push(`| ${r.scenario} | ${r.world} | ${r.client ?? "–"} | ERROR: ${r.errors.join("; ").slice(0, 300)} |`);
      continue;
    }
    const ok = r.errors.length ? ` ✗ ${r.errors.join("; ")}` : "";
    lines.push(
      `| ${r.scenario} | ${r.world} | ${r.client ?? "–"} | ${f0(r.slowestMs)}${ok} | ${f0(r.p50Ms)} | ${f0(r.makespanMs)} | ${r.deliveries} | ${f1(r.deliveriesPerS)} | ${r.peakAtApp} | ${r.peakSteps} | ${r.refused} | ${r.failedDeliveries} | ${r.deadLetters ?? "n/a"} | ${r.reexecuted} | ${r.requests ?? "–"} | ${r.machine ? r.machine.loadavgEnd[0].toFixed(2) : "–"} |`,
    );
  }
  if ((res.repeat ?? 1) > 1) {
    lines.push("", `medians of ${res.repeat} repetitions (each one's figures above)`, "", "| scenario | World | client | slowest ms (median) | each | p50 ms (median) | makespan ms (median) |", "| --- | --- | --- | --- | --- | --- | --- |");
    const groups = new Map();
    for (const r of res.results.filter((x) => x.slowestMs !== undefined)) {
      const key = `${r.scenario}|${r.world}|${r.client ?? "–"}`;
      if (!groups.has(key)) groups.set(key, []);
      groups.get(key).push(r);
    }
    const med = (xs) => percentile([...xs].sort((a, b) => a - b), 50);
    for (const [key, rs] of groups) {
      const [scenario, world, client] = key.split("|");
      lines.push(`| ${scenario} | ${world} | ${client} | ${f0(med(rs.map((r) => r.slowestMs)))} | ${rs.map((r) => f0(r.slowestMs)).join(", ")} | ${f0(med(rs.map((r) => r.p50Ms)))} | ${f0(med(rs.map((r) => r.makespanMs)))} |`);
    }
  }
  const ours = res.results.filter((r) => r.world === "ours" && r.deliveryStats);
  if (ours.length) {
    lines.push("", "ours, deliveryStats() over the scenario (after its warm-up): shard q:0's partitions (summed; the peak: the highest) and the couriers they woke", "");
    lines.push("| scenario | client | partitions | direct | lent | pace (end) | peakConnections | couriers used | max courier peakConnections | courier connections | queued connections (all) |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for (const r of ours) {
      const couriers = Object.entries(r.deliveryStats).filter(([n]) => isCourier(n)).map(([, x]) => x);
      const cPeak = Math.max(0, ...couriers.map((x) => x.peakConnections));
      const cDel = couriers.reduce((n, x) => n + x.connections, 0);
      const queued = Object.values(r.deliveryStats).reduce((n, x) => n + x.queuedConnections, 0);
      lines.push(`| ${r.scenario} | ${r.client} | ${r.shard.partitions} | ${r.shard.direct} | ${r.shard.lent} | ${r.shard.pace} | ${r.shard.peakConnections} | ${r.couriersUsed} | ${cPeak} | ${cDel} | ${queued} |`);
    }
  }
  const bad = res.results.filter((r) => r.errors.length);
  lines.push("", bad.length ? `CHECKS FAILED in ${bad.length} result(s)` : `every run checked: completed with its expected output, every step body ran`);
  return lines.join("\n");
}

/** npm run bench -- io [--client 0.3|0.4|both] [--only seq,par,refuse] [--worlds ours,reference,local] [--scale small|full] [--profile beta42] [--repeat N] [--uncounted] [--json out.json] */
export async function main(argv) {
  const opts = { clients: ["0.4"], scale: "full", scenarios: undefined, worlds: undefined, profile: "beta42", json: null, oursVars: {}, repeat: 1, uncounted: false };
  const value = (i, flag) => flagValue(argv, i, flag);
  try {
    for (let i = 0; i < argv.length; i++) {
      const a = argv[i];
      if (a === "--client") opts.clients = clientsArg(value(i++, a));
      else if (a === "--only") opts.scenarios = value(i++, a).split(",").filter(Boolean);
      else if (a === "--worlds") {
        opts.worlds = value(i++, a).split(",").filter(Boolean);
        for (const w of opts.worlds) if (!WORLDS.includes(w)) throw new Error(`--worlds: ${WORLDS.join(", ")}; got ${w}`);
      } else if (a === "--scale") opts.scale = value(i++, a);
      else if (a === "--profile") opts.profile = profileArg(value(i++, a));
      else if (a === "--var") varArg(value(i++, a), opts.oursVars);
      else if (a === "--json") opts.json = value(i++, a);
      else if (a === "--uncounted") opts.uncounted = true;
      else if (a === "--repeat") {
        opts.repeat = Number(value(i++, a));
        if (!Number.isInteger(opts.repeat) || opts.repeat < 1 || opts.repeat > 20) throw new Error("--repeat: an integer from 1 to 20");
      }
      else throw new Error(`unknown option ${a}`);
    }
  } catch (err) {
    console.error(`${err.message}\nusage: node scripts/bench.mjs io [--client 0.3|0.4|both] [--only seq,par,refuse] [--worlds ours,reference,local] [--scale full|small] [--profile beta42] [--var K=V] [--repeat N] [--uncounted] [--json out.json]`);
    return 2;
  }
  const { writeFileSync } = await import("node:fs");
  // The JSON is rewritten after every result, so a run cut short keeps what it measured.
  const save = (res) => opts.json && writeFileSync(opts.json, JSON.stringify(res, null, 2));
  const res = await ioBench({ ...opts, onResult: (_r, results) => save({ partial: true, date: new Date().toISOString(), results }) });
  console.log(formatIo(res));
  save(res);
  return res.results.some((r) => r.errors.length) ? 1 : 0;
}

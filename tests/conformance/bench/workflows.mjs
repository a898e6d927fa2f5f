// The workflow bench (npm run bench -- workflows): the Workflow DevKit's standard benchmark
// workloads (bench/workflows/bench.ts) run by a real Workflow app (the runtime of a profile
// with a real world-celld client as its World, lib/app-server.mjs on Node 22) against our
// worker and the TypeScript reference worker of the same client generation, each in its own
// Miniflare/workerd, both alive at once and used in turn within one time window.
//
// Per workload, server and client it measures, over `rounds` × `runs` runs:
//   - execution time: completedAt − createdAt of the run record (the server's clock);
//   - requests the worker served per run: the client's requests to the server in the app's
//     request trace (the bench waits for a run through the trace, never by polling the
//     server, so the count is the run's own) and the queue's deliveries to the app;
//   - server CPU per run: the workerd process's CPU time (the run time of its threads from
//     /proc/<pid>/task/*/schedstat: utime+stime without the 10 ms tick rounding) over the
//     workload's runs, divided by the runs;
// and checks every run's result (status, output, and for stream50 every line of the run's
// output stream): a wrong or failed workflow aborts the bench.
//
// With `counts`, a second pass on instrumented copies of both workers (bench/instrument.mjs)
// counts what each run asked of the platform: Durable Object calls, storage rows read and
// written, alarms set and fired. The instrumentation costs CPU, so it never runs in the
// timed pass.
//
// traceRun() gives one run's requests in order with their wall times and gaps (--trace).

import { readFileSync } from "node:fs";
import os from "node:os";
import { readStat, sampleCpu, threadsDeltaMs, hostCpu, stealPct } from "../../../scripts/bench/proc.mjs";
import { median, pairedRatio, percentile } from "../../../scripts/bench/stats.mjs";
import { startApp } from "../lib/app.mjs";
import { buildApp, CLIENTS, ensureProfile, PROFILES } from "../lib/profile.mjs";
import { startServer } from "../lib/workers.mjs";
import { instrumentedEntry, readCounts, resetCounts, warmQueue } from "./instrument.mjs";
import { fileURLToPath } from "node:url";

export const WORKFLOWS_DIR = fileURLToPath(new URL("./workflows", import.meta.url));
export const FILE = "workflows/bench.ts";
export const SERVERS = ["ours", "reference"];

/** The payload…rand workloads' payload: as bench.ts `payload` makes it (size characters from an LCG). */
export function benchPayload(size, seed) {
  let x = seed >>> 0;
  let p = "";
  for (let i = 0; i < size; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    p += String.fromCharCode(33 + ((x >>> 24) % 94));
  }
  return p;
}

export function fnv1a(s) {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

const sum = (n) => (n * (n - 1)) / 2;
const rotate = (s, n) => s.slice(n % s.length) + s.slice(0, n % s.length);

/**
 * The DevKit's payload workload ("workflow with <n> sequential data payload steps (10KB)"):
 * one 10 KB string of 'x' given to each of `n` sequential steps and returned by it.
 */
function dataPayloadWorkload(n) {
  const size = 10 * 1024;
  return { name: `payload${n}`, workflow: "dataPayload", args: [n, size], expect: size, devkit: `workflow with ${n} sequential data payload steps (10KB)` };
}

/** Ours, beside the DevKit's: the same steps carrying an incompressible payload (an LCG's printable ASCII), rotated by each step. */
function randPayloadWorkload(n) {
  const size = 10 * 1024;
  const seed = 0x5eed + n;
  const final = rotate(benchPayload(size, seed), n);
  return { name: `payload${n}rand`, workflow: "payload", args: [n, size, seed], expect: { length: size, fnv: fnv1a(final) } };
}

function streamLines(n) {
  let text = "";
  for (let i = 0; i < n; i++) {
    const line = `chunk ${i}`;
    text += `${line.toUpperCase()}/${line.length}\n`;
  }
  return text;
}

/**
 * Why stream50 does not run through the 0.4.0 client, on either worker (found with this
 * bench, 2026-12-04). The runtime hands a step its stream argument through a
 * `type: 'bytes'` ReadableStream (@workflow/core serialization.js, beta.42 and beta.55)
 * that enqueues each chunk `world.streams.get()` yields, and enqueueing a view into a byte
 * stream transfers its whole ArrayBuffer. world-celld 0.4.0's `streams.get()` yields the
 * chunks of one read (up to 32) as views into one response buffer, so the first enqueue
 * detaches the rest ("chunk ArrayBuffer is zero-length or detached") and the step never
 * finishes. The 0.3.0 client copies each chunk. A run's own output stream
 * (getRun().getReadable()) reads fine through 0.4.0.
 */
export const STREAM_STEP_ARG_0_4 =
  "client 0.4.0 yields a read's chunks as views of one buffer, and the runtime's byte stream for a step's stream argument transfers it on the first enqueue: the step hangs on both workers";

/**
 * The workloads, by the DevKit benchmark's names (seq10: "workflow with 10 sequential steps";
 * payload10: "workflow with 10 sequential data payload steps (10KB)", its `devkit` name), then
 * ours (payload10rand, payload25rand: the payload steps with an incompressible payload). `skip`: client → why it cannot run there. `expect` is the run's output; `stream`,
 * when set, the exact text of the run's output stream.
 */
export const WORKLOADS = [
  { name: "noSteps", workflow: "noSteps", args: [21], expect: 42 },
  { name: "oneStep", workflow: "oneStep", args: [41], expect: 42 },
  ...[10, 25, 50].map((n) => ({ name: `seq${n}`, workflow: "sequential", args: [n], expect: sum(n) })),
  ...[10, 25, 50].map((n) => ({ name: `par${n}`, workflow: "parallel", args: [n], expect: sum(n) })),
  dataPayloadWorkload(10),
  dataPayloadWorkload(25),
  randPayloadWorkload(10),
  randPayloadWorkload(25),
  { name: "stream50", workflow: "stream", args: [50], expect: 50, stream: streamLines(50), skip: { "0.4": STREAM_STEP_ARG_0_4 } },
];

export function selectWorkloads(only) {
  if (!only || only.length === 0) return WORKLOADS;
  const byName = new Map(WORKLOADS.map((w) => [w.name, w]));
  return only.map((n) => {
    const w = byName.get(n);
    if (!w) throw new Error(`unknown workload ${n} (have: ${WORKLOADS.map((x) => x.name).join(", ")})`);
    return w;
  });
}

/** Throws unless a run completed with the workload's result. */
export async function checkRun(app, w, runId, record) {
  const rec = record ?? (await app.run(runId));
  if (rec.status !== "completed") throw new Error(`${w.name}: run ${runId} ${rec.status}: ${JSON.stringify(rec.error ?? null).slice(0, 500)}`);
  const output = await app.output(runId);
  if (JSON.stringify(output) !== JSON.stringify(w.expect)) {
    throw new Error(`${w.name}: run ${runId} returned ${JSON.stringify(output).slice(0, 200)}, expected ${JSON.stringify(w.expect).slice(0, 200)}`);
  }
  if (w.stream !== undefined) {
    const res = await fetch(`${app.url}/runs/${encodeURIComponent(runId)}/readable`);
    const text = await res.text();
    if (!res.ok || text !== w.stream) {
      const got = text.split("\n").filter(Boolean);
      throw new Error(`${w.name}: run ${runId}'s output stream has ${got.length} lines (${JSON.stringify(text.slice(0, 120))}…), expected ${w.stream.split("\n").length - 1}`);
    }
  }
  return rec;
}

/** Run time of all threads of a server's workerd processes, in ms, as a sampler. */
function cpuMeter(server) {
  const procs = server.pids().map((pid) => ({ pid, starttime: readStat(pid).starttime }));
  if (procs.length === 0) throw new Error(`no workerd process for ${server.server}`);
  return {
    sample: () => procs.map((p) => sampleCpu(p)),
    deltaMs: (a, b) => a.reduce((s, x, i) => s + threadsDeltaMs(x, b[i]), 0),
  };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** What a run's trace says: requests to the server and deliveries to the app. */
export function traceCounts(trace) {
  let requests = 0;
  let deliveries = 0;
  for (const e of trace) {
    if (e.kind === "request") requests++;
    else if (e.kind === "delivery") deliveries++;
  }
  return { requests, deliveries };
}

/**
 * `n` runs of a workload, one after the other, each waited for through the app's trace.
 * Returns per run {runId, ms, requests, deliveries, trace}, and the server's CPU over them.
 * The checks (which ask the server) run after the CPU window.
 */
export async function runBatch(side, w, n, { keepTrace = false } = {}) {
  const { app, meter } = side;
  const runs = [];
  const c0 = meter.sample();
  for (let i = 0; i < n; i++) {
    await app.resetTrace();
    const { runId } = await app.start(FILE, w.workflow, w.args);
    try {
      await app.settled(runId, { timeoutMs: 120_000 });
    } catch (err) {
      const rec = await app.run(runId).catch(() => null);
      throw new Error(`${w.name}: run ${runId} did not settle (${rec?.status ?? "?"}): ${err.message}`);
    }
    const trace = await app.trace();
    runs.push({ runId, trace, ...traceCounts(trace) });
  }
  await sleep(20); // the queue's acknowledgement of the last delivery
  const cpuMs = meter.deltaMs(c0, meter.sample());
  for (const r of runs) {
    const rec = await side.check(app, w, r.runId);
    r.ms = new Date(rec.completedAt).getTime() - new Date(rec.createdAt).getTime();
    r.createdAt = rec.createdAt;
    r.completedAt = rec.completedAt;
    if (!keepTrace) delete r.trace;
  }
  return { runs, cpuMs };
}

/**
 * Starts a server of `kind` and an app on it; `instrument` serves an instrumented copy.
 * `kind` "baseline" is another build of ours (`baseline`: {script, vars}, bench/baseline.mjs
 * in scripts/) in its own deployment defaults.
 */
async function startSide({ kind, client, profile, dir, instrument = false, check = checkRun, oursVars = {}, baseline = null }) {
  const vars = kind === "ours" ? oursVars : kind === "baseline" ? baseline.vars : {};
  const server = await startServer({
    server: kind === "baseline" ? "ours" : kind,
    client,
    profile,
    vars,
    ...(kind === "baseline" ? { script: baseline.script } : {}),
    ...(instrument ? { wrapEntry: instrumentedEntry(profile) } : {}),
  });
  let app;
  try {
    app = await startApp({ profile, dir, client, server });
  } catch (err) {
    await server.dispose();
    throw err;
  }
  return {
    kind,
    client,
    server,
    app,
    check,
    meter: cpuMeter(server),
    async stop() {
      await app.stop().catch(() => {});
      await server.dispose().catch(() => {});
    },
  };
}

/** Builds (or reuses) the bench app of a profile. */
export function benchApp(profile) {
  ensureProfile(profile);
  return buildApp(profile, ".bench", { template: null, workflowsDir: WORKFLOWS_DIR });
}

function machineStart() {
  return { loadavg: os.loadavg(), host: readHostBusy(), at: Date.now() };
}

/** The machine's counters (the first line of /proc/stat, all CPUs): steal, total and idle jiffies. */
function readHostBusy() {
  const h = hostCpu();
  let idle = 0;
  try {
    const v = readFileSync("/proc/stat", "utf8").split("\n", 1)[0].trim().split(/\s+/).slice(1).map(Number);
    idle = (v[3] || 0) + (v[4] || 0); // idle + iowait
  } catch {
    // not Linux
  }
  return { ...h, idle };
}

function machineEnd(start) {
  const host = readHostBusy();
  const total = host.total - start.host.total;
  return {
    loadavgStart: start.loadavg,
    loadavgEnd: os.loadavg(),
    stealPct: stealPct(start.host, host),
    busyPct: total > 0 ? (100 * (total - (host.idle - start.host.idle))) / total : NaN,
    cpus: os.cpus().length,
    wallS: (Date.now() - start.at) / 1000,
  };
}

/** The servers of a run: ours and the reference, and the baseline when there is one. */
const serverKinds = (baseline) => (baseline ? [...SERVERS, "baseline"] : SERVERS);

/**
 * The order in which the servers run workload `wi` in round `r`: two alternate (A B, B A,
 * …); three take the six orders in turn (three rotations, then three reversed), so over
 * any six workloads each server runs first, second and last twice.
 */
export function serverOrder(kinds, r, wi) {
  const v = r + wi;
  const k = v % kinds.length;
  const rotated = [...kinds.slice(k), ...kinds.slice(0, k)];
  if (kinds.length === 2) return rotated;
  return Math.floor(v / kinds.length) % 2 === 0 ? rotated : rotated.reverse();
}

/**
 * The bench. Options: clients (["0.3", "0.4"]), runs (per workload, server and round),
 * rounds, workloads (default WORKLOADS), profile ("beta42"), warmup (true), counts (false:
 * the instrumented pass), check (checkRun: (app, workload, runId) → run record), oursVars
 * (variables set on our worker only, e.g. {WORKFLOW_CORRELATION_INDEX: "off"}; default
 * none: both workers in their default configuration), baseline (null, or another build of
 * ours to run beside them, {label, script, vars, commit}: scripts/bench/baseline.mjs), log.
 * Returns {profile, runtime, clients: {client: {workloads: {name: {ours, reference, baseline?}}, machine, counts}}, machine}.
 */
export async function runBench({
  clients = ["0.3", "0.4"],
  runs = 3,
  rounds = 3,
  workloads = WORKLOADS,
  profile = "beta42",
  warmup = true,
  counts = false,
  check = checkRun,
  oursVars = {},
  baseline = null,
  log = (m) => console.error(m),
} = {}) {
  const dir = benchApp(profile);
  const kinds = serverKinds(baseline);
  const result = {
    profile,
    runtime: PROFILES[profile].runtime,
    runs,
    rounds,
    oursVars,
    ...(baseline ? { baseline: { label: baseline.label, commit: baseline.commit, script: baseline.script, vars: baseline.vars } } : {}),
    date: new Date().toISOString(),
    clients: {},
  };
  const m0 = machineStart();
  for (const client of clients) {
    const c0 = machineStart();
    const sides = {};
    const skipped = workloads.filter((w) => w.skip?.[client]).map((w) => ({ name: w.name, reason: w.skip[client] }));
    const wls = workloads.filter((w) => !w.skip?.[client]);
    try {
      for (const kind of kinds) sides[kind] = await startSide({ kind, client, profile, dir, check, oursVars, baseline });
      if (warmup) {
        log(`client ${CLIENTS[client]}: warm-up (one run of each workload on each server)`);
        for (const w of wls) for (const kind of kinds) await runBatch(sides[kind], w, 1);
      }
      const per = {};
      for (const w of wls) per[w.name] = Object.fromEntries(kinds.map((k) => [k, { runs: [], cpuMs: 0 }]));
      for (let r = 0; r < rounds; r++) {
        log(`client ${CLIENTS[client]}: round ${r + 1}/${rounds}`);
        for (const [wi, w] of wls.entries()) {
          for (const kind of serverOrder(kinds, r, wi)) {
            const b = await runBatch(sides[kind], w, runs);
            for (const x of b.runs) x.round = r;
            per[w.name][kind].runs.push(...b.runs);
            per[w.name][kind].cpuMs += b.cpuMs;
          }
        }
      }
      result.clients[client] = { version: CLIENTS[client], workloads: summarize(per), skipped, machine: machineEnd(c0) };
    } finally {
      for (const s of Object.values(sides)) await s.stop();
    }
    if (counts) result.clients[client].counts = await countPass({ client, profile, dir, workloads: wls, check, log, oursVars });
  }
  result.machine = machineEnd(m0);
  return result;
}

/**
 * The instrumented pass: instrumented copies of both workers, a warm-up (a noSteps run, the
 * queue's objects made ready), then one run of each workload; per run what the worker did
 * (bench/instrument.mjs).
 */
async function countPass({ client, profile, dir, workloads, check, log, oursVars }) {
  log(`client ${CLIENTS[client]}: counting (instrumented workers, one run of each workload)`);
  const out = {};
  const sides = {};
  try {
    for (const kind of SERVERS) sides[kind] = await startSide({ kind, client, profile, dir, instrument: true, check, oursVars });
    // Warm-up: a noSteps run, and every queue object of the client shard made ready (ours:
    // 16 partitions by default, each writing its name and taking the shard's pin once in a
    // deployment's life, not per run: bench/instrument.mjs warmQueue).
    for (const kind of SERVERS) await runBatch(sides[kind], WORKLOADS[0], 1);
    for (const kind of SERVERS) await warmQueue(sides[kind].server);
    for (const w of workloads) {
      out[w.name] = {};
      for (const kind of SERVERS) {
        await resetCounts(sides[kind].server);
        const b = await runBatch(sides[kind], w, 1);
        await sleep(30);
        out[w.name][kind] = { ...(await readCounts(sides[kind].server)), requests: b.runs[0].requests, deliveries: b.runs[0].deliveries };
      }
    }
  } finally {
    for (const s of Object.values(sides)) await s.stop();
  }
  return out;
}

function stats(runs, cpuMs) {
  const ms = runs.map((r) => r.ms).sort((a, b) => a - b);
  const avg = (f) => runs.reduce((s, r) => s + r[f], 0) / runs.length;
  return {
    n: runs.length,
    medianMs: percentile(ms, 50),
    p95Ms: percentile(ms, 95),
    minMs: ms[0],
    maxMs: ms[ms.length - 1],
    requests: avg("requests"),
    deliveries: avg("deliveries"),
    cpuMsPerRun: cpuMs / runs.length,
    samplesMs: runs.map((r) => r.ms),
    // Each round's median (the servers ran a workload's round back to back: pairs).
    roundMediansMs: [...new Set(runs.map((r) => r.round))].filter((x) => x !== undefined).sort((a, b) => a - b).map((k) => median(runs.filter((r) => r.round === k).map((r) => r.ms))),
  };
}

/**
 * ours / `other` over every workload's rounds, paired (in a round the servers ran the
 * workload back to back, so the machine's drift cancels within a pair): the geometric mean
 * and its 95 % interval (`pairedRatio`). An interval containing 1.00 is no difference.
 */
export function pairedOverRounds(workloads, other) {
  const a = [];
  const b = [];
  for (const s of Object.values(workloads)) {
    const o = s.ours?.roundMediansMs ?? [];
    const x = s[other]?.roundMediansMs ?? [];
    for (let i = 0; i < Math.min(o.length, x.length); i++) {
      a.push(x[i]);
      b.push(o[i]);
    }
  }
  return pairedRatio(a, b);
}

const interval = (p) => (p.n >= 2 && Number.isFinite(p.low) ? `${f2(p.ratio)} (95 % interval ${f2(p.low)}–${f2(p.high)}, ${p.n} workload-rounds)` : "-");

function summarize(per) {
  const out = {};
  for (const [name, sides] of Object.entries(per)) {
    out[name] = Object.fromEntries(Object.entries(sides).map(([kind, s]) => [kind, stats(s.runs, s.cpuMs)]));
  }
  return out;
}

export function geoMean(xs) {
  const v = xs.filter((x) => x > 0 && Number.isFinite(x));
  return v.length ? Math.exp(v.reduce((s, x) => s + Math.log(x), 0) / v.length) : NaN;
}

const f0 = (x) => (Number.isFinite(x) ? x.toFixed(0) : "-");
const f1 = (x) => (Number.isFinite(x) ? x.toFixed(1) : "-");
const f2 = (x) => (Number.isFinite(x) ? x.toFixed(2) : "-");

function table(header, rows) {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const line = (cells) => `| ${cells.map((c, i) => String(c).padEnd(widths[i])).join(" | ")} |`;
  return [line(header), `| ${widths.map((w) => "-".repeat(w)).join(" | ")} |`, ...rows.map(line)].join("\n");
}

/** `K=V, K2=V2`: the variables set on our worker. */
function varsText(vars) {
  return Object.entries(vars).map(([k, v]) => `${k}=${v}`).join(", ");
}

/** The printed report: one table per client (ours/reference), the geometric means, the machine. */
export function formatReport(result) {
  const lines = [];
  const loadLine = (m) =>
    `load average ${m.loadavgStart.map(f2).join(" ")} → ${m.loadavgEnd.map(f2).join(" ")}, host steal ${f1(m.stealPct)} %, machine busy ${f0(m.busyPct)} % of ${m.cpus} CPUs, ${f0(m.wallS)} s`;
  lines.push(
    `# workflow bench ${result.date.slice(0, 16).replace("T", " ")} UTC: Workflow runtime ${result.runtime} (profile ${result.profile}), ` +
      `${result.rounds} round(s) × ${result.runs} run(s) per workload and server, ours then reference alternating; ours/reference`,
  );
  if (Object.keys(result.oursVars ?? {}).length) lines.push(`# ours configured with ${varsText(result.oursVars)} (the reference in its default configuration)`);
  const b = result.baseline;
  if (b) {
    lines.push(
      `# baseline: ${b.label}${b.commit ? ` (commit ${b.commit})` : ""}, another build of ours run beside them in its own defaults (${varsText(b.vars) || "no [vars]"}); ` +
        "the last columns compare ours with it",
    );
  }
  for (const [client, c] of Object.entries(result.clients)) {
    lines.push("", `## client ${c.version} — ${loadLine(c.machine)}`, "");
    const rows = [];
    const ratios = [];
    const baseRatios = [];
    let cpuOurs = 0;
    let cpuRef = 0;
    let cpuBase = 0;
    for (const [name, s] of Object.entries(c.workloads)) {
      const { ours: o, reference: r, baseline: bl } = s;
      const ratio = o.medianMs / r.medianMs;
      ratios.push(ratio);
      cpuOurs += o.cpuMsPerRun * o.n;
      cpuRef += r.cpuMsPerRun * r.n;
      const row = [
        name,
        `${f0(o.medianMs)} / ${f0(r.medianMs)}`,
        f2(ratio),
        `${f0(o.p95Ms)} / ${f0(r.p95Ms)}`,
        `${f1(o.requests)} / ${f1(r.requests)}`,
        `${f1(o.deliveries)} / ${f1(r.deliveries)}`,
        `${f1(o.cpuMsPerRun)} / ${f1(r.cpuMsPerRun)}`,
        f2(o.cpuMsPerRun / r.cpuMsPerRun),
      ];
      if (bl) {
        baseRatios.push(o.medianMs / bl.medianMs);
        cpuBase += bl.cpuMsPerRun * bl.n;
        row.push(`${f0(bl.medianMs)} (p95 ${f0(bl.p95Ms)})`, f2(o.medianMs / bl.medianMs), f1(bl.cpuMsPerRun), f2(o.cpuMsPerRun / bl.cpuMsPerRun));
      }
      rows.push(row);
    }
    const header = ["workload", "median ms", "ratio", "p95 ms", "requests/run", "deliveries/run", "server CPU ms/run", "CPU ratio"];
    if (baseRatios.length) header.push("baseline median ms", "ours/baseline", "baseline CPU ms/run", "CPU ours/baseline");
    lines.push(table(header, rows));
    for (const k of c.skipped ?? []) lines.push(`(${k.name} not run with client ${c.version}: ${k.reason})`);
    lines.push(
      "",
      `geometric mean of the median ratio over ${ratios.length} workloads: **${f2(geoMean(ratios))}**; paired round by round: ${interval(pairedOverRounds(c.workloads, "reference"))}; server CPU of the whole bench, ours/reference: ${f2(cpuOurs / cpuRef)}`,
    );
    if (baseRatios.length) {
      lines.push(
        `against the baseline: geometric mean of ours/baseline **${f2(geoMean(baseRatios))}**, the highest ${f2(Math.max(...baseRatios))}; paired round by round: ${interval(pairedOverRounds(c.workloads, "baseline"))}; server CPU of the whole bench, ours/baseline: ${f2(cpuOurs / cpuBase)}`,
      );
    }
    if (c.counts) lines.push("", formatCounts(c.counts));
  }
  if (Object.keys(result.clients).length > 1) lines.push("", `whole bench: ${loadLine(result.machine)}`);
  return lines.join("\n");
}

/** The instrumented pass's table: what one run asked of the platform, ours / reference. */
export function formatCounts(counts) {
  const rows = [];
  for (const [name, s] of Object.entries(counts)) {
    const o = s.ours;
    const r = s.reference;
    const pair = (f) => `${o[f] ?? "-"} / ${r[f] ?? "-"}`;
    rows.push([name, pair("requests"), pair("deliveries"), pair("objectCalls"), pair("objectToObject"), pair("storageCalls"), pair("rowsRead"), pair("rowsWritten"), pair("alarmsSet"), pair("alarmsFired")]);
  }
  return (
    "what one run asked of the platform (instrumented copies of both workers, one run each; ours / reference):\n\n" +
    table(["workload", "requests", "deliveries", "object calls", "of them object→object", "storage calls", "rows read", "rows written", "alarms set", "alarms fired"], rows)
  );
}

// ---- where a run's time goes (--trace) ----

/** A request's name: `binding.method` of the RPC path, with the event type of an applyEvent. */
export function requestLabel(e) {
  if (e.kind === "delivery") return "delivery";
  const m = e.path.match(/^\/v1\/rpc\/([^/]+)\/[^/]+\/([^/?]+)/);
  let label = m ? `${m[1]}.${m[2]}` : e.path.replace(/\?.*$/, "").replace(/wrun_[0-9A-Za-z]+/g, ":run").replace(/strm_[0-9A-Za-z_-]+/g, ":stream");
  if (e.eventType) label += `(${e.eventType})`;
  return label;
}

/**
 * `runs` traced runs of `workload` on each server (both alive, alternating ours and the
 * reference run by run, after warm-up runs of noSteps and of the workload on each; with
 * `baseline`, that build of ours too, compared with ours in a second summary).
 * Returns {client, workload, runs, sides: {ours: [run…], reference: [run…], baseline?}, machine};
 * each run has its trace, its record's times and the server CPU over it.
 */
export async function traceWorkload({ client = "0.3", profile = "beta42", workload, runs = 5, oursVars = {}, baseline = null, log = (m) => console.error(m), check = checkRun }) {
  if (workload.skip?.[client]) throw new Error(`${workload.name} does not run with client ${CLIENTS[client]}: ${workload.skip[client]}`);
  const dir = benchApp(profile);
  const m0 = machineStart();
  const kinds = serverKinds(baseline);
  const out = {
    client,
    version: CLIENTS[client],
    runtime: PROFILES[profile].runtime,
    workload: workload.name,
    runs,
    oursVars,
    date: new Date().toISOString(),
    sides: Object.fromEntries(kinds.map((k) => [k, []])),
  };
  const sides = {};
  try {
    for (const kind of kinds) sides[kind] = await startSide({ kind, client, profile, dir, check, oursVars, baseline });
    log(`client ${CLIENTS[client]}: warm-up, then ${runs} traced run(s) of ${workload.name} on each server`);
    // A fresh workerd spends its first runs compiling (the third noSteps run of ours can
    // cost 190 ms of CPU against 20 later): warm both up before tracing.
    for (const kind of kinds) {
      await runBatch(sides[kind], WORKLOADS[0], 3);
      await runBatch(sides[kind], workload, 2);
    }
    for (let i = 0; i < runs; i++) {
      for (const kind of serverOrder(kinds, 0, i)) {
        const b = await runBatch(sides[kind], workload, 1, { keepTrace: true });
        out.sides[kind].push({ ...b.runs[0], cpuMs: b.cpuMs });
      }
    }
  } finally {
    for (const s of Object.values(sides)) await s.stop();
  }
  out.machine = machineEnd(m0);
  return out;
}

const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** Total wall time covered by the union of intervals [start, end] clipped to [lo, hi]. */
function covered(intervals, lo, hi) {
  const xs = intervals.map(([a, b]) => [Math.max(a, lo), Math.min(b, hi)]).filter(([a, b]) => b > a).sort((p, q) => p[0] - q[0]);
  let total = 0;
  let curA = -Infinity;
  let curB = -Infinity;
  for (const [a, b] of xs) {
    if (a > curB) {
      if (curB > curA) total += curB - curA;
      curA = a;
      curB = b;
    } else curB = Math.max(curB, b);
  }
  if (curB > curA) total += curB - curA;
  return total;
}

/**
 * The analysis of one traced run: the fixed per-run cost (the first request → the first
 * delivery; the last step's completion → the run's completion answered) and, for steps
 * one after another, each step from its first event (step_created, or step_started where
 * the runtime writes no step_created) to the next one's: its requests, the time inside them
 * and the runtime's own time between them.
 */
export function analyzeTrace(side) {
  const trace = side.trace.filter((e) => e.end > 0).sort((a, b) => a.start - b.start);
  const reqs = trace.filter((e) => e.kind === "request");
  const deliveries = trace.filter((e) => e.kind === "delivery");
  const t0 = trace[0].start;
  const ofType = (t) => reqs.filter((e) => e.eventType === t);
  // A step's first event: step_created where the runtime writes one, else step_started
  // (runtime 5.0.0-beta.42 starts a step with step_started).
  const created = ofType("step_created").length ? ofType("step_created") : ofType("step_started");
  const completedSteps = ofType("step_completed");
  const runDone = reqs.find((e) => e.eventType === "run_completed");
  const firstDelivery = deliveries[0];
  const a = {
    requests: reqs.length,
    deliveries: deliveries.length,
    execMs: side.ms,
    wallMs: Math.max(...trace.map((e) => e.end)) - t0,
    startToDeliveryMs: firstDelivery ? firstDelivery.start - t0 : NaN,
    startRequests: reqs.filter((e) => firstDelivery && e.start < firstDelivery.start).map(requestLabel),
    requestMsAll: covered(reqs.map((e) => [e.start, e.end]), -Infinity, Infinity),
  };
  if (runDone && completedSteps.length) {
    const last = completedSteps[completedSteps.length - 1];
    a.lastStepToDoneMs = runDone.end - last.end;
    a.endRequests = reqs.filter((e) => e.start >= last.end && e.start <= runDone.start).map(requestLabel);
  } else if (runDone && firstDelivery) {
    a.deliveryToDoneMs = runDone.end - firstDelivery.start;
    a.endRequests = reqs.filter((e) => e.start >= firstDelivery.start && e.start <= runDone.start).map(requestLabel);
  }
  a.stepEvent = created[0]?.eventType;
  // The run's phases, each split into time inside requests and time outside them (the
  // queue's, the runtime's, the app's).
  const phase = (name, lo, hi) => {
    if (!(hi >= lo)) return null;
    const inside = reqs.filter((e) => e.start >= lo && e.start < hi);
    const reqMs = covered(reqs.map((e) => [e.start, e.end]), lo, hi);
    return { name, ms: hi - lo, reqMs, otherMs: hi - lo - reqMs, requests: inside.map(requestLabel) };
  };
  const lastDone = completedSteps[completedSteps.length - 1];
  const lastAnswer = Math.max(...trace.map((e) => e.end));
  a.phases = [
    firstDelivery && phase("start: first request → first delivery in", t0, firstDelivery.start),
    firstDelivery && created.length && phase(`delivery in → first ${a.stepEvent}`, firstDelivery.start, created[0].start),
    created.length && lastDone && phase(`steps: first ${a.stepEvent} → last step_completed answered`, created[0].start, lastDone.end),
    runDone && lastDone && phase("end: last step_completed answered → run_completed answered", lastDone.end, runDone.end),
    runDone && !created.length && firstDelivery && phase("delivery in → run_completed answered", firstDelivery.start, runDone.end),
    runDone && phase("after run_completed (not in the execution time)", runDone.end, lastAnswer),
  ].filter(Boolean);
  // Steps one after another: step k from its first event to step k+1's.
  const steps = [];
  for (let k = 0; k + 1 < created.length; k++) {
    const lo = created[k].start;
    const hi = created[k + 1].start;
    if (created[k + 1].start < created[k].end) break; // concurrent steps: no sequence
    const inside = reqs.filter((e) => e.start >= lo && e.start < hi);
    const reqMs = covered(inside.map((e) => [e.start, e.end]), lo, hi);
    steps.push({ k, ms: hi - lo, requests: inside.map(requestLabel), requestWall: inside.map((e) => e.end - e.start), reqMs, runtimeMs: hi - lo - reqMs });
  }
  a.steps = steps;
  // Steady steps: drop the first and last (warming the run's state, and the run's end).
  const steady = steps.length > 4 ? steps.slice(1, -1) : steps;
  a.steadySteps = steady;
  if (steady.length) {
    const labels = steady[0].requests;
    a.steady = {
      n: steady.length,
      // Means, so that the parts add up; each request's wall time is a median.
      ms: mean(steady.map((s) => s.ms)),
      reqMs: mean(steady.map((s) => s.reqMs)),
      runtimeMs: mean(steady.map((s) => s.runtimeMs)),
      medianMs: median(steady.map((s) => s.ms)),
      requests: labels.map((label, i) => ({
        label,
        ms: median(steady.filter((s) => s.requests[i] === label).map((s) => s.requestWall[i])),
      })),
      sameShape: steady.every((s) => s.requests.join() === labels.join()),
    };
  }
  return a;
}

/** The medians over runs of analyzeTrace's figures. */
export function summarizeTraces(runs) {
  const as = runs.map((r) => analyzeTrace(r));
  const med = (f) => median(as.map(f).filter((x) => Number.isFinite(x)));
  const out = {
    n: as.length,
    execMs: med((a) => a.execMs),
    wallMs: med((a) => a.wallMs),
    requestMsAll: med((a) => a.requestMsAll),
    requests: med((a) => a.requests),
    deliveries: med((a) => a.deliveries),
    cpuMs: median(runs.map((r) => r.cpuMs)),
    startToDeliveryMs: med((a) => a.startToDeliveryMs),
    lastStepToDoneMs: med((a) => a.lastStepToDoneMs),
    deliveryToDoneMs: med((a) => a.deliveryToDoneMs),
    startRequests: as[0].startRequests,
    endRequests: as[0].endRequests,
    stepEvent: as[0].stepEvent,
    // Each phase as in the run where it took its median time (so that its parts add up).
    phases: as[0].phases.map((ph, i) => {
      const xs = as.map((a) => a.phases[i]).filter((x) => x && x.name === ph.name).sort((x, y) => x.ms - y.ms);
      return xs[Math.floor((xs.length - 1) / 2)];
    }),
  };
  // Steady steps pooled over the runs: means (so that the parts add up), and each
  // request's median wall time over the steps of the common shape.
  const steps = as.flatMap((a) => a.steadySteps ?? []);
  if (steps.length) {
    const labels = steps[0].requests;
    const same = steps.filter((st) => st.requests.join() === labels.join());
    out.steady = {
      n: steps.length,
      ms: mean(steps.map((st) => st.ms)),
      medianMs: median(steps.map((st) => st.ms)),
      reqMs: mean(steps.map((st) => st.reqMs)),
      runtimeMs: mean(steps.map((st) => st.runtimeMs)),
      requests: labels.map((label, i) => ({ label, ms: median(same.map((st) => st.requestWall[i])) })),
      sameShape: same.length === steps.length,
    };
  }
  return out;
}

/**
 * The printed trace: for each server its run of median execution time in order (each
 * request at its start with its wall time and the gap before it; each delivery's arrival and
 * answer), then the medians over all traced runs: the fixed per-run cost and a steady step.
 */
export function formatTrace(t, { maxLines = 400 } = {}) {
  const m = t.machine;
  const lines = [
    `# trace of ${t.workload}: ${t.runs} run(s) on each server, client ${t.version}, Workflow runtime ${t.runtime}, ${t.date.slice(0, 16).replace("T", " ")} UTC` +
      (Object.keys(t.oursVars ?? {}).length ? `; ours configured with ${varsText(t.oursVars)}` : ""),
    `# load average ${m.loadavgStart.map(f2).join(" ")} → ${m.loadavgEnd.map(f2).join(" ")}, host steal ${f1(m.stealPct)} %, machine busy ${f0(m.busyPct)} % of ${m.cpus} CPUs`,
  ];
  const sums = {};
  for (const [kind, runs] of Object.entries(t.sides)) {
    const byMs = [...runs].sort((x, y) => x.ms - y.ms);
    const side = byMs[Math.floor((byMs.length - 1) / 2)];
    const trace = side.trace.filter((e) => e.end > 0).sort((x, y) => x.start - y.start);
    const t0 = trace[0].start;
    lines.push(
      "",
      `## ${kind}: the run of median execution time, ${side.runId}: ${side.ms} ms (completedAt − createdAt; all runs: ${runs.map((r) => r.ms).join(", ")}), ${side.requests} requests, ${side.deliveries} deliveries, server CPU ${f1(side.cpuMs)} ms`,
      "",
      "    t ms   wall   gap  request (gap: since the previous request's answer; ∥ overlaps one in flight)",
    );
    const points = [];
    for (const e of trace) {
      if (e.kind === "delivery") {
        points.push({ t: e.start, end: e.start, text: `→ delivery in (${e.path})` });
        points.push({ t: e.end, end: e.end, text: `← delivery answered ${e.status} after ${f1(e.end - e.start)} ms` });
      } else points.push({ t: e.start, end: e.end, wall: e.end - e.start, text: `${requestLabel(e)}${e.status >= 300 || !e.status ? ` [${e.status}]` : ""}` });
    }
    points.sort((x, y) => x.t - y.t);
    let last = t0;
    for (const [i, p] of points.entries()) {
      if (i >= maxLines) {
        lines.push(`  … ${points.length - maxLines} more`);
        break;
      }
      const gap = p.t - last;
      lines.push(`${f1(p.t - t0).padStart(8)} ${p.wall !== undefined ? f1(p.wall).padStart(6) : "".padStart(6)} ${gap >= 0 ? f1(gap).padStart(5) : "    ∥"}  ${p.text}`);
      last = Math.max(last, p.end);
    }
    sums[kind] = summarizeTraces(runs);
  }
  lines.push(...compareTraces(sums.ours, sums.reference, "reference"));
  if (sums.baseline) lines.push(...compareTraces(sums.ours, sums.baseline, "baseline"));
  return lines.join("\n");
}

/** The lines comparing two sides' summarized traces: ours (`o`) and `other` (`r`). */
function compareTraces(o, r, other) {
  const lines = [];
  lines.push("", `## where the time went: medians over ${o.n} / ${r.n} runs (ours / ${other})`, "");
  const pair = (f, g = f1) => `${g(o[f])} / ${g(r[f])}`;
  lines.push(`- execution (completedAt − createdAt) ${pair("execMs", f0)} ms; client side, first request → last answer ${pair("wallMs")} ms, of it inside requests ${pair("requestMsAll")} ms; server CPU ${pair("cpuMs")} ms`);
  lines.push(`- requests ${pair("requests", f0)}, deliveries ${pair("deliveries", f0)}`);
  lines.push("- phases, ms (inside requests + outside them: the queue's, the runtime's, the app's):");
  for (const [i, ph] of o.phases.entries()) {
    const q = r.phases[i];
    if (!q || q.name !== ph.name) continue;
    const cell = (x) => `${f1(x.ms)} (${f1(x.reqMs)} + ${f1(x.otherMs)})`;
    const reqs = ph.requests.join(", ") === q.requests.join(", ") ? ph.requests.join(", ") : `ours ${ph.requests.join(", ")}; ${other} ${q.requests.join(", ")}`;
    lines.push(`    ${ph.name}: ${cell(ph)} / ${cell(q)}${ph.requests.length > 12 ? "" : ` — ${reqs || "no requests"}`}`);
  }
  for (const [kind, x] of [["ours", o], [other, r]]) {
    if (!x.steady) continue;
    const st = x.steady;
    lines.push(
      `- ${kind}: a steady step (${x.stepEvent} → next ${x.stepEvent}; mean of ${st.n}: each run's steps but its first and last) ${f1(st.ms)} ms (median ${f1(st.medianMs)}) = ${f1(st.reqMs)} inside its ${st.requests.length} requests + ${f1(st.runtimeMs)} the runtime's own time${st.sameShape ? "" : " (steps differ in shape)"}; each request's median wall ms:`,
      `    ${st.requests.map((q) => `${q.label} ${f1(q.ms)}`).join(" → ")}`,
    );
  }
  return lines;
}

// The DevKit bench (npm run bench -- devkit): the scenarios of the Workflow DevKit's current
// latency benchmark (bench/workflows/devkit.ts has the workflows), run by a real Workflow app
// (runtime of the profile, beta42 by default) on several Worlds side by side in one run:
//
//   ours        the built worker (lib/workers.mjs startServer "ours", default variables),
//               through a real world-celld client
//   reference   the TypeScript reference worker of the same client generation
//   local       @workflow/world-local (the app's in-process World: no client involved, so it
//               runs once, with the first client, and shows in every client's table)
//
// Measured as the DevKit measures, on the app's clock: every figure is a difference of
// Date.now() values taken on the app (step bodies, and POST /start's `clientStart`, stamped
// right before start()), never the bench process's:
//
//   TTFS  time to first step: steps[0].start − clientStart, for one no-op step (`step`,
//         turbo), one streaming step (`stream`, turbo) and a hook then a streaming step
//         (`hook`, non-turbo);
//   STSO  step-to-step overhead: steps[i].start − steps[i−1].end in `count` sequential no-op
//         steps, by the index i of the step ending the gap (1–10, 11–50, 51–100, 101–);
//   WO    workflow overhead of that run: (last step's end − clientStart) − Σ step durations;
//   SL    stream latency: a chunk written by one step until a parallel reader step receives
//         it (readAt − writtenAt), the write let go only once the reader's read is in flight
//         (a reader-ready barrier on a second stream);
//   SO    stream overhead: (doneAt − writtenAt) − count × intervalMs, a writer emitting
//         `count` LLM-shaped token deltas paced at one per intervalMs while a parallel reader
//         drains them, as raw text (`so-text`) and AI-SDK-style objects (`so-structured`).
//
// Each scenario gets warm-up runs on every World, then its runs, the Worlds taking turns run
// by run (the order alternating). A run's result is checked (completed, the shape the metric
// needs, SO: every chunk received); a run that fails or times out is counted and reported,
// and a scenario that fails on a World twice before any success stops there (the rest of the
// bench goes on). Waiting for a run asks the server nothing: through a world-celld client the
// bench reads the app's request trace for the run's terminal event; on world-local it reads
// the run (in-process).
//
// The machine is shared (2 cores here, other builds and benches at once): each client's table
// carries the load average over it.

import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { hostCpu, stealPct } from "../../../scripts/bench/proc.mjs";
import { percentile } from "../../../scripts/bench/stats.mjs";
import { startApp } from "../lib/app.mjs";
import { buildApp, CLIENTS, ensureProfile, PROFILES } from "../lib/profile.mjs";
import { clientsArg, flagValue, positiveInt, profileArg, varArg } from "../../../scripts/bench/args.mjs";
import { profileDir, startServer } from "../lib/workers.mjs";

export const WORKFLOWS_DIR = fileURLToPath(new URL("./workflows", import.meta.url));
export const FILE = "workflows/devkit.ts";

const TERMINAL = new Set(["run_completed", "run_failed", "run_cancelled"]);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- the Worlds (pluggable: a name → how to start an app on it) ----

/**
 * The Worlds the bench knows. `start({client, profile, dir, oursVars})` → {app, stop()};
 * `available(profile)` → null, or why it cannot run; `perClient`: false when the client
 * plays no part (the World runs once).
 */
export const WORLDS = {
  ours: {
    label: "ours",
    perClient: true,
    available: () => null,
    start: (o) => startCelld("ours", o),
  },
  reference: {
    label: "reference",
    perClient: true,
    available: () => null,
    start: (o) => startCelld("reference", o),
  },
  local: {
    label: "world-local",
    perClient: false,
    available: (profile) =>
      existsSync(join(profileDir(profile), "node_modules", "@workflow", "world-local", "package.json"))
        ? null
        : `@workflow/world-local is not installed in profile ${profile}`,
    async start({ client, profile, dir }) {
      const dataDir = mkdtempSync(join(os.tmpdir(), "devkit-bench-local-"));
      try {
        // Deliveries come back to the app's own port (world-local reads PORT, which the app sets).
        const app = await startApp({ profile, dir, client, server: { env: {} }, worldModule: "@workflow/world-local", env: { WORKFLOW_LOCAL_DATA_DIR: dataDir } });
        return {
          app,
          viaTrace: false,
          async stop() {
            await app.stop().catch(() => {});
            rmSync(dataDir, { recursive: true, force: true });
          },
        };
      } catch (err) {
        rmSync(dataDir, { recursive: true, force: true });
        throw err;
      }
    },
  },
};
export const DEFAULT_WORLDS = ["ours", "reference", "local"];

async function startCelld(kind, { client, profile, dir, oursVars = {} }) {
  const server = await startServer({ server: kind, client, profile, vars: kind === "ours" ? oursVars : {} });
  try {
    const app = await startApp({ profile, dir, client, server });
    return {
      app,
      server,
      viaTrace: true,
      async stop() {
        await app.stop().catch(() => {});
        await server.dispose().catch(() => {});
      },
    };
  } catch (err) {
    await server.dispose().catch(() => {});
    throw err;
  }
}

// ---- scenarios ----

/** STSO's index ranges (the index of the step that ends the gap, 1-based past the first). */
export const STSO_RANGES = [
  [1, 10],
  [11, 50],
  [51, 100],
  [101, Infinity],
];
const rangeName = ([a, b]) => (b === Infinity ? `${a}–` : `${a}–${b}`);

const isNum = (x) => typeof x === "number" && Number.isFinite(x);

function stepTimings(out, want) {
  const steps = out?.steps;
  if (!Array.isArray(steps) || steps.length === 0) throw new Error(`no step timings: ${JSON.stringify(out)?.slice(0, 200)}`);
  if (want !== undefined && steps.length !== want) throw new Error(`${steps.length} step timings, expected ${want}`);
  for (const s of steps) if (!isNum(s?.start) || !isNum(s?.end)) throw new Error(`malformed step timing ${JSON.stringify(s)}`);
  return steps;
}

const ttfs = (out, clientStart) => ({ ttfs: stepTimings(out, 1)[0].start - clientStart });

/**
 * The scenarios at each scale. `runs`/`warmup` per World; `samples(output, clientStart,
 * cfg)` → {metric: number | number[]} (throws when the output is wrong).
 */
export function scenarios(cfg) {
  return [
    { name: "step", label: "1 no-op step (turbo)", workflow: "devkitStep", args: [], runs: cfg.runs, warmup: cfg.warmup, samples: ttfs },
    { name: "stream", label: "1 streaming step (turbo)", workflow: "devkitStream", args: [], runs: cfg.runs, warmup: cfg.warmup, samples: ttfs },
    {
      name: "hook",
      label: "hook + 1 streaming step (non-turbo)",
      workflow: "devkitHookStream",
      args: [],
      runs: cfg.runs,
      warmup: cfg.warmup,
      samples: (out, cs) => {
        if (typeof out?.token !== "string" || !out.token) throw new Error(`no hook token: ${JSON.stringify(out)?.slice(0, 200)}`);
        return ttfs(out, cs);
      },
    },
    {
      name: "sequential",
      label: `${cfg.steps} sequential no-op steps`,
      workflow: "devkitSequential",
      args: [cfg.steps],
      runs: cfg.seqRuns,
      warmup: 0, // as the DevKit: the other scenarios warmed the app and the World
      timeoutMs: 60_000 + cfg.steps * 500,
      samples: (out, cs) => {
        const steps = stepTimings(out, cfg.steps);
        const m = {};
        for (let i = 1; i < steps.length; i++) {
          const r = STSO_RANGES.find(([a, b]) => i >= a && i <= b);
          (m[`stso ${rangeName(r)}`] ??= []).push(steps[i].start - steps[i - 1].end);
        }
        const inSteps = steps.reduce((s, x) => s + (x.end - x.start), 0);
        m.wo = steps[steps.length - 1].end - cs - inSteps;
        return m;
      },
    },
    {
      name: "sl",
      label: "parallel reader/writer steps, reader-ready barrier",
      workflow: "devkitSl",
      args: [],
      runs: cfg.runs,
      warmup: cfg.warmup,
      samples: (out) => {
        const sl = out?.sl;
        if (!isNum(sl?.writtenAt) || !isNum(sl?.readAt)) throw new Error(`no SL sample: ${JSON.stringify(out)?.slice(0, 200)}`);
        return { sl: sl.readAt - sl.writtenAt };
      },
    },
    ...["text", "structured"].map((mode) => ({
      name: `so-${mode}`,
      label: `${cfg.soChunks} ${mode} token deltas at one per ${cfg.soIntervalMs} ms, drained in parallel`,
      workflow: "devkitSo",
      args: [cfg.soChunks, cfg.soIntervalMs, mode],
      runs: cfg.soRuns,
      warmup: cfg.soWarmup,
      timeoutMs: 60_000 + cfg.soChunks * cfg.soIntervalMs,
      samples: (out) => {
        const so = out?.so;
        if (!isNum(so?.writtenAt) || !isNum(so?.doneAt)) throw new Error(`no SO sample: ${JSON.stringify(out)?.slice(0, 200)}`);
        if (so.received !== cfg.soChunks) throw new Error(`the reader received ${so.received} chunks, expected ${cfg.soChunks}`);
        return { so: so.doneAt - so.writtenAt - cfg.soChunks * cfg.soIntervalMs };
      },
    })),
  ];
}

/**
 * The scales. full: the DevKit's SO workload (300 deltas at 100/s: 3 s); its sequential run
 * is 1020 steps, ours 200 × 3 runs (the reference lists the whole log after every step).
 */
export const SCALES = {
  full: { runs: 10, warmup: 2, steps: 200, seqRuns: 3, soChunks: 300, soIntervalMs: 10, soRuns: 5, soWarmup: 1 },
  small: { runs: 3, warmup: 1, steps: 12, seqRuns: 1, soChunks: 30, soIntervalMs: 10, soRuns: 2, soWarmup: 0 },
};

// ---- one run ----

/** Waits until `runId` is terminal: through the app's trace (celld) or its record (local). */
async function waitTerminal(side, runId, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  let interval = 10;
  for (;;) {
    if (side.viaTrace) {
      const trace = await side.app.trace();
      if (trace.some((e) => e.kind === "request" && e.runId === runId && TERMINAL.has(e.eventType) && e.status >= 200 && e.status < 300 && e.ok !== false)) return;
    } else {
      const r = await side.app.run(runId).catch(() => null);
      if (r && r.status !== "pending" && r.status !== "running") return;
    }
    if (Date.now() > deadline) throw new Error(`run ${runId} not finished after ${timeoutMs} ms`);
    await sleep(interval);
    interval = Math.min(250, interval * 1.5);
  }
}

/** One run of a scenario on a side: {runId, samples} or throws. */
export async function runOnce(side, s, cfg) {
  if (side.viaTrace) await side.app.resetTrace();
  const { runId, clientStart } = await side.app.start(FILE, s.workflow, s.args);
  if (!isNum(clientStart)) throw new Error("the app's /start gave no clientStart (an app-server.mjs without it: rebuild the app)");
  try {
    await waitTerminal(side, runId, s.timeoutMs ?? cfg.timeoutMs);
    const rec = await side.app.run(runId);
    if (rec.status !== "completed") throw new Error(`${rec.status}: ${JSON.stringify(rec.error ?? null).slice(0, 300)}`);
    const out = await side.app.output(runId);
    return { runId, samples: s.samples(out, clientStart, cfg) };
  } catch (err) {
    err.message = `${s.name} run ${runId}: ${err.message}`;
    throw err;
  }
}

// ---- the machine ----

function readIdle() {
  try {
    const v = readFileSync("/proc/stat", "utf8").split("\n", 1)[0].trim().split(/\s+/).slice(1).map(Number);
    return (v[3] || 0) + (v[4] || 0);
  } catch {
    return 0;
  }
}
function machineStart() {
  return { loadavg: os.loadavg(), host: { ...hostCpu(), idle: readIdle() }, at: Date.now() };
}
function machineEnd(m) {
  const host = { ...hostCpu(), idle: readIdle() };
  const total = host.total - m.host.total;
  return {
    loadavgStart: m.loadavg,
    loadavgEnd: os.loadavg(),
    stealPct: stealPct(m.host, host),
    busyPct: total > 0 ? (100 * (total - (host.idle - m.host.idle))) / total : NaN,
    cpus: os.cpus().length,
    wallS: (Date.now() - m.at) / 1000,
  };
}

// ---- the bench ----

/** Builds (or reuses) the DevKit bench's app of a profile (its own directory: .bench-devkit). */
export function devkitApp(profile) {
  ensureProfile(profile);
  return buildApp(profile, ".bench-devkit", { template: null, workflowsDir: WORKFLOWS_DIR });
}

function summarize(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return { n: s.length, median: percentile(s, 50), p95: percentile(s, 95), min: s[0], max: s[s.length - 1] };
}

/**
 * The bench. Options: scale ("full" | "small"), clients (["0.3", "0.4"]), worlds
 * (DEFAULT_WORLDS; one not available in the profile is left out with a note), only
 * (scenario names), runs / seqRuns / soRuns / steps (override the scale's), profile
 * ("beta42"), oursVars, timeoutMs (a run's, default 60 s), log.
 *
 * Returns {scale, cfg, profile, runtime, date, worlds, notes, clients: {"0.3": {version,
 * machine, worlds: {ours: {scenario: {runs, failed, errors, metrics: {metric: {n, median, p95,
 * min, max, samples}}}}}}}, machine}. world-local appears under the first client only.
 */
export async function devkitBench({
  scale = "full",
  clients = Object.keys(CLIENTS),
  worlds = DEFAULT_WORLDS,
  only,
  profile = "beta42",
  oursVars = {},
  timeoutMs = 60_000,
  log = (m) => console.error(m),
  ...overrides
} = {}) {
  if (!SCALES[scale]) throw new Error(`unknown scale ${scale} (${Object.keys(SCALES).join(", ")})`);
  const cfg = { ...SCALES[scale], timeoutMs };
  for (const [k, v] of Object.entries(overrides)) if (k in cfg && v !== undefined) cfg[k] = v;
  let chosen = scenarios(cfg);
  if (only?.length) {
    const unknown = only.filter((n) => !chosen.some((s) => s.name === n));
    if (unknown.length) throw new Error(`unknown scenario(s) ${unknown.join(", ")} (have: ${chosen.map((s) => s.name).join(", ")})`);
    chosen = chosen.filter((s) => only.includes(s.name));
  }
  const notes = [];
  const usable = [];
  for (const w of worlds) {
    if (!WORLDS[w]) throw new Error(`unknown World ${w} (have: ${Object.keys(WORLDS).join(", ")})`);
    const why = WORLDS[w].available(profile);
    if (why) notes.push(`${WORLDS[w].label} left out: ${why}`);
    else usable.push(w);
  }
  const dir = devkitApp(profile);
  const m0 = machineStart();
  const result = { scale, cfg, profile, runtime: PROFILES[profile].runtime, date: new Date().toISOString(), worlds: usable, scenarios: chosen.map(({ name, label }) => ({ name, label })), notes, clients: {} };
  for (const [ci, client] of clients.entries()) {
    const here = usable.filter((w) => WORLDS[w].perClient || ci === 0);
    const m = machineStart();
    const c = { version: CLIENTS[client], worlds: {} };
    result.clients[client] = c;
    const sides = {};
    try {
      for (const w of here) {
        log(`devkit: client ${CLIENTS[client]}: starting ${WORLDS[w].label}`);
        sides[w] = { world: w, ...(await WORLDS[w].start({ client, profile, dir, oursVars })) };
        c.worlds[w] = {};
      }
      for (const s of chosen) {
        const state = {};
        for (const w of here) state[w] = c.worlds[w][s.name] = { runs: 0, failed: 0, errors: [], raw: {}, aborted: false };
        // Warm-up on every World.
        for (const w of here) {
          for (let i = 0; i < s.warmup; i++) {
            try {
              await runOnce(sides[w], s, cfg);
            } catch (err) {
              state[w].errors.push(`warm-up: ${err.message}`);
              log(`  ${WORLDS[w].label}: ${s.name} warm-up failed: ${err.message}`);
            }
          }
        }
        log(`devkit: client ${CLIENTS[client]}: ${s.name} (${s.label}), ${s.runs} run(s) on ${here.map((w) => WORLDS[w].label).join(", ")}`);
        for (let i = 0; i < s.runs; i++) {
          const order = i % 2 === 0 ? here : [...here].reverse();
          for (const w of order) {
            const st = state[w];
            if (st.aborted) continue;
            try {
              const r = await runOnce(sides[w], s, cfg);
              st.runs++;
              for (const [k, v] of Object.entries(r.samples)) (st.raw[k] ??= []).push(...(Array.isArray(v) ? v : [v]));
            } catch (err) {
              st.failed++;
              st.errors.push(err.message);
              log(`  ${WORLDS[w].label}: ${err.message}`);
              if (st.runs === 0 && st.failed >= 2) {
                st.aborted = true;
                log(`  ${WORLDS[w].label}: ${s.name} stopped: no successful run`);
              }
            }
          }
        }
        for (const w of here) {
          const st = state[w];
          st.metrics = {};
          for (const [k, v] of Object.entries(st.raw)) st.metrics[k] = { ...summarize(v), samples: v };
          delete st.raw;
          log(`  ${WORLDS[w].label}: ${Object.entries(st.metrics).map(([k, x]) => `${k} median ${f1(x.median)} p95 ${f1(x.p95)} ms (${x.n})`).join("; ") || "no samples"}${st.failed ? `; ${st.failed} failed` : ""}`);
        }
      }
    } finally {
      for (const s of Object.values(sides)) await s.stop();
    }
    c.machine = machineEnd(m);
  }
  result.machine = machineEnd(m0);
  return result;
}

// ---- the report ----

const f0 = (x) => (Number.isFinite(x) ? x.toFixed(0) : "–");
const f1 = (x) => (Number.isFinite(x) ? x.toFixed(1) : "–");
const f2 = (x) => (Number.isFinite(x) ? x.toFixed(2) : "–");

/** The metrics in report order: [scenario, metric, label]. */
function metricRows(res) {
  const rows = [];
  const names = res.scenarios.map((s) => s.name);
  for (const n of names) {
    if (n === "step" || n === "stream" || n === "hook") rows.push([n, "ttfs", `TTFS ${n === "hook" ? "hook + stream (non-turbo)" : `${n} (turbo)`}`]);
    else if (n === "sequential") {
      for (const r of STSO_RANGES) if (r[0] < res.cfg.steps) rows.push([n, `stso ${rangeName(r)}`, `STSO steps ${r[0]}–${Math.min(r[1], res.cfg.steps - 1)}`]);
      rows.push([n, "wo", `WO (${res.cfg.steps} steps)`]);
    } else if (n === "sl") rows.push([n, "sl", "SL"]);
    else if (n.startsWith("so-")) rows.push([n, "so", `SO ${n.slice(3)}`]);
  }
  return rows;
}

function table(head, rows) {
  return [`| ${head.join(" | ")} |`, `| ${head.map(() => "---").join(" | ")} |`, ...rows.map((r) => `| ${r.join(" | ")} |`)].join("\n");
}

export function formatDevkit(res) {
  const loadLine = (m) =>
    `load average ${m.loadavgStart.map(f2).join(" ")} → ${m.loadavgEnd.map(f2).join(" ")}, machine busy ${f0(m.busyPct)} % of ${m.cpus} CPUs, host steal ${f1(m.stealPct)} %, ${f0(m.wallS)} s`;
  const lines = [
    `# DevKit bench (${res.scale}) ${res.date.slice(0, 16).replace("T", " ")} UTC: Workflow runtime ${res.runtime} (profile ${res.profile}); ` +
      `${res.cfg.runs} runs per TTFS/SL scenario, ${res.cfg.soRuns} per SO mode (${res.cfg.soChunks} deltas at ${res.cfg.soIntervalMs} ms), ${res.cfg.seqRuns} × ${res.cfg.steps} sequential steps; the Worlds alternating run by run`,
    "# ms on the app's clock, median / p95 (n: samples); a shared machine: read the load line",
  ];
  for (const n of res.notes) lines.push(`# ${n}`);
  const rows = metricRows(res);
  const local = Object.values(res.clients).find((c) => c.worlds.local)?.worlds.local;
  for (const [client, c] of Object.entries(res.clients)) {
    const ws = Object.keys(c.worlds).filter((w) => w !== "local");
    const cols = [...ws.map((w) => WORLDS[w].label), ...(local ? ["world-local (no client)"] : [])];
    const cell = (st, metric) => {
      const x = st?.metrics?.[metric];
      if (!x) return st?.failed ? `✗ ${st.failed} failed` : "–";
      return `${f1(x.median)} / ${f1(x.p95)} (${x.n})${st.failed ? ` ✗ ${st.failed} failed` : ""}`;
    };
    const body = rows.map(([scen, metric, label]) => [label, ...ws.map((w) => cell(c.worlds[w][scen], metric)), ...(local ? [cell(local[scen], metric)] : [])]);
    const ratioCol = ws.includes("ours") && ws.includes("reference");
    if (ratioCol) {
      for (const [i, [scen, metric]] of rows.entries()) {
        const o = c.worlds.ours[scen]?.metrics?.[metric]?.median;
        const r = c.worlds.reference[scen]?.metrics?.[metric]?.median;
        body[i].push(f2(o / r));
      }
    }
    lines.push("", `## client ${c.version}: ${loadLine(c.machine)}`, "", table(["metric", ...cols, ...(ratioCol ? ["ours / reference (median)"] : [])], body));
  }
  const errs = [];
  for (const [client, c] of Object.entries(res.clients)) {
    for (const [w, byScen] of Object.entries(c.worlds)) {
      for (const [scen, st] of Object.entries(byScen)) {
        for (const e of st.errors.slice(0, 3)) errs.push(`- ${WORLDS[w].label}${w === "local" ? "" : ` ${c.version}`} ${scen}: ${e.slice(0, 300)}`);
        if (st.errors.length > 3) errs.push(`- … ${st.errors.length - 3} more for ${WORLDS[w].label} ${scen}`);
      }
    }
    void client;
  }
  lines.push("", errs.length ? `failures:\n${errs.join("\n")}` : "every run completed and gave its samples");
  lines.push("", `whole bench: ${loadLine(res.machine)}`);
  return lines.join("\n");
}

/** Every run failed or missing sample, as messages (empty: all good). */
export function problems(res) {
  const out = [];
  const rows = metricRows(res);
  for (const c of Object.values(res.clients)) {
    for (const [w, byScen] of Object.entries(c.worlds)) {
      const who = `${WORLDS[w].label}${w === "local" ? "" : ` through ${c.version}`}`;
      for (const [scen, metric] of rows) {
        const st = byScen[scen];
        if (!st) out.push(`${who}: ${scen} did not run`);
        else if (!st.metrics?.[metric]?.n || !Number.isFinite(st.metrics[metric].median)) out.push(`${who}: ${scen} gave no ${metric}`);
      }
      for (const [scen, st] of Object.entries(byScen)) if (st.failed) out.push(`${who}: ${scen}: ${st.failed} run(s) failed: ${st.errors.filter((e) => !e.startsWith("warm-up")).slice(0, 2).join("; ")}`);
    }
  }
  return out;
}

// ---- the command ----

const USAGE =
  "usage: npm run bench -- devkit [--client 0.3|0.4|both] [--worlds ours,reference,local] [--only step,stream,hook,sequential,sl,so-text,so-structured]\n" +
  "       [--scale full|small] [--runs N] [--so-runs N] [--steps N] [--seq-runs N] [--profile beta42] [--var K=V] [--json out.json]";

export function parseDevkitArgs(argv) {
  const opts = { clients: Object.keys(CLIENTS), worlds: DEFAULT_WORLDS, scale: "full", only: undefined, profile: "beta42", oursVars: {}, json: null };
  const value = (i, flag) => flagValue(argv, i, flag);
  const int = positiveInt;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--client") opts.clients = clientsArg(value(i++, a));
    else if (a === "--worlds") {
      opts.worlds = value(i++, a).split(",").filter(Boolean);
      for (const w of opts.worlds) if (!WORLDS[w]) throw new Error(`--worlds: ${Object.keys(WORLDS).join(", ")}; got ${w}`);
    } else if (a === "--only") {
      opts.only = value(i++, a).split(",").filter(Boolean);
      const have = scenarios(SCALES.full).map((s) => s.name);
      for (const n of opts.only) if (!have.includes(n)) throw new Error(`--only: ${have.join(", ")}; got ${n}`);
    }
    else if (a === "--scale") {
      opts.scale = value(i++, a);
      if (!SCALES[opts.scale]) throw new Error(`--scale: ${Object.keys(SCALES).join(" or ")}, got ${opts.scale}`);
    } else if (a === "--runs") opts.runs = int(value(i++, a), a);
    else if (a === "--so-runs") opts.soRuns = int(value(i++, a), a);
    else if (a === "--seq-runs") opts.seqRuns = int(value(i++, a), a);
    else if (a === "--steps") opts.steps = int(value(i++, a), a);
    else if (a === "--profile") opts.profile = profileArg(value(i++, a));
    else if (a === "--var") varArg(value(i++, a), opts.oursVars);
    else if (a === "--json") opts.json = value(i++, a);
    else if (a === "--help" || a === "-h") throw new Error("");
    else throw new Error(`unknown option ${a}`);
  }
  return opts;
}

/** npm run bench -- devkit …: prints the report; exit code 1 when a run failed or a figure is missing. */
export async function main(argv) {
  let opts;
  try {
    opts = parseDevkitArgs(argv);
  } catch (err) {
    console.error(`${err.message ? `${err.message}\n` : ""}${USAGE}`);
    return 2;
  }
  const { json, ...rest } = opts;
  const res = await devkitBench(rest);
  console.log(formatDevkit(res));
  if (json) writeFileSync(json, JSON.stringify(res, null, 2));
  return problems(res).length ? 1 : 0;
}

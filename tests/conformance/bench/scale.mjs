// How far one deployment goes (npm run bench -- scale; issue #54): K workflows of a shape
// users run, started together through a real world-celld client and the Workflow runtime,
// on an instrumented copy of our worker (bench/instrument.mjs: every stub call an object
// serves and every alarm it runs, per object), for each queue layout asked (`--layouts`,
// default: one queue object per client shard, QUEUE_PARTITIONS=1, and the default, 16),
// side by side in one run. Per shape, client and layout: requests and alarms per workflow
// for each Durable Object class (with how many instances served them), the busiest single
// object and the busiest queue object, its share of all object requests, and the projected
// ceiling: the workflows per second at which the busiest object shared by runs reaches
// Cloudflare's soft limit of about 1,000 requests per second per object
// (https://developers.cloudflare.com/durable-objects/platform/limits/; a run's own object,
// WORKFLOW_DB or WORKFLOW_STREAMS, serves one run whatever the rate, so it sets no ceiling).
//
// CPU per object call: the same burst again on the plain (uninstrumented) worker, workerd's
// CPU time over it (/proc) divided by the object calls and alarms the instrumented run
// counted. It includes the Worker's own routing and every object's work, so it is an upper
// bound of what one call costs the object that serves it; `ceiling (CPU)` is the rate at
// which the busiest shared object would spend a whole second of CPU per second.
//
// Shapes (bench/workflows/io.ts): noSteps (a workflow with no step), oneStep (one step that
// returns at once), par10 (a Promise.all of 10 such steps), io (one step that waits 1 s on
// the outside world). The instrumented copy is never timed: its proxies cost CPU.
//
//   node scripts/bench.mjs scale [--client 0.3|0.4|both] [--workflows K] [--only noSteps,...]
//        [--layouts 1,16] [--var K=V] [--json out.json]

import { CLIENTS, PROFILES } from "../lib/profile.mjs";
import { startApp } from "../lib/app.mjs";
import { processCpuMs, startServer } from "../lib/workers.mjs";
import { clientsArg, flagValue, varArg } from "../../../scripts/bench/args.mjs";
import { expectedOutput, FILE, ioApp, waitAll } from "./io.mjs";
import { instrumentedEntry, readCounts, resetCounts, warmQueue } from "./instrument.mjs";

export const SHAPES = [
  { name: "noSteps", workflow: "ioSequential", steps: 0, ms: 0 },
  { name: "oneStep", workflow: "ioSequential", steps: 1, ms: 0 },
  { name: "par10", workflow: "ioParallel", steps: 10, ms: 0 },
  { name: "io", workflow: "ioSequential", steps: 1, ms: 1000 },
];
/** Cloudflare's documented soft limit of requests per second to one Durable Object. */
export const OBJECT_RPS = 1000;
/** Classes with an object per run (or stream): their load does not grow with the rate. */
export const PER_RUN = new Set(["WORKFLOW_DB", "WORKFLOW_STREAMS"]);
/**
 * Cloudflare's published prices, per million (Workers Paid; read 2026-11-30, as
 * docs/performance.md "What it costs"): Worker requests, Durable Object requests, rows
 * written, rows read, and duration per GB-s (an object is billed 128 MB while active).
 */
export const PRICES = { workerRequests: 0.3, objectRequests: 0.15, rowsWritten: 1.0, rowsRead: 0.001, gbSeconds: 12.5 };
export const OBJECT_GB = 0.128;

/**
 * The platform's bill per million workflows from per-workflow figures: Worker requests
 * (the client's requests), object calls, rows, and duration counted as the time queue
 * objects hold deliveries open (each delivery's time at the app: an object waiting on the
 * app is active), a lower bound (objects' own request handling adds milliseconds).
 */
export function costPerMillion({ workerRequests, objectCalls, rowsWritten, rowsRead, deliverySeconds }) {
  const duration = deliverySeconds * OBJECT_GB * PRICES.gbSeconds;
  const total = workerRequests * PRICES.workerRequests + objectCalls * PRICES.objectRequests + rowsWritten * PRICES.rowsWritten + rowsRead * PRICES.rowsRead + duration;
  return { total, duration };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Per-object counts → per class (binding) and the busiest object, per workflow.
 * `objects`: {id: {binding, name, requests, alarms}}.
 */
export function summarize(objects, workflows) {
  const classes = {};
  let total = 0;
  let busiest = null;
  let shared = null;
  let queue = null;
  const load = (o) => o.requests + o.alarms;
  const queueInstances = new Set();
  for (const [id, o] of Object.entries(objects)) {
    const binding = o.binding || "?";
    const c = (classes[binding] ??= { instances: 0, requests: 0, alarms: 0 });
    c.instances += 1;
    c.requests += o.requests;
    c.alarms += o.alarms;
    total += o.requests;
    const entry = { id, ...o };
    if (!busiest || load(o) > load(busiest)) busiest = entry;
    if (!PER_RUN.has(binding) && (!shared || load(o) > load(shared))) shared = entry;
    if (binding === "WORKFLOW_QUEUE" && !String(o.name).includes("#courier:")) {
      queueInstances.add(o.name);
      if (!queue || load(o) > load(queue)) queue = entry;
    }
  }
  const per = (n) => n / workflows;
  const describe = (b) =>
    b && {
      binding: b.binding,
      name: b.name,
      requestsPerWorkflow: per(b.requests),
      alarmsPerWorkflow: per(b.alarms),
      share: total ? b.requests / total : 0,
    };
  const out = {
    workflows,
    requestsPerWorkflow: per(total),
    classes: Object.fromEntries(Object.entries(classes).map(([b, c]) => [b, { instances: c.instances, requestsPerWorkflow: per(c.requests), alarmsPerWorkflow: per(c.alarms) }])),
    busiest: describe(busiest),
    busiestShared: describe(shared),
    busiestQueue: describe(queue),
    // Queue instances that hold queue state (couriers aside).
    queueInstances: queueInstances.size,
  };
  out.ceilingWorkflowsPerS = shared && load(shared) > 0 ? OBJECT_RPS / per(load(shared)) : null;
  return out;
}

/** One shape through one client: K workflows started together; the per-object counts. */
/** K workflows of `shape` started together on `side`, every one completed with its output: the wall time. */
async function burst(side, { client, shape, workflows }) {
  const tags = Array.from({ length: workflows }, (_, i) => `${shape.name}-${client}-${i}`);
  const t0 = Date.now();
  const started = await Promise.all(tags.map((tag) => side.app.start(FILE, shape.workflow, [tag, shape.steps, shape.ms])));
  const records = await waitAll(side, started.map((r) => r.runId), 240_000);
  const wallMs = Date.now() - t0;
  for (const [i, r] of records.entries()) {
    if (r.status !== "completed") throw new Error(`${shape.name}: run ${r.runId} ${r.status}`);
    const out = await side.app.output(r.runId);
    if (out !== expectedOutput(tags[i], shape.steps)) throw new Error(`${shape.name}: run ${r.runId} returned ${JSON.stringify(out)}`);
  }
  return wallMs;
}

/** One side: our worker (instrumented or plain) and the app, warmed by one workflow of the shape. */
async function startSide({ client, profile, dir, shape, vars, instrumented }) {
  const server = await startServer({ server: "ours", client, profile, vars, ...(instrumented ? { wrapEntry: instrumentedEntry(profile) } : {}) });
  try {
    const app = await startApp({ profile, dir, client, server, env: { WORKFLOW_BASE_URL: "self", BENCH_COUNT_DELIVERIES: "0" } });
    const side = { world: "ours", server, app };
    const { runId: warm } = await app.start(FILE, shape.workflow, [`warm-${shape.name}`, shape.steps, shape.ms]);
    await waitAll(side, [warm], 60_000);
    // Every queue object ready before the count (what happens once in its life is not a
    // workflow's: bench/instrument.mjs warmQueue).
    await warmQueue(server);
    await sleep(500);
    return side;
  } catch (err) {
    await server.dispose().catch(() => {});
    throw err;
  }
}

/** workerd's CPU over the same burst on the plain worker (ms). */
async function plainCpuMs({ client, profile, dir, shape, workflows, vars }) {
  const side = await startSide({ client, profile, dir, shape, vars, instrumented: false });
  try {
    const cpu = () => side.server.pids().reduce((a, pid) => a + processCpuMs(pid), 0);
    const before = cpu();
    await burst(side, { client, shape, workflows });
    await sleep(1500);
    return cpu() - before;
  } finally {
    await side.app.stop().catch(() => {});
    await side.server.dispose().catch(() => {});
  }
}

export async function runShape({ client, profile, dir, shape, workflows, vars = {}, layout = null, cpu = true, log = () => {} }) {
  const side = await startSide({ client, profile, dir, shape, vars, instrumented: true });
  let result;
  let calls;
  try {
    const { server, app } = side;
    await resetCounts(server);
    await app.resetTrace();
    const wallMs = await burst(side, { client, shape, workflows });
    // The queue's acknowledgements and the couriers' last reports.
    await sleep(1500);
    const counts = await readCounts(server);
    calls = counts.objectCalls + Object.values(counts.objects).reduce((a, o) => a + o.alarms, 0);
    const summary = summarize(counts.objects, workflows);
    const trace = await app.trace();
    const per = (n) => n / workflows;
    const platform = {
      workerRequests: per(trace.filter((e) => e.kind === "request").length),
      objectCalls: per(counts.objectCalls),
      rowsWritten: per(counts.rowsWritten),
      rowsRead: per(counts.rowsRead),
      alarmsSet: per(counts.alarmsSet),
      deliverySeconds: per(trace.filter((e) => e.kind === "delivery" && e.end > 0).reduce((a, e) => a + (e.end - e.start), 0) / 1000),
    };
    summary.platform = platform;
    summary.costPerMillion = costPerMillion(platform);
    log(`  ${CLIENTS[client]} ${shape.name}, ${layoutName(layout)}: ${workflows} workflows in ${wallMs} ms; ${summary.requestsPerWorkflow.toFixed(1)} object requests per workflow; busiest shared ${summary.busiestShared?.binding} ${summary.busiestShared?.name}; ${summary.queueInstances} queue instances`);
    result = { client: CLIENTS[client], shape: shape.name, layout, wallMs, ...summary };
  } finally {
    await side.app.stop().catch(() => {});
    await side.server.dispose().catch(() => {});
  }
  if (cpu) {
    const cpuMs = await plainCpuMs({ client, profile, dir, shape, workflows, vars });
    result.cpu = { serverMs: cpuMs, perCallMs: calls ? cpuMs / calls : null };
    const b = result.busiestShared;
    const busiestPerWf = b ? b.requestsPerWorkflow + b.alarmsPerWorkflow : 0;
    result.cpuCeilingWorkflowsPerS = result.cpu.perCallMs && busiestPerWf ? 1000 / (result.cpu.perCallMs * busiestPerWf) : null;
  }
  return result;
}

/** A layout's label: its partitions per client shard. */
export function layoutName(layout) {
  return layout === null || layout === undefined ? "default layout" : layout === 1 ? "1 queue object" : `${layout} partitions`;
}

const f1 = (x) => (x === null || x === undefined ? "–" : x.toFixed(1));

const f2 = (x) => (x === null || x === undefined ? "–" : x.toFixed(2));
const f0 = (x) => (x === null || x === undefined ? "–" : String(Math.round(x)));

export function formatScale(res) {
  const lines = [
    `# How far one deployment goes (npm run bench -- scale), runtime ${res.runtime}, ${res.date}`,
    `${res.workflows} workflows of each shape started together; per workflow; ceiling = ${OBJECT_RPS} / (the busiest object shared by runs: its requests + alarms per workflow); CPU: workerd's over the same burst on the plain worker, per object call (an upper bound)`,
    "",
  ];
  lines.push(
    "| client | shape | layout | object requests | queue instances | busiest queue object · calls | busiest shared object · calls | its share | ceiling (workflows/s) | CPU ms per call | ceiling by CPU |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
  );
  for (const r of res.results) {
    const q = r.busiestQueue || {};
    const b = r.busiestShared || {};
    const calls = (x) => f2((x.requestsPerWorkflow ?? 0) + (x.alarmsPerWorkflow ?? 0));
    lines.push(
      `| ${r.client} | ${r.shape} | ${layoutName(r.layout)} | ${f1(r.requestsPerWorkflow)} | ${r.queueInstances} | \`${q.name}\` ${calls(q)} | ${b.binding} \`${b.name}\` ${calls(b)} | ${((b.share || 0) * 100).toFixed(0)} % | ${f0(r.ceilingWorkflowsPerS)} | ${f2(r.cpu?.perCallMs)} | ${f0(r.cpuCeilingWorkflowsPerS)} |`,
    );
  }
  // The layouts side by side: the busiest queue object's calls per workflow against one queue object's.
  const one = new Map(res.results.filter((r) => r.layout === 1).map((r) => [`${r.client}|${r.shape}`, r]));
  const paired = res.results.filter((r) => r.layout !== 1 && one.has(`${r.client}|${r.shape}`));
  if (paired.length) {
    lines.push("", "| client | shape | layout | busiest queue object, calls per workflow | with one queue object | ratio |", "| --- | --- | --- | --- | --- | --- |");
    for (const r of paired) {
      const o = one.get(`${r.client}|${r.shape}`);
      const load = (x) => (x?.requestsPerWorkflow ?? 0) + (x?.alarmsPerWorkflow ?? 0);
      lines.push(`| ${r.client} | ${r.shape} | ${layoutName(r.layout)} | ${f2(load(r.busiestQueue))} | ${f2(load(o.busiestQueue))} | ${load(o.busiestQueue) ? f2(load(r.busiestQueue) / load(o.busiestQueue)) : "–"} |`);
    }
  }
  lines.push("", "| client | shape | layout | Worker requests | object calls | rows written | rows read | alarms set | delivery s | $ per million workflows (duration) |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
  for (const r of res.results) {
    const p = r.platform;
    lines.push(`| ${r.client} | ${r.shape} | ${layoutName(r.layout)} | ${f1(p.workerRequests)} | ${f1(p.objectCalls)} | ${f1(p.rowsWritten)} | ${f1(p.rowsRead)} | ${f1(p.alarmsSet)} | ${p.deliverySeconds.toFixed(2)} | ${r.costPerMillion.total.toFixed(1)} (${r.costPerMillion.duration.toFixed(1)}) |`);
  }
  lines.push("", "| client | shape | layout | class | instances | requests · alarms per workflow |", "| --- | --- | --- | --- | --- | --- |");
  for (const r of res.results) {
    for (const [b, c] of Object.entries(r.classes).sort((x, y) => y[1].requestsPerWorkflow - x[1].requestsPerWorkflow)) {
      lines.push(`| ${r.client} | ${r.shape} | ${layoutName(r.layout)} | ${b} | ${c.instances} | ${f1(c.requestsPerWorkflow)} · ${f1(c.alarmsPerWorkflow)} |`);
    }
  }
  return lines.join("\n");
}

/** `--layouts 1,16`: partition counts (1..16), or `default`. */
export function layoutsArg(text) {
  return text.split(",").filter(Boolean).map((t) => {
    if (t === "default") return null;
    const n = Number(t);
    if (!Number.isInteger(n) || n < 1 || n > 16) throw new Error(`--layouts: partition counts from 1 to 16, or default; got ${t}`);
    return n;
  });
}

export async function main(argv) {
  const opts = { clients: ["0.4"], workflows: 50, only: null, vars: {}, json: null, profile: "beta42", layouts: [1, null], cpu: true };
  try {
    for (let i = 0; i < argv.length; i++) {
      const a = argv[i];
      const value = () => flagValue(argv, i++, a);
      if (a === "--client") opts.clients = clientsArg(value());
      else if (a === "--workflows") {
        opts.workflows = Number(value());
        if (!Number.isInteger(opts.workflows) || opts.workflows < 1 || opts.workflows > 1000) throw new Error("--workflows: an integer from 1 to 1000");
      } else if (a === "--only") opts.only = value().split(",").filter(Boolean);
      else if (a === "--layouts") opts.layouts = layoutsArg(value());
      else if (a === "--no-cpu") opts.cpu = false;
      else if (a === "--var") varArg(value(), opts.vars);
      else if (a === "--json") opts.json = value();
      else throw new Error(`unknown option ${a}`);
    }
    for (const n of opts.only || []) if (!SHAPES.some((s) => s.name === n)) throw new Error(`--only: ${SHAPES.map((s) => s.name).join(", ")}; got ${n}`);
    if (!opts.layouts.length) throw new Error("--layouts: at least one");
  } catch (err) {
    console.error(`${err.message}\nusage: node scripts/bench.mjs scale [--client 0.3|0.4|both] [--workflows K] [--only noSteps,oneStep,par10,io] [--layouts 1,default] [--no-cpu] [--var K=V] [--json out.json]`);
    return 2;
  }
  const dir = ioApp(opts.profile);
  const results = [];
  for (const client of opts.clients) {
    for (const shape of SHAPES.filter((s) => !opts.only || opts.only.includes(s.name))) {
      for (const layout of opts.layouts) {
        const vars = layout === null ? opts.vars : { ...opts.vars, QUEUE_PARTITIONS: String(layout) };
        results.push(await runShape({ client, profile: opts.profile, dir, shape, workflows: opts.workflows, vars, layout, cpu: opts.cpu, log: (m) => console.error(m) }));
      }
    }
  }
  const res = { date: new Date().toISOString(), runtime: PROFILES[opts.profile].runtime, workflows: opts.workflows, results };
  console.log(formatScale(res));
  if (opts.json) (await import("node:fs")).writeFileSync(opts.json, JSON.stringify(res, null, 2));
  return 0;
}

// How far one deployment goes (npm run bench -- scale; issue #54): K workflows of a shape
// users run, started together through a real world-celld client and the Workflow runtime,
// on an instrumented copy of our worker (bench/instrument.mjs: every stub call an object
// serves and every alarm it runs, per object), default configuration. Per shape and client:
// requests and alarms per workflow for each Durable Object class (with how many instances
// served them), the busiest single object, its share of all object requests, and the
// projected ceiling: the workflows per second at which that object reaches Cloudflare's
// soft limit of about 1,000 requests per second per object
// (https://developers.cloudflare.com/durable-objects/platform/limits/).
//
// Shapes (bench/workflows/io.ts): noSteps (a workflow with no step), oneStep (one step that
// returns at once), par10 (a Promise.all of 10 such steps), io (one step that waits 1 s on
// the outside world). The instrumented copy is never timed: its proxies cost CPU.
//
//   node scripts/bench.mjs scale [--client 0.3|0.4|both] [--workflows K] [--only noSteps,...]
//        [--var K=V] [--json out.json]

import { CLIENTS, PROFILES } from "../lib/profile.mjs";
import { startApp } from "../lib/app.mjs";
import { startServer } from "../lib/workers.mjs";
import { clientsArg, flagValue, varArg } from "../../../scripts/bench/args.mjs";
import { expectedOutput, FILE, ioApp, waitAll } from "./io.mjs";
import { instrumentedEntry, readCounts, resetCounts } from "./instrument.mjs";

export const SHAPES = [
  { name: "noSteps", workflow: "ioSequential", steps: 0, ms: 0 },
  { name: "oneStep", workflow: "ioSequential", steps: 1, ms: 0 },
  { name: "par10", workflow: "ioParallel", steps: 10, ms: 0 },
  { name: "io", workflow: "ioSequential", steps: 1, ms: 1000 },
];
/** Cloudflare's documented soft limit of requests per second to one Durable Object. */
export const OBJECT_RPS = 1000;
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
  for (const [id, o] of Object.entries(objects)) {
    const binding = o.binding || "?";
    const c = (classes[binding] ??= { instances: 0, requests: 0, alarms: 0 });
    c.instances += 1;
    c.requests += o.requests;
    c.alarms += o.alarms;
    total += o.requests;
    if (!busiest || o.requests + o.alarms > busiest.requests + busiest.alarms) busiest = { id, ...o };
  }
  const per = (n) => n / workflows;
  const out = {
    workflows,
    requestsPerWorkflow: per(total),
    classes: Object.fromEntries(Object.entries(classes).map(([b, c]) => [b, { instances: c.instances, requestsPerWorkflow: per(c.requests), alarmsPerWorkflow: per(c.alarms) }])),
    busiest: busiest && {
      binding: busiest.binding,
      name: busiest.name,
      requestsPerWorkflow: per(busiest.requests),
      alarmsPerWorkflow: per(busiest.alarms),
      share: total ? busiest.requests / total : 0,
    },
  };
  out.ceilingWorkflowsPerS = busiest && busiest.requests > 0 ? OBJECT_RPS / per(busiest.requests + busiest.alarms) : null;
  return out;
}

/** One shape through one client: K workflows started together; the per-object counts. */
export async function runShape({ client, profile, dir, shape, workflows, vars = {}, log = () => {} }) {
  const server = await startServer({ server: "ours", client, profile, vars, wrapEntry: instrumentedEntry(profile) });
  let app;
  try {
    app = await startApp({ profile, dir, client, server, env: { WORKFLOW_BASE_URL: "self", BENCH_COUNT_DELIVERIES: "0" } });
    const side = { world: "ours", server, app };
    const { runId: warm } = await app.start(FILE, shape.workflow, [`warm-${shape.name}`, shape.steps, shape.ms]);
    await waitAll(side, [warm], 60_000);
    await sleep(500);
    await resetCounts(server);
    await app.resetTrace();
    const tags = Array.from({ length: workflows }, (_, i) => `${shape.name}-${client}-${i}`);
    const t0 = Date.now();
    const started = await Promise.all(tags.map((tag) => app.start(FILE, shape.workflow, [tag, shape.steps, shape.ms])));
    const records = await waitAll(side, started.map((r) => r.runId), 240_000);
    const wallMs = Date.now() - t0;
    for (const [i, r] of records.entries()) {
      if (r.status !== "completed") throw new Error(`${shape.name}: run ${r.runId} ${r.status}`);
      const out = await app.output(r.runId);
      if (out !== expectedOutput(tags[i], shape.steps)) throw new Error(`${shape.name}: run ${r.runId} returned ${JSON.stringify(out)}`);
    }
    // The queue's acknowledgements and the couriers' last reports.
    await sleep(1500);
    const counts = await readCounts(server);
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
    log(`  ${CLIENTS[client]} ${shape.name}: ${workflows} workflows in ${wallMs} ms; ${summary.requestsPerWorkflow.toFixed(1)} object requests per workflow; busiest ${summary.busiest?.binding} ${summary.busiest?.name} (${(summary.busiest?.share * 100).toFixed(0)} %)`);
    return { client: CLIENTS[client], shape: shape.name, wallMs, ...summary };
  } finally {
    await app?.stop().catch(() => {});
    await server.dispose().catch(() => {});
  }
}

const f1 = (x) => (x === null || x === undefined ? "–" : x.toFixed(1));

export function formatScale(res) {
  const lines = [`# How far one deployment goes (npm run bench -- scale), runtime ${res.runtime}, ${res.date}`, `${res.workflows} workflows of each shape started together; per workflow; ceiling = ${OBJECT_RPS} / (busiest object's requests + alarms per workflow)`, ""];
  lines.push("| client | shape | object requests | busiest object | its requests · alarms | its share | ceiling (workflows/s) |", "| --- | --- | --- | --- | --- | --- | --- |");
  for (const r of res.results) {
    const b = r.busiest || {};
    lines.push(`| ${r.client} | ${r.shape} | ${f1(r.requestsPerWorkflow)} | ${b.binding} \`${b.name}\` | ${f1(b.requestsPerWorkflow)} · ${f1(b.alarmsPerWorkflow)} | ${((b.share || 0) * 100).toFixed(0)} % | ${r.ceilingWorkflowsPerS === null ? "–" : Math.round(r.ceilingWorkflowsPerS)} |`);
  }
  lines.push("", "| client | shape | Worker requests | object calls | rows written | rows read | alarms set | delivery s | $ per million workflows (duration) |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
  for (const r of res.results) {
    const p = r.platform;
    lines.push(`| ${r.client} | ${r.shape} | ${f1(p.workerRequests)} | ${f1(p.objectCalls)} | ${f1(p.rowsWritten)} | ${f1(p.rowsRead)} | ${f1(p.alarmsSet)} | ${p.deliverySeconds.toFixed(2)} | ${r.costPerMillion.total.toFixed(1)} (${r.costPerMillion.duration.toFixed(1)}) |`);
  }
  lines.push("", "| client | shape | class | instances | requests · alarms per workflow |", "| --- | --- | --- | --- | --- |");
  for (const r of res.results) {
    for (const [b, c] of Object.entries(r.classes).sort((x, y) => y[1].requestsPerWorkflow - x[1].requestsPerWorkflow)) {
      lines.push(`| ${r.client} | ${r.shape} | ${b} | ${c.instances} | ${f1(c.requestsPerWorkflow)} · ${f1(c.alarmsPerWorkflow)} |`);
    }
  }
  return lines.join("\n");
}

export async function main(argv) {
  const opts = { clients: ["0.4"], workflows: 50, only: null, vars: {}, json: null, profile: "beta42" };
  try {
    for (let i = 0; i < argv.length; i++) {
      const a = argv[i];
      const value = () => flagValue(argv, i++, a);
      if (a === "--client") opts.clients = clientsArg(value());
      else if (a === "--workflows") {
        opts.workflows = Number(value());
        if (!Number.isInteger(opts.workflows) || opts.workflows < 1 || opts.workflows > 1000) throw new Error("--workflows: an integer from 1 to 1000");
      } else if (a === "--only") opts.only = value().split(",").filter(Boolean);
      else if (a === "--var") varArg(value(), opts.vars);
      else if (a === "--json") opts.json = value();
      else throw new Error(`unknown option ${a}`);
    }
    for (const n of opts.only || []) if (!SHAPES.some((s) => s.name === n)) throw new Error(`--only: ${SHAPES.map((s) => s.name).join(", ")}; got ${n}`);
  } catch (err) {
    console.error(`${err.message}\nusage: node scripts/bench.mjs scale [--client 0.3|0.4|both] [--workflows K] [--only noSteps,oneStep,par10,io] [--var K=V] [--json out.json]`);
    return 2;
  }
  const dir = ioApp(opts.profile);
  const results = [];
  for (const client of opts.clients) {
    for (const shape of SHAPES.filter((s) => !opts.only || opts.only.includes(s.name))) {
      results.push(await runShape({ client, profile: opts.profile, dir, shape, workflows: opts.workflows, vars: opts.vars, log: (m) => console.error(m) }));
    }
  }
  const res = { date: new Date().toISOString(), runtime: PROFILES[opts.profile].runtime, workflows: opts.workflows, results };
  console.log(formatScale(res));
  if (opts.json) (await import("node:fs")).writeFileSync(opts.json, JSON.stringify(res, null, 2));
  return 0;
}

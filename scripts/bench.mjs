#!/usr/bin/env node
// npm run bench: benchmarks against the built worker (build/index.js) on Miniflare.
//
//   node scripts/bench.mjs                  every throughput workload (events, streams,
//                                           streams-binary, queue, index)
//   node scripts/bench.mjs queue events     selected workloads
//   node scripts/bench.mjs --runs N ...     repeat the selected workloads N times
//   node scripts/bench.mjs --http ...       drive the worker with node:http keep-alive instead
//                                           of Node's global fetch (the real client's
//                                           transport, the default; fetch costs ~1 ms of
//                                           client CPU per request on Node 20)
//
//   node scripts/bench.mjs cpu [getRun putOwned writeChunk enqueue getChunks event]
//        [--runs N] [--json out.json] [--ops N] [--concurrency N] [--build dir-or-index.js …]
//                                           server CPU per operation (workerd utime+stime),
//                                           as ms and as a multiple of GET /v1/health in
//                                           the same run; see scripts/bench/cpu.mjs
//   node scripts/bench.mjs cpu --floor [--build …] [--interleave [--slices N] [--max-steal P]] [--paired-max T]
//                                           the same, with the floor (scripts/bench/floor:
//                                           the least work a call can cost on this
//                                           workerd) as build A; interleaved runs also
//                                           give B/A over paired slices with its 95 %
//                                           confidence interval (N slices per run, 4)
//   node scripts/bench.mjs --compare before.json after.json
//
//   node scripts/bench.mjs wire [--rounds R]  the real 0.4.0 client against ours and the 0.4.0
//                                           reference: events/s, events.create p50/p99,
//                                           stream MiB/s (tests/conformance/bench/wire.mjs)
//
//   node scripts/bench.mjs workflows [--client 0.3|0.4|both] [--runs N] [--rounds R]
//        [--only w1,w2] [--profile beta42] [--no-counts] [--json out.json] [--trace W]
//        [--baseline REV]
//                                           the Workflow DevKit's standard benchmark through
//                                           the real clients and runtime, ours and the
//                                           reference worker alternating (with --baseline,
//                                           another build of ours too: a git revision, built
//                                           once under target/baselines/); see
//                                           scripts/bench/workflows.mjs
//
//   node scripts/bench.mjs io [--client 0.3|0.4|both] [--only seq,par,refuse]
//        [--worlds ours,reference,local] [--scale full|small] [--var K=V] [--repeat N] [--uncounted]
//        [--json out.json]
//                                           I/O-bound workflows (steps waiting 1 s on the
//                                           outside world) started together, on ours, the
//                                           reference worker and @workflow/world-local, through
//                                           the real client (0.4.0 by default); see
//                                           tests/conformance/bench/io.mjs
//
//   node scripts/bench.mjs scale [--client 0.3|0.4|both] [--workflows K]
//        [--only noSteps,oneStep,par10,io] [--var K=V] [--json out.json]
//                                           how far one deployment goes: per Durable Object
//                                           class and for the busiest object, the calls and
//                                           alarms per workflow, on an instrumented copy;
//                                           see tests/conformance/bench/scale.mjs
//
//   node scripts/bench.mjs devkit [--client 0.3|0.4|both] [--worlds ours,reference,local]
//        [--only step,stream,hook,sequential,sl,so-text,so-structured] [--scale full|small]
//        [--runs N] [--so-runs N] [--steps N] [--seq-runs N] [--var K=V] [--json out.json]
//                                           the Workflow DevKit's latency benchmark (TTFS,
//                                           STSO, WO, SL, SO on the app's clock) on ours, the
//                                           reference worker and @workflow/world-local side by
//                                           side; see tests/conformance/bench/devkit.mjs
//
// Each throughput workload gets a fresh worker with the default variables
// (QUEUE_MAX_INFLIGHT 128, QUEUE_MAX_ATTEMPTS 5, ...) and prints its own figures, plus the
// workerd's CPU over the workload when it can be found (Linux). Needs `npm run build` first.

import { startWorker } from "../tests/lib/harness.mjs";
import { eventsWorkload } from "./bench/events.mjs";
import { indexWorkload } from "./bench/index.mjs";
import { queueWorkload } from "./bench/queue.mjs";
import { streamsWorkload } from "./bench/streams.mjs";
import { streamsBinaryWorkload } from "./bench/streams-binary.mjs";
import { CPU_WORKLOADS, compareFiles, cpuMode } from "./bench/cpu.mjs";
import { cpuDelta, findWorkerd, sampleCpu, workerdPids } from "./bench/proc.mjs";

const WORKLOADS = {
  events: eventsWorkload,
  streams: streamsWorkload,
  "streams-binary": streamsBinaryWorkload,
  queue: queueWorkload,
  index: indexWorkload,
};

function parseArgs(argv) {
  const opts = { transport: "fetch", runs: 1, concurrency: 8, builds: [], json: null, opsOverride: undefined, compare: null, verbose: false, names: [] };
  const value = (i, flag) => {
    if (i + 1 >= argv.length) usage(`${flag} needs a value`);
    return argv[i + 1];
  };
  const int = (s, flag) => {
    const n = Number(s);
    if (!Number.isInteger(n) || n < 1) usage(`${flag} needs a positive integer, got ${s}`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--http") opts.transport = "http";
    else if (a === "--fetch") opts.transport = "fetch";
    else if (a === "--verbose" || a === "-v") opts.verbose = true;
    else if (a === "--interleave") opts.interleave = true;
    else if (a === "--floor") opts.floor = true;
    else if (a === "--runs") opts.runs = int(value(i++, a), a);
    else if (a === "--slices") opts.slices = int(value(i++, a), a);
    else if (a === "--max-steal") {
      opts.maxSteal = Number(value(i++, a));
      if (!(opts.maxSteal >= 0 && opts.maxSteal <= 100)) usage(`--max-steal needs a percentage, got ${argv[i]}`);
    }
    else if (a === "--paired-max") {
      opts.pairedMax = Number(value(i++, a));
      if (!(opts.pairedMax >= 1)) usage(`--paired-max needs a ratio of at least 1, got ${argv[i]}`);
    }
    else if (a === "--ops") opts.opsOverride = int(value(i++, a), a);
    else if (a === "--concurrency") opts.concurrency = int(value(i++, a), a);
    else if (a === "--json") opts.json = value(i++, a);
    else if (a === "--build") opts.builds.push(value(i++, a));
    else if (a === "--compare") {
      opts.compare = [value(i++, a)];
      if (i + 1 < argv.length && !argv[i + 1].startsWith("--")) opts.compare.push(argv[++i]);
    } else if (a === "--help" || a === "-h") usage();
    else if (a.startsWith("-")) usage(`unknown option ${a}`);
    else opts.names.push(a);
  }
  return opts;
}

function usage(msg) {
  if (msg) console.error(msg);
  console.error(
    [
      "usage: node scripts/bench.mjs [events|streams|queue …] [--http]",
      "       node scripts/bench.mjs cpu [getRun|putOwned|writeChunk|enqueue|getChunks|event …] [--http] [--runs N] [--json out.json] [--ops N] [--concurrency N] [--build path …] [--interleave [--slices N] [--max-steal P]] [--floor [--paired-max T]] [-v]",
      "       node scripts/bench.mjs --compare a.json b.json",
    ].join("\n"),
  );
  process.exit(msg ? 2 : 0);
}

if (process.argv[2] === "workflows") {
  const { main } = await import("./bench/workflows.mjs");
  process.exit(await main(process.argv.slice(3)));
}

if (process.argv[2] === "io") {
  const { main } = await import("../tests/conformance/bench/io.mjs");
  process.exit(await main(process.argv.slice(3)));
}

if (process.argv[2] === "scale") {
  const { main } = await import("../tests/conformance/bench/scale.mjs");
  process.exit(await main(process.argv.slice(3)));
}

if (process.argv[2] === "devkit") {
  const { main } = await import("../tests/conformance/bench/devkit.mjs");
  process.exit(await main(process.argv.slice(3)));
}

if (process.argv[2] === "wire") {
  const { runWireBench, formatWire } = await import("../tests/conformance/bench/wire.mjs");
  const i = process.argv.indexOf("--rounds");
  const rounds = i > 0 ? Number(process.argv[i + 1]) : 3;
  if (!Number.isInteger(rounds) || rounds < 1) {
    console.error("usage: node scripts/bench.mjs wire [--rounds R]");
    process.exit(2);
  }
  console.log(formatWire(await runWireBench({ rounds })));
  process.exit(0);
}

const opts = parseArgs(process.argv.slice(2));

if (opts.compare) {
  compareFiles(opts.compare);
  process.exit(0);
}

if (opts.names[0] === "cpu") {
  const unknownCpu = opts.names.slice(1).filter((n) => !(n in CPU_WORKLOADS));
  if (unknownCpu.length) usage(`unknown cpu workload(s): ${unknownCpu.join(", ")} (have: ${Object.keys(CPU_WORKLOADS).join(", ")})`);
  try {
    await cpuMode(opts.names.slice(1), opts);
    process.exit(0);
  } catch (err) {
    console.error(`cpu: FAILED: ${err?.stack || err}`);
    process.exit(1);
  }
}

const wanted = opts.names;
console.log(`# client transport: ${opts.transport === "http" ? "node:http keep-alive" : "fetch (undici, as the real client)"}`);
const unknown = wanted.filter((w) => !(w in WORKLOADS));
if (unknown.length) usage(`unknown workload(s): ${unknown.join(", ")} (have: ${Object.keys(WORKLOADS).join(", ")}; or: cpu …)`);
let failed = 0;
const order = [];
for (let r = 0; r < opts.runs; r++) order.push(...(wanted.length ? wanted : Object.keys(WORKLOADS)));
for (const [i, name] of order.entries()) {
  if (opts.runs > 1 && i % (order.length / opts.runs) === 0) console.log(`# run ${i / (order.length / opts.runs) + 1}/${opts.runs}`);
  const before = process.platform === "linux" ? workerdPids() : null;
  const worker = await startWorker({ vars: { WORLD_SECRET: "bench-secret" }, transport: opts.transport });
  try {
    let proc = null;
    try {
      proc = before && findWorkerd(before);
    } catch (err) {
      console.log(`# ${name}: no server CPU figure: ${err.message}`);
    }
    const a = proc && sampleCpu(proc);
    for (const line of await WORKLOADS[name](worker, { proc })) console.log(line);
    if (proc) console.log(`${name}: workerd CPU over the whole workload (incl. read-back) ${cpuDelta(a, sampleCpu(proc)).ms.toFixed(0)} ms`);
  } catch (err) {
    failed++;
    console.error(`${name}: FAILED: ${err?.stack || err}`);
  } finally {
    await worker.dispose();
  }
}
process.exit(failed ? 1 : 0);

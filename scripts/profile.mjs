#!/usr/bin/env node
// A V8 CPU profile of the worker's isolate while one `bench:cpu` workload runs: where a
// call's time goes (docs/performance.md). Starts the build in Miniflare with workerd's
// inspector, samples every 100 µs during the measured part, and prints the functions with
// the most self time (and, with --out, writes a .cpuprofile for Chrome DevTools).
//
//   node scripts/profile.mjs <workload> [--ops N] [--build path] [--top N] [--out file.cpuprofile]
//   node scripts/profile.mjs <workload> --perf [--out perf.data]
//   node scripts/profile.mjs <workload> --perf --against <build> [--build path]
//
// `--against` records the workload on two builds, the `--against` one first (`floor` for
// the floor of `bench:cpu --floor`, scripts/bench/floor), and prints the symbols whose
// samples grew most from it to `--build` over the same operations: where the extra CPU goes.
//
// For readable wasm frames build with `node scripts/build.mjs --profiling` first.
// `--perf` records the whole workerd process with Linux `perf` instead (needs `perf` on
// PATH): the split between our code (`[JIT]`), workerd itself and the kernel.

import { execFileSync, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join, resolve } from "node:path";
import WebSocket from "ws";
import { SCRIPT_PATH } from "../tests/lib/harness.mjs";
import { CPU_WORKLOADS, FLOOR_SCRIPT, drive, startBenchWorker, workloadContext } from "./bench/cpu.mjs";
import { findWorkerd, workerdPids } from "./bench/proc.mjs";

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args.splice(i, 2)[1] : dflt;
};
const perf = args.includes("--perf");
if (perf) args.splice(args.indexOf("--perf"), 1);
const ops = Number(opt("--ops", "2000"));
const top = Number(opt("--top", "40"));
const out = opt("--out", null);
const againstOpt = opt("--against", null);
/** A build's worker module: `path` itself when it names a .js file, else its index.js. */
const moduleOf = (path) => (path.endsWith(".js") ? resolve(path) : join(resolve(path), "index.js"));
const script = moduleOf(opt("--build", SCRIPT_PATH));
const name = args[0];
if (!CPU_WORKLOADS[name]) {
  console.error(`usage: node scripts/profile.mjs <${Object.keys(CPU_WORKLOADS).join("|")}> [--ops N] [--build path] [--top N] [--out file]`);
  process.exit(2);
}

const freePort = () =>
  new Promise((res) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });

/** A minimal Chrome DevTools Protocol session. */
function cdp(url) {
  const ws = new WebSocket(url);
  let id = 0;
  const pending = new Map();
  ws.on("message", (data) => {
    const msg = JSON.parse(data);
    if (msg.id && pending.has(msg.id)) {
      const { res, rej } = pending.get(msg.id);
      pending.delete(msg.id);
      if (msg.error) rej(new Error(JSON.stringify(msg.error)));
      else res(msg.result);
    }
  });
  const ready = new Promise((res, rej) => {
    ws.once("open", res);
    ws.once("error", rej);
  });
  return {
    ready,
    send: (method, params = {}) =>
      new Promise((res, rej) => {
        const msgId = ++id;
        pending.set(msgId, { res, rej });
        ws.send(JSON.stringify({ id: msgId, method, params }));
      }),
    close: () => ws.close(),
  };
}

if (perf && againstOpt) {
  const against = againstOpt === "floor" ? FLOOR_SCRIPT : moduleOf(againstOpt);
  const base = out ?? "perf";
  const a = await perfRecord(against, `${base}-a.data`);
  const b = await perfRecord(script, `${base}-b.data`);
  perfDiff(a, b);
  process.exit(0);
}
if (perf) {
  await perfRecord(script, out ?? "perf.data");
  process.exit(0);
}

/** The workload's context on `worker`, set up and warmed up (not measured). */
async function warmedUp(worker, proc) {
  const ctx = workloadContext(worker, proc, undefined);
  const w = CPU_WORKLOADS[name];
  ctx.state = {};
  if (w.setup) await w.setup(ctx);
  await drive(ctx, w, 8, Math.max(1, Math.round((w.warm ?? 400) / 8)), "warm");
  return { ctx, w };
}

/** `perf record` of the workerd process while the workload runs, then the split by code. */
async function perfRecord(script, data) {
  const before = workerdPids();
  const worker = await startBenchWorker(script);
  let ctx;
  try {
    const proc = findWorkerd(before);
    const warm = await warmedUp(worker, proc);
    ctx = warm.ctx;
    const w = warm.w;
    const rec = spawn("perf", ["record", "-q", "-F", "2000", "-g", "-p", String(proc.pid), "-o", data], { stdio: "inherit" });
    await new Promise((r) => setTimeout(r, 500));
    await drive(ctx, w, 8, Math.max(1, Math.round(ops / 8)), "run");
    rec.kill("SIGINT");
    await new Promise((r) => rec.on("exit", r));
  } finally {
    for (const close of ctx?.cleanups ?? []) await close();
    await worker.dispose();
  }
  const report = execFileSync("perf", ["report", "-i", data, "--no-children", "--sort", "dso", "-g", "none"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
  console.log(`# ${name}: workerd CPU by code (${data}; \`perf report -i ${data}\` for more)`);
  for (const line of report.split("\n").filter((l) => /^\s+\d/.test(l)).slice(0, 8)) console.log(line);
  return data;
}

/** Samples per symbol of a recording (self time). */
function perfSymbols(data) {
  const text = execFileSync("perf", ["report", "-i", data, "--no-children", "--sort", "sym", "-g", "none", "-F", "sample,sym"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"], maxBuffer: 1 << 28 });
  const counts = new Map();
  for (const line of text.split("\n")) {
    const m = /^\s*(\d+)\s+\[.\]\s+(.*)$/.exec(line);
    if (!m) continue;
    const symbol = m[2].slice(0, 120);
    counts.set(symbol, (counts.get(symbol) ?? 0) + Number(m[1]));
  }
  return counts;
}

/** The symbols whose samples grew most from recording `a` to `b` (same number of operations). */
function perfDiff(a, b) {
  const [x, y] = [perfSymbols(a), perfSymbols(b)];
  const total = (m) => [...m.values()].reduce((s, n) => s + n, 0);
  const [tx, ty] = [total(x), total(y)];
  console.log(`# ${name}: ${tx} samples on ${a}, ${ty} on ${b} (${(ty / tx).toFixed(3)}×), ${ops} operations each; most grown symbols (samples: difference, ${a}, ${b})`);
  const rows = [...new Set([...x.keys(), ...y.keys()])].map((n) => [n, x.get(n) ?? 0, y.get(n) ?? 0]);
  rows.sort((p, q) => q[2] - q[1] - (p[2] - p[1]));
  for (const [n, na, nb] of rows.slice(0, top)) console.log(`${String(nb - na).padStart(7)} ${String(na).padStart(7)} ${String(nb).padStart(7)}  ${n}`);
}

const inspectorPort = await freePort();
const worker = await startBenchWorker(script, { inspectorPort });
let profiled;
try {
  const targets = await (await fetch(`http://127.0.0.1:${inspectorPort}/json`)).json();
  const target = targets.find((t) => t.id?.includes("core:user")) ?? targets[0];
  const session = cdp(target.webSocketDebuggerUrl);
  await session.ready;
  const { ctx, w } = (profiled = await warmedUp(worker, null));
  await session.send("Profiler.enable");
  await session.send("Profiler.setSamplingInterval", { interval: 100 });
  await session.send("Profiler.start");
  const t0 = performance.now();
  await drive(ctx, w, 8, Math.max(1, Math.round(ops / 8)), "run");
  const wall = performance.now() - t0;
  const { profile } = await session.send("Profiler.stop");
  session.close();
  if (out) writeFileSync(out, JSON.stringify(profile));

  // Self time per function (samples × interval), and the share of non-idle samples.
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const counts = new Map();
  for (const s of profile.samples) counts.set(s, (counts.get(s) ?? 0) + 1);
  const self = new Map();
  let busy = 0;
  for (const [nodeId, n] of counts) {
    const f = byId.get(nodeId).callFrame;
    const label = `${f.functionName || "(anonymous)"} ${f.url ? f.url.split("/").pop() : ""}${f.lineNumber >= 0 && f.url ? `:${f.lineNumber + 1}` : ""}`.trim();
    if (label === "(idle)" || label === "(program)" || label === "(garbage collector)") {
      if (label !== "(idle)") busy += n;
      self.set(label, (self.get(label) ?? 0) + n);
      continue;
    }
    busy += n;
    self.set(label, (self.get(label) ?? 0) + n);
  }
  const total = profile.samples.length;
  console.log(`# ${name}: ${ops} ops in ${(wall / 1000).toFixed(1)} s; ${total} samples, ${busy} not idle`);
  const rows = [...self.entries()].filter(([l]) => l !== "(idle)").sort((a, b) => b[1] - a[1]).slice(0, top);
  for (const [label, n] of rows) console.log(`${((100 * n) / busy).toFixed(1).padStart(5)} %  ${label}`);
} finally {
  for (const close of profiled?.ctx.cleanups ?? []) await close();
  await worker.dispose();
}

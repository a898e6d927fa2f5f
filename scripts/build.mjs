#!/usr/bin/env node
// Build the worker: `worker-build --release` with the locally installed tools, producing
// build/index.js (+ build/index_bg.wasm). This is also wrangler's [build] command.
//
//   node scripts/build.mjs            release build (wasm-opt -Oz)
//   node scripts/build.mjs --dev      debug profile, no wasm-opt (fastest turnaround)
//   node scripts/build.mjs --no-opt   release profile, skip wasm-opt
//   node scripts/build.mjs --force    rebuild even if the inputs did not change
//
// A build whose inputs (src/, Cargo.toml, Cargo.lock, build.rs, mode, tool versions) match
// the stamp of the last successful build is skipped; `--force` or WORLD_CELLD_FORCE_BUILD=1
// overrides. Environment: WORKER_BUILD_BIN, WASM_BINDGEN_BIN, WASM_OPT_BIN, ESBUILD_BIN
// override the tool paths.

import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import {
  ROOT,
  cargoTools,
  esbuildBinary,
  toolBinary,
  toolReady,
  wasmOptBinary,
} from "./lib/tools.mjs";

const args = process.argv.slice(2);
const dev = args.includes("--dev");
const noOpt = dev || args.includes("--no-opt");
const force = args.includes("--force") || process.env.WORLD_CELLD_FORCE_BUILD === "1";
for (const a of args) {
  if (!["--dev", "--no-opt", "--force"].includes(a)) {
    console.error(`[build] unknown option ${a} (expected --dev, --no-opt, --force)`);
    process.exit(2);
  }
}

const log = (msg) => console.log(`[build] ${msg}`);
const fail = (msg) => {
  console.error(`[build] ERROR: ${msg}`);
  process.exit(1);
};

// --- tools ---------------------------------------------------------------------------------
const tools = cargoTools();
const missing = tools.filter((t) => !toolReady(t));
if (missing.length > 0) {
  fail(
    missing
      .map((t) => `${t.name} ${t.version} not found at ${toolBinary(t)}`)
      .join("; ") + ". Run `npm install` (its postinstall runs scripts/install-tools.mjs).",
  );
}
const [workerBuild, wasmBindgen] = tools;
const wasmOpt = wasmOptBinary();
if (!wasmOpt && !noOpt) {
  fail("wasm-opt not found (npm package binaryen). Run `npm install`, or build with --no-opt.");
}
const esbuild = esbuildBinary();
if (!esbuild) fail("esbuild not found (it comes with wrangler). Run `npm install`.");

// --- up-to-date check ----------------------------------------------------------------------
function walk(dir, out) {
  if (!existsSync(dir)) return;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) walk(p, out);
    else if (e.isFile()) out.push(p);
  }
}

function fingerprint() {
  const files = [];
  walk(join(ROOT, "src"), files);
  for (const f of ["Cargo.toml", "Cargo.lock", "build.rs"]) {
    if (existsSync(join(ROOT, f))) files.push(join(ROOT, f));
  }
  files.sort();
  const h = createHash("sha256");
  h.update(JSON.stringify({ dev, noOpt, tools: tools.map((t) => `${t.name}@${t.version}`) }));
  for (const f of files) {
    h.update(relative(ROOT, f));
    h.update("\0");
    h.update(readFileSync(f));
    h.update("\0");
  }
  return h.digest("hex");
}

const outJs = join(ROOT, "build", "index.js");
const stampFile = join(ROOT, "build", ".build-stamp");
const fp = fingerprint();
if (!force && existsSync(outJs) && existsSync(stampFile)) {
  if (readFileSync(stampFile, "utf8").trim() === fp) {
    log("build/ is up to date (inputs unchanged); use --force to rebuild");
    process.exit(0);
  }
}

// --- build ---------------------------------------------------------------------------------
const wbArgs = [dev ? "--dev" : "--release"];
if (noOpt) wbArgs.push("--no-opt");
const env = {
  ...process.env,
  WASM_BINDGEN_BIN: toolBinary(wasmBindgen),
  ESBUILD_BIN: esbuild,
};
if (wasmOpt) env.WASM_OPT_BIN = wasmOpt;

log(`${toolBinary(workerBuild)} ${wbArgs.join(" ")}`);
const started = Date.now();
const r = spawnSync(toolBinary(workerBuild), wbArgs, { cwd: ROOT, env, stdio: "inherit" });
if (r.error) fail(`could not run worker-build: ${r.error.message}`);
if (r.status !== 0) fail(`worker-build failed (exit code ${r.status})`);
if (!existsSync(outJs)) fail("worker-build finished but build/index.js is missing");

writeFileSync(stampFile, fp + "\n");
const wasm = readdirSync(join(ROOT, "build"), { recursive: true }).filter((f) => String(f).endsWith(".wasm"));
const sizes = wasm.map((f) => `${f} ${(statSync(join(ROOT, "build", String(f))).size / 1024).toFixed(0)} KiB`);
log(`done in ${((Date.now() - started) / 1000).toFixed(1)}s: build/index.js ${sizes.join(", ")}`);

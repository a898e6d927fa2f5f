#!/usr/bin/env node
// Build the worker into build/: build/index.js (our JavaScript entry, src/shell/entry.mjs,
// bundled with the wasm-bindgen glue) and build/index_bg.wasm. This is also wrangler's
// [build] command. The steps, with the locally installed tools:
//   1. cargo build --lib --target wasm32-unknown-unknown (release, or dev with --dev)
//   2. wasm-bindgen --target module --experimental-reset-state-function (the glue; the
//      reset function lets the entry recover from a trapped instance)
//   3. wasm-opt -O3 (unless --dev / --no-opt)
//   4. esbuild bundles src/shell/entry.mjs (+ the other src/shell/*.mjs) and the glue into build/index.js
//
//   node scripts/build.mjs            release build (wasm-opt -O3)
//   node scripts/build.mjs --dev      debug profile, no wasm-opt (fastest turnaround)
//   node scripts/build.mjs --no-opt   release profile, skip wasm-opt
//   node scripts/build.mjs --force    rebuild even if the inputs did not change
//   node scripts/build.mjs --profiling release code with names kept (no minifying, wasm
//                                     name section kept) for CPU profiles
//
// A build whose inputs (src/, Cargo.toml, Cargo.lock, build.rs, mode, tool versions) match
// the stamp of the last successful build is skipped; `--force` or WORLD_CELLD_FORCE_BUILD=1
// overrides. Environment: WASM_BINDGEN_BIN, WASM_OPT_BIN, ESBUILD_BIN override the tool
// paths.

import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
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
const profiling = args.includes("--profiling");
const force = args.includes("--force") || process.env.WORLD_CELLD_FORCE_BUILD === "1";
for (const a of args) {
  if (!["--dev", "--no-opt", "--force", "--profiling"].includes(a)) {
    console.error(`[build] unknown option ${a} (expected --dev, --no-opt, --force, --profiling)`);
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
const [wasmBindgen] = tools;
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
  h.update(JSON.stringify({ dev, noOpt, profiling, tools: tools.map((t) => `${t.name}@${t.version}`) }));
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
const started = Date.now();
function run(cmd, argv, opts = {}) {
  log(`${cmd} ${argv.join(" ")}`);
  const r = spawnSync(cmd, argv, { cwd: ROOT, stdio: "inherit", ...opts });
  if (r.error) fail(`could not run ${cmd}: ${r.error.message}`);
  if (r.status !== 0) fail(`${cmd} failed (exit code ${r.status})`);
}

const profile = dev ? "debug" : "release";
run("cargo", ["build", "--lib", "--target", "wasm32-unknown-unknown", ...(dev ? [] : ["--release"])]);
const crateWasm = join(ROOT, "target", "wasm32-unknown-unknown", profile, "world_celld_rs.wasm");
if (!existsSync(crateWasm)) fail(`cargo finished but ${crateWasm} is missing`);

const out = join(ROOT, "build");
const staging = join(out, ".staging");
rmSync(staging, { recursive: true, force: true });
mkdirSync(staging, { recursive: true });
run(toolBinary(wasmBindgen), [
  crateWasm,
  "--out-dir", staging,
  "--out-name", "index",
  "--target", "module",
  "--experimental-reset-state-function",
  ...(dev ? ["--debug", "--keep-debug"] : []),
  ...(profiling ? ["--keep-debug"] : []),
]);
const stagedWasm = join(staging, "index_bg.wasm");
if (!noOpt) {
  // The features rustc's wasm32 target enables by default.
  const features = ["bulk-memory", "nontrapping-float-to-int", "sign-ext", "mutable-globals", "reference-types", "multivalue"];
  run(wasmOpt, ["-O3", ...(profiling ? ["-g"] : []), ...features.map((f) => `--enable-${f}`), stagedWasm, "-o", stagedWasm]);
}
// The glue imports the module in the source phase (`import source`); workerd's module
// loader gives a WebAssembly.Module for a plain import of a .wasm module.
const glue = join(staging, "index.js");
writeFileSync(glue, readFileSync(glue, "utf8").replaceAll("import source ", "import "));
// Every JavaScript module of the shell (entry.mjs and the modules it imports).
const shellDir = join(ROOT, "src", "shell");
for (const f of readdirSync(shellDir).filter((f) => f.endsWith(".mjs"))) copyFileSync(join(shellDir, f), join(staging, f));
run(esbuild, [
  "--external:./index_bg.wasm",
  "--external:cloudflare:*",
  "--format=esm",
  "--bundle",
  ...(dev || profiling ? [] : ["--minify"]),
  "./entry.mjs",
  "--outfile=bundle.js",
], { cwd: staging });

mkdirSync(out, { recursive: true });
const outWasm = join(out, "index_bg.wasm");
renameSync(stagedWasm, outWasm);
renameSync(join(staging, "bundle.js"), outJs);
rmSync(staging, { recursive: true, force: true });
writeFileSync(stampFile, fp + "\n");
log(`done in ${((Date.now() - started) / 1000).toFixed(1)}s: build/index.js ${(statSync(outJs).size / 1024).toFixed(0)} KiB, build/index_bg.wasm ${(statSync(outWasm).size / 1024).toFixed(0)} KiB`);

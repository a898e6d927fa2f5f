#!/usr/bin/env node
// Coverage-guided fuzzing with cargo-fuzz (libFuzzer), see README "Fuzzing".
//
//   npm run fuzz -- <target|all> [seconds] [-- libFuzzer flags...]
//
// Targets: router, codec, run, stream, index, queue, shards (fuzz/fuzz_targets/). Needs the
// nightly toolchain (`rustup toolchain install nightly`); installs cargo-fuzz (the Rust crate registry,
// pinned version) into ${XDG_CACHE_HOME:-~/.cache}/world-celld-rs/cargo-fuzz-<version>/ when
// missing. Runs each target for `seconds` (default 60) on fuzz/corpus/<target> (the
// committed golden seeds plus whatever earlier runs found; new entries are git-ignored)
// and prints one summary line per target. A crash leaves its input in
// fuzz/artifacts/<target>/ and makes the command fail; reproduce it with
// `cargo +nightly fuzz run <target> <artifact>`.
//
// Options: --skip-without-nightly (exit 0 with a skip line when nightly is missing, for
// CI), --seeds (run each target over its corpus once and stop: libFuzzer's -runs=0, CI's
// smoke: the harness builds and the seeds keep every invariant), --verbose (libFuzzer's full output), --build-only, --asan (build with
// AddressSanitizer; the default is no sanitizer: the crate has no `unsafe` code outside the
// wasm shell, and ASan slows these allocation-heavy targets down about twentyfold).

import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { ROOT, cacheRoot } from "./lib/tools.mjs";

const CARGO_FUZZ_VERSION = "0.13.2";
const TARGETS = ["router", "codec", "run", "stream", "index", "queue", "shards"];
// Longest input: call sequences stay short (a longer one mostly re-runs its prefix).
const MAX_LEN = { router: 16384, codec: 16384, run: 4096, stream: 4096, index: 4096, queue: 4096, shards: 4096 };
const log = (msg) => console.log(`[fuzz] ${msg}`);

function usage(code) {
  console.log(`usage: npm run fuzz -- <${TARGETS.join("|")}|all> [seconds] [--skip-without-nightly] [--seeds] [--verbose] [--build-only] [--asan] [-- libFuzzer flags]`);
  process.exit(code);
}

const argv = process.argv.slice(2);
const dash = argv.indexOf("--");
const extra = dash >= 0 ? argv.slice(dash + 1) : [];
const args = dash >= 0 ? argv.slice(0, dash) : argv;
const flags = new Set(args.filter((a) => a.startsWith("--")));
const positional = args.filter((a) => !a.startsWith("--"));
if (flags.has("--help") || positional.length === 0) usage(positional.length === 0 ? 2 : 0);
const targets = positional[0] === "all" ? TARGETS : [positional[0]];
if (!targets.every((t) => TARGETS.includes(t))) usage(2);
const seconds = positional[1] === undefined ? 60 : Number(positional[1]);
if (!(seconds > 0)) usage(2);

function nightlyPresent() {
  const r = spawnSync("rustup", ["run", "nightly", "rustc", "--version"], { encoding: "utf8" });
  return !r.error && r.status === 0;
}

function cargoFuzzDir() {
  return join(cacheRoot(), `cargo-fuzz-${CARGO_FUZZ_VERSION}`);
}

function cargoFuzzReady() {
  const bin = join(cargoFuzzDir(), "bin", "cargo-fuzz");
  if (!existsSync(bin)) return false;
  const r = spawnSync(bin, ["--version"], { encoding: "utf8" });
  return r.status === 0 && (r.stdout || "").includes(CARGO_FUZZ_VERSION);
}

function ensureCargoFuzz() {
  if (cargoFuzzReady()) return;
  const dir = cargoFuzzDir();
  mkdirSync(cacheRoot(), { recursive: true });
  const lock = `${dir}.lock`;
  for (let waited = 0; ; waited++) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      if (cargoFuzzReady()) return;
      if (waited === 0) log(`waiting for another cargo-fuzz install (${lock})`);
      if (waited > 900) {
        rmSync(lock, { recursive: true, force: true }); // stale after 15 min
        continue;
      }
      spawnSync("sleep", ["1"]);
    }
  }
  try {
    if (cargoFuzzReady()) return;
    log(`installing cargo-fuzz ${CARGO_FUZZ_VERSION} into ${dir}`);
    const r = spawnSync("cargo", ["install", "--locked", "cargo-fuzz", "--version", CARGO_FUZZ_VERSION, "--root", dir], { stdio: "inherit" });
    if (r.status !== 0 || !cargoFuzzReady()) {
      console.error("[fuzz] ERROR: installing cargo-fuzz failed");
      process.exit(1);
    }
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

const SANITIZER = ["--sanitizer", flags.has("--asan") ? "address" : "none"];

function cargoFuzz(cmdArgs, opts = {}) {
  const env = { ...process.env, PATH: `${join(cargoFuzzDir(), "bin")}:${process.env.PATH}` };
  return spawn("cargo", ["+nightly", "fuzz", ...cmdArgs], { cwd: ROOT, env, ...opts });
}

function wait(child) {
  return new Promise((res) => child.on("exit", (code, signal) => res(code ?? (signal ? 128 : 1))));
}

async function build() {
  const started = Date.now();
  const code = await wait(cargoFuzz(["build", "-O", ...SANITIZER, ...(targets.length === 1 ? [targets[0]] : [])], { stdio: "inherit" }));
  if (code !== 0) {
    console.error("[fuzz] ERROR: cargo fuzz build failed");
    process.exit(1);
  }
  log(`built in ${((Date.now() - started) / 1000).toFixed(0)}s`);
}

/** Run one target; resolves to {ok, summary}. */
async function runTarget(target) {
  const corpus = join(ROOT, "fuzz", "corpus", target);
  if (!existsSync(corpus) || !readdirSync(corpus).some((f) => f.startsWith("seed-"))) {
    log(`no seeds in fuzz/corpus/${target}: generating them (scripts/fuzz-seeds.mjs)`);
    spawnSync(process.execPath, [join(ROOT, "scripts", "fuzz-seeds.mjs"), target], { stdio: "inherit" });
    mkdirSync(corpus, { recursive: true });
  }
  const libfuzzer = [flags.has("--seeds") ? "-runs=0" : `-max_total_time=${seconds}`, `-max_len=${MAX_LEN[target]}`, "-timeout=20", "-rss_limit_mb=2048", "-print_final_stats=1", ...extra];
  const child = cargoFuzz(["run", "-O", ...SANITIZER, target, corpus, "--", ...libfuzzer], { stdio: ["ignore", "pipe", "pipe"] });
  let execs = null;
  let cov = null;
  let tail = [];
  const onLine = (line) => {
    if (flags.has("--verbose")) console.log(line);
    tail.push(line);
    if (tail.length > 80) tail = tail.slice(-60);
    const m = line.match(/^#(\d+)\s+\S+\s+cov: (\d+) ft: (\d+) corp: (\d+)\/(\S+)/);
    if (m) cov = { cov: m[2], ft: m[3], corp: m[4], size: m[5] };
    const e = line.match(/^stat::number_of_executed_units: (\d+)/);
    if (e) execs = Number(e[1]);
  };
  for (const stream of [child.stdout, child.stderr]) {
    let buf = "";
    stream.on("data", (d) => {
      buf += d.toString();
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        onLine(buf.slice(0, i));
        buf = buf.slice(i + 1);
      }
    });
  }
  const started = Date.now();
  const code = await wait(child);
  const secs = ((Date.now() - started) / 1000).toFixed(0);
  const figures = cov ? `cov ${cov.cov}, features ${cov.ft}, corpus ${cov.corp} (${cov.size})` : "no coverage figures";
  const rate = execs !== null ? `, ${Math.round(execs / Math.max(1, Number(secs)))}/s` : "";
  const summary = `${target}: ${execs ?? "?"} executions in ${secs}s${rate}, ${figures}`;
  if (code !== 0) {
    if (!flags.has("--verbose")) for (const l of tail) console.log(l);
    return { ok: false, summary: `${summary} -- FAILED (exit ${code}; input in fuzz/artifacts/${target}/)` };
  }
  return { ok: true, summary };
}

async function main() {
  if (!nightlyPresent()) {
    const msg = "nightly toolchain not installed (rustup toolchain install nightly): fuzzing skipped";
    if (flags.has("--skip-without-nightly")) {
      log(`SKIP: ${msg}`);
      return;
    }
    console.error(`[fuzz] ERROR: ${msg}`);
    process.exit(1);
  }
  ensureCargoFuzz();
  await build();
  if (flags.has("--build-only")) return;
  let failed = 0;
  for (const t of targets) {
    log(flags.has("--seeds") ? `${t}: its corpus once` : `${t}: fuzzing for ${seconds}s`);
    const r = await runTarget(t);
    log(r.summary);
    if (!r.ok) failed++;
  }
  if (failed) {
    console.error(`[fuzz] ${failed} target(s) crashed`);
    process.exit(1);
  }
}

main();

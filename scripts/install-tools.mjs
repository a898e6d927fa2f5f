#!/usr/bin/env node
// npm postinstall: make sure the native build tools are present.
//
//  * the rustup target wasm32-unknown-unknown;
//  * wasm-bindgen-cli at the exact wasm-bindgen version in Cargo.lock (cargo install
//    without --locked) into ${XDG_CACHE_HOME:-$HOME/.cache}/world-celld-rs/<tool>-<version>/,
//    skipped when the right version is already there;
//  * pkg-config and libssl-dev (for crates of the tool that build against OpenSSL),
//    apt-installed when missing and running as root.
//
// Set WORLD_CELLD_SKIP_TOOLS=1 to skip everything (e.g. a JS-only checkout).

import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { cacheRoot, cargoTools, toolBinary, toolReady } from "./lib/tools.mjs";

const log = (msg) => console.log(`[install-tools] ${msg}`);
const fail = (msg) => {
  console.error(`[install-tools] ERROR: ${msg}`);
  process.exit(1);
};

function have(cmd, args = ["--version"]) {
  const r = spawnSync(cmd, args, { stdio: "ignore" });
  return !r.error && r.status === 0;
}

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { stdio: "inherit", ...opts });
  if (r.error) return false;
  return r.status === 0;
}

function ensureRustTarget() {
  if (!have("cargo")) {
    fail(
      "cargo not found. Install Rust with rustup (https://rustup.rs), stable >= 1.91, " +
        "then run `npm install` again (or set WORLD_CELLD_SKIP_TOOLS=1 to skip the native tools).",
    );
  }
  if (!have("rustup")) {
    log("rustup not found; assuming the wasm32-unknown-unknown target is installed");
    return;
  }
  const r = spawnSync("rustup", ["target", "list", "--installed"], { encoding: "utf8" });
  if ((r.stdout || "").split("\n").includes("wasm32-unknown-unknown")) return;
  log("adding rustup target wasm32-unknown-unknown");
  if (!run("rustup", ["target", "add", "wasm32-unknown-unknown"])) {
    fail("`rustup target add wasm32-unknown-unknown` failed");
  }
}

function opensslPresent() {
  return have("pkg-config", ["--exists", "openssl"]);
}

function ensureSystemPackages() {
  if (opensslPresent()) return;
  const isRoot = typeof process.getuid === "function" && process.getuid() === 0;
  if (isRoot && have("apt-get", ["--version"])) {
    log("pkg-config/libssl-dev missing: apt-get install -y pkg-config libssl-dev");
    const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
    run("apt-get", ["update", "-qq"], { env });
    if (!run("apt-get", ["install", "-y", "-qq", "pkg-config", "libssl-dev"], { env })) {
      fail("apt-get install pkg-config libssl-dev failed");
    }
    if (opensslPresent()) return;
  }
  fail(
    "pkg-config and the OpenSSL headers are needed to compile the cargo-installed tools. " +
      "Install them (Debian/Ubuntu: `sudo apt-get install pkg-config libssl-dev`) and run `npm install` again.",
  );
}

// --- waiting for another install into the same directory ---------------------------------

/** PIDs of running `cargo install ... --root <dir>` processes (started by anyone). */
function cargoInstallsInto(dir) {
  const pids = [];
  let entries = [];
  try {
    entries = readdirSync("/proc");
  } catch {
    return pids;
  }
  for (const e of entries) {
    if (!/^\d+$/.test(e) || Number(e) === process.pid) continue;
    let argv;
    try {
      argv = readFileSync(`/proc/${e}/cmdline`, "utf8").split("\0");
    } catch {
      continue;
    }
    const isCargo = argv[0] && /(^|\/)cargo$/.test(argv[0]);
    if (!isCargo || !argv.includes("install")) continue;
    const i = argv.indexOf("--root");
    if (i >= 0 && argv[i + 1] && argv[i + 1].replace(/\/+$/, "") === dir.replace(/\/+$/, "")) {
      pids.push(Number(e));
    }
  }
  return pids;
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A lock directory next to the install dir; stale locks (dead owner) are taken over. */
function tryLock(lockDir) {
  try {
    mkdirSync(lockDir);
    writeFileSync(join(lockDir, "pid"), String(process.pid));
    return true;
  } catch {
    let owner = 0;
    try {
      owner = Number(readFileSync(join(lockDir, "pid"), "utf8"));
    } catch {
      // Lock dir without pid yet: only stale if old.
      try {
        if (Date.now() - statSync(lockDir).mtimeMs > 60_000) owner = -1;
      } catch {
        return false;
      }
    }
    if (owner === -1 || (owner > 0 && !alive(owner))) {
      rmSync(lockDir, { recursive: true, force: true });
      return tryLock(lockDir);
    }
    return false;
  }
}

async function waitForOthers(tool) {
  const lockDir = `${tool.dir}.lock`;
  let announced = false;
  for (;;) {
    if (toolReady(tool)) return "ready";
    const others = cargoInstallsInto(tool.dir);
    if (others.length === 0 && tryLock(lockDir)) return "locked";
    if (!announced) {
      log(`${tool.name} ${tool.version}: another install into ${tool.dir} is running; waiting for it`);
      announced = true;
    }
    await sleep(2000);
  }
}

function cargoInstall(tool) {
  return new Promise((resolvePromise) => {
    const args = ["install", ...tool.flags, tool.crate, "--version", tool.version, "--root", tool.dir];
    log(`cargo ${args.join(" ")}`);
    const started = Date.now();
    const child = spawn("cargo", args, { stdio: ["ignore", "inherit", "inherit"] });
    child.on("error", (err) => resolvePromise({ ok: false, err: String(err) }));
    child.on("exit", (code) => {
      const secs = ((Date.now() - started) / 1000).toFixed(0);
      resolvePromise({ ok: code === 0, err: `exit code ${code}`, secs });
    });
  });
}

async function ensureTool(tool) {
  if (process.env[tool.env]) {
    log(`${tool.name}: using ${tool.env}=${process.env[tool.env]}`);
    return;
  }
  if (toolReady(tool)) {
    log(`${tool.name} ${tool.version}: present in ${tool.dir}`);
    return;
  }
  mkdirSync(cacheRoot(), { recursive: true });
  const state = await waitForOthers(tool);
  if (state === "ready") {
    log(`${tool.name} ${tool.version}: present in ${tool.dir}`);
    return;
  }
  const lockDir = `${tool.dir}.lock`;
  try {
    const r = await cargoInstall(tool);
    if (!r.ok || !toolReady(tool)) {
      fail(`installing ${tool.crate} ${tool.version} failed (${r.err})`);
    }
    log(`${tool.name} ${tool.version}: installed in ${r.secs}s`);
  } finally {
    rmSync(lockDir, { recursive: true, force: true });
  }
}

async function main() {
  if (process.env.WORLD_CELLD_SKIP_TOOLS === "1") {
    log("WORLD_CELLD_SKIP_TOOLS=1: skipping native tool installation");
    return;
  }
  const started = Date.now();
  ensureRustTarget();
  const tools = cargoTools();
  const missing = tools.filter((t) => !process.env[t.env] && !toolReady(t));
  if (missing.length > 0 && missing.some((t) => cargoInstallsInto(t.dir).length === 0)) {
    ensureSystemPackages();
  }
  await Promise.all(tools.map((t) => ensureTool(t)));
  for (const t of tools) log(`${t.name} -> ${toolBinary(t)}`);
  log(`done in ${((Date.now() - started) / 1000).toFixed(0)}s`);
}

main().catch((err) => fail(err && err.stack ? err.stack : String(err)));

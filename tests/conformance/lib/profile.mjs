// A profile is one Workflow runtime version with the real world-celld clients installed
// beside it (profiles/<name>/package.json, its own lockfile, Node 22 from the npm `node`
// package). This module installs a profile, builds an app's workflows with that runtime's
// CLI (`wf build`), and runs Node 22 programs in it. It knows nothing of the servers.

import { spawn, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CONFORMANCE, profileDir } from "./workers.mjs";

/** The profiles, newest runtime last. */
export const PROFILES = {
  beta42: { runtime: "5.0.0-beta.42", world: "5.0.0-beta.27" },
  beta55: { runtime: "5.0.0-beta.55", world: "5.0.0-beta.37" },
};

export const CLIENTS = { "0.3": "0.3.0", "0.4": "0.4.0" };

const log = (msg) => console.log(`[conformance] ${msg}`);

/** Node 22 of the profile (the npm `node` package) and a PATH that puts it first. */
export function node22(profile) {
  const bin = join(profileDir(profile), "node_modules", ".bin");
  return { node: join(bin, "node"), path: `${bin}:${process.env.PATH}` };
}

/**
 * Installs the profile from its lockfile when its node_modules is missing or older than the
 * lockfile. `npm install --no-save`, not `npm ci`: the lockfile leaves out optional platform
 * packages the registry does not serve at the locked version (cbor-extract's), which
 * `npm ci` refuses as "not in sync"; `install` takes the lockfile's versions all the same
 * and writes nothing back.
 */
export function ensureProfile(profile) {
  if (!PROFILES[profile]) throw new Error(`unknown profile ${profile} (${Object.keys(PROFILES).join(", ")})`);
  const dir = profileDir(profile);
  const marker = join(dir, "node_modules", ".package-lock.json");
  const lock = join(dir, "package-lock.json");
  const installed = () =>
    existsSync(marker) && statSync(marker).mtimeMs >= statSync(lock).mtimeMs && existsSync(node22(profile).node);
  if (installed()) return;
  // npm test runs two test files at once, and two of them may find the profile missing at
  // the same moment: two `npm install`s in one directory break each other (CI, 2026-12-07).
  withLock(join(dir, ".install.lock"), () => {
    if (installed()) return;
    log(`installing profile ${profile} (runtime ${PROFILES[profile].runtime})`);
    const r = spawnSync("npm", ["install", "--no-save", "--no-audit", "--no-fund", "--loglevel=error"], { cwd: dir, stdio: "inherit" });
    if (r.status !== 0) throw new Error(`npm install in ${dir} failed (exit ${r.status})`);
  });
}

/** A lock held while an install or build is older than this is taken as abandoned. */
const STALE_LOCK_MS = 15 * 60_000;

function processAlive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === "EPERM";
  }
}

/**
 * Runs `fn` holding a lock shared by every process on this machine: a directory made
 * atomically by `mkdir`, with the holder's pid in it. A lock whose holder is gone, or that is
 * older than STALE_LOCK_MS, is broken. Waits synchronously (the installs and builds are).
 */
export function withLock(path, fn) {
  const sleep = new Int32Array(new SharedArrayBuffer(4));
  for (;;) {
    try {
      mkdirSync(path);
      writeFileSync(join(path, "pid"), String(process.pid));
      break;
    } catch (e) {
      if (e.code !== "EEXIST") throw e;
      let stale = false;
      try {
        const pid = Number(readFileSync(join(path, "pid"), "utf8"));
        stale = (pid > 0 && !processAlive(pid)) || Date.now() - statSync(path).mtimeMs > STALE_LOCK_MS;
      } catch {
        // the pid file is not written yet, or the lock was just released: look again
        try {
          stale = Date.now() - statSync(path).mtimeMs > STALE_LOCK_MS;
        } catch {
          // released
        }
      }
      if (stale) rmSync(path, { recursive: true, force: true });
      else Atomics.wait(sleep, 0, 0, 200);
    }
  }
  try {
    return fn();
  } finally {
    rmSync(path, { recursive: true, force: true });
  }
}

function newestMtime(dir) {
  let t = 0;
  for (const f of readdirSync(dir)) {
    const p = join(dir, f);
    const s = statSync(p);
    t = Math.max(t, s.isDirectory() ? newestMtime(p) : s.mtimeMs);
  }
  return t;
}

/**
 * Builds an app: a copy of `template` (a package directory, e.g. the installed
 * @workflow/world-testing, or null for an empty one) in profiles/<profile>/<name>, with the
 * workflow sources of `workflowsDir` in its workflows/, built by the profile's `wf build`
 * into dist/.well-known/workflow/v1 (where the suite's server imports them from), with
 * lib/app-server.mjs beside it as app-server.mjs (lib/app.mjs starts it). The build is
 * skipped when it is newer than every source. Returns the app directory.
 */
export function buildApp(profile, name, opts) {
  return withLock(join(profileDir(profile), `${name}.build.lock`), () => buildAppLocked(profile, name, opts));
}

function buildAppLocked(profile, name, { template, workflowsDir }) {
  const dir = join(profileDir(profile), name);
  const built = join(dir, "dist", ".well-known", "workflow", "v1", "flow.mjs");
  const sources = Math.max(newestMtime(workflowsDir), statSync(join(profileDir(profile), "package-lock.json")).mtimeMs);
  const server = join(CONFORMANCE, "lib", "app-server.mjs");
  const copyServer = () => cpSync(server, join(dir, "app-server.mjs"));
  if (existsSync(built) && statSync(built).mtimeMs >= sources) {
    copyServer();
    return dir;
  }
  log(`building ${name} workflows with runtime ${PROFILES[profile].runtime} (wf build)`);
  rmSync(dir, { recursive: true, force: true });
  if (template) cpSync(template, dir, { recursive: true, dereference: true });
  else mkdirSync(dir, { recursive: true });
  rmSync(join(dir, "dist", ".well-known"), { recursive: true, force: true });
  mkdirSync(join(dir, "workflows"), { recursive: true });
  for (const f of readdirSync(workflowsDir)) {
    if (/\.(ts|mts|js|mjs)$/.test(f)) cpSync(join(workflowsDir, f), join(dir, "workflows", f));
  }
  if (!existsSync(join(dir, "package.json"))) writeFileSync(join(dir, "package.json"), '{ "type": "module", "private": true }\n');
  const { node, path } = node22(profile);
  const wf = join(profileDir(profile), "node_modules", "@workflow", "cli", "bin", "run.js");
  const cli = existsSync(wf) ? wf : join(profileDir(profile), "node_modules", ".bin", "wf");
  const r = spawnSync(node, [cli, "build"], { cwd: dir, env: { ...process.env, PATH: path }, encoding: "utf8" });
  if (r.status !== 0) {
    process.stdout.write(r.stdout || "");
    process.stderr.write(r.stderr || "");
    throw new Error(`wf build in ${dir} failed (exit ${r.status})`);
  }
  const out = join(dir, "dist", ".well-known", "workflow", "v1");
  mkdirSync(out, { recursive: true });
  cpSync(join(dir, ".well-known", "workflow", "v1"), out, { recursive: true });
  copyServer();
  return dir;
}

/**
 * Runs a Node 22 program in the profile; resolves with its exit code (output inherited or
 * captured: `out` both streams as they came, `stdout` standard output alone).
 */
export function runNode22(profile, args, { cwd, env = {}, capture = false } = {}) {
  const { node, path } = node22(profile);
  return new Promise((resolve) => {
    const child = spawn(node, args, {
      cwd,
      env: { ...process.env, ...env, PATH: path },
      stdio: ["ignore", capture ? "pipe" : "inherit", capture ? "pipe" : "inherit"],
    });
    let out = "";
    let stdout = "";
    if (capture) {
      child.stdout.on("data", (d) => ((out += d), (stdout += d)));
      child.stderr.on("data", (d) => (out += d));
    }
    child.on("exit", (code, signal) => resolve({ code: code ?? (signal ? 1 : 0), out, stdout, child }));
  });
}

export const WORKFLOWS = join(CONFORMANCE, "workflows");

export function readJson(file) {
  return JSON.parse(readFileSync(file, "utf8"));
}

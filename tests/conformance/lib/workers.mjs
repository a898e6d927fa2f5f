// The two servers a real client can be pointed at, each in its own Miniflare/workerd on a
// local port: ours (build/index.js, the Rust/wasm worker) and the TypeScript reference
// worker of the same client generation (the `dist/worker.js` each client tarball carries,
// bundled here with esbuild). Used by the conformance run, the workflow bench and the chaos
// test; runs on the repository's Node (20 or newer) with the root's Miniflare.
//
//   const w = await startServer({ server: "ours", client: "0.3" });
//   // w.url, w.secret, w.env (CELLD_* for the client), w.pids() (workerd processes)
//   await w.dispose();

import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Log, LogLevel, Miniflare } from "miniflare";
import { readyOrDisposed, SCRIPT_PATH, workerModuleOptions } from "../../lib/harness.mjs";

export const CONFORMANCE = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const ROOT = resolve(CONFORMANCE, "..", "..");
export const SECRET = "conformance-secret";

/** The worker variables both servers get: the deployment defaults of their wrangler files. */
export const DEFAULT_VARS = Object.freeze({
  WORLD_SECRET: SECRET,
  WORKFLOW_CALLBACK_SECRET: "",
  QUEUE_MAX_ATTEMPTS: "5",
  QUEUE_MAX_INFLIGHT: "5",
  QUEUE_DELIVERY_TIMEOUT_MS: "300000",
});

/**
 * Where our deployment default differs from the reference's (wrangler.toml): a shard's
 * concurrent deliveries reach 128 when the app takes them, the reference's 5 being the
 * floor (issue #45).
 */
export const OUR_DEFAULT_VARS = Object.freeze({ ...DEFAULT_VARS, QUEUE_MAX_INFLIGHT: "128", QUEUE_MIN_INFLIGHT: "5" });

/** The reference worker's Durable Object bindings, per client generation (celld-worker/wrangler.jsonc). */
const REFERENCE_BINDINGS = {
  "0.3": {
    WORKFLOW_DB: "WorkflowRunDO",
    WORKFLOW_STREAMS: "StreamDO",
    WORKFLOW_INDEX: "IndexDO",
    WORKFLOW_QUEUE: "QueueDO",
  },
  "0.4": {
    WORKFLOW_DB: "WorkflowRunDO",
    WORKFLOW_STREAMS: "StreamDO",
    WORKFLOW_RUN_CATALOG: "RunCatalogDO",
    WORKFLOW_HOOK_TOKENS: "HookTokenDO",
    WORKFLOW_HOOK_IDS: "HookIdDO",
    WORKFLOW_QUEUE: "QueueDO",
  },
};

/** The profile whose node_modules hold the clients (and so the reference workers' sources). */
export function profileDir(profile = "beta42") {
  return join(CONFORMANCE, "profiles", profile);
}

/**
 * Bundles the reference worker of a client generation (ESM, `cloudflare:workers` external)
 * into profiles/<profile>/.reference/<client>/worker.js, once per source change.
 */
export async function referenceBundle(client, profile = "beta42") {
  const pkg = join(profileDir(profile), "node_modules", `world-celld-${client}`);
  const entry = join(pkg, "dist", "worker.js");
  if (!existsSync(entry)) throw new Error(`${entry} is missing: run \`npm run conformance -- --install\` first`);
  const outDir = join(profileDir(profile), ".reference", client);
  const out = join(outDir, "worker.js");
  if (existsSync(out) && statSync(out).mtimeMs >= statSync(entry).mtimeMs) return out;
  mkdirSync(outDir, { recursive: true });
  const esbuild = await import("esbuild");
  await esbuild.build({
    entryPoints: [entry],
    bundle: true,
    format: "esm",
    platform: "neutral",
    target: "es2022",
    mainFields: ["module", "main"],
    conditions: ["workerd", "worker", "import"],
    external: ["cloudflare:*", "node:*"],
    outfile: out,
    logLevel: "error",
  });
  return out;
}

/** The workerd processes that are children of this process (for CPU accounting). */
export function workerdPids() {
  const pids = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, "utf8");
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      if (comm !== "workerd") continue;
      pids.push(Number(d));
    } catch {
      // gone
    }
  }
  return pids;
}

/** Whether `pid` descends from this process (other people's workerd runs on a shared machine). */
export function isDescendant(pid, root = process.pid) {
  for (let p = pid, hops = 0; p > 1 && hops < 64; hops++) {
    if (p === root) return true;
    try {
      const stat = readFileSync(`/proc/${p}/stat`, "utf8");
      p = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    } catch {
      return false;
    }
  }
  return false;
}

/** utime+stime of a process in milliseconds (0 when it is gone). */
export function processCpuMs(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const ticks = Number(fields[11]) + Number(fields[12]);
    return (ticks * 1000) / clockTicks();
  } catch {
    return 0;
  }
}

let ticksPerSecond;
function clockTicks() {
  if (!ticksPerSecond) {
    try {
      ticksPerSecond = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

/**
 * Starts one server. `server`: "ours" or "reference"; `client`: "0.3" or "0.4" (which
 * reference worker; ours serves both). Options: vars (merged over OUR_DEFAULT_VARS or DEFAULT_VARS), persistDir,
 * port (0 = a free one), verbose, wrapEntry (a function of the worker's entry module path
 * returning the path of a module to serve instead, in a directory holding everything it
 * imports: e.g. the bench's instrumented copy, bench/instrument.mjs), profile (whose
 * installed client the reference worker is bundled from, default beta42: the reference
 * accepts the spec versions of the @workflow/world it is bundled with, so a runtime that
 * writes spec version 7 needs beta55's), script (for ours: the built entry to serve,
 * default build/index.js; another build's, e.g. the workflow bench's --baseline).
 */
export async function startServer({ server = "ours", client = "0.3", vars = {}, persistDir, port = 0, verbose, wrapEntry, profile = "beta42", script = SCRIPT_PATH } = {}) {
  const before = new Set(workerdPids());
  const bindings = { ...(server === "ours" ? OUR_DEFAULT_VARS : DEFAULT_VARS), ...vars };
  let options;
  if (server === "ours") {
    if (!existsSync(script)) throw new Error(`${script} is missing: run \`npm run build\` first`);
    options = workerModuleOptions(wrapEntry ? await wrapEntry(script, { server, client }) : script);
  } else if (server === "reference") {
    const bundle = await referenceBundle(client, profile);
    const scriptPath = wrapEntry ? await wrapEntry(bundle, { server, client }) : bundle;
    const durableObjects = {};
    for (const [name, className] of Object.entries(REFERENCE_BINDINGS[client])) durableObjects[name] = { className, useSQLite: true };
    options = {
      scriptPath,
      modules: true,
      compatibilityDate: "2026-01-01",
      compatibilityFlags: client === "0.4" ? ["nodejs_compat", "enable_abortsignal_rpc"] : ["nodejs_compat"],
      durableObjects,
    };
  } else {
    throw new Error(`unknown server ${server}`);
  }
  const mf = new Miniflare({
    ...options,
    bindings,
    host: "127.0.0.1",
    port,
    cf: { colo: "LOCAL", country: "XX" },
    ...(persistDir ? { durableObjectsPersist: persistDir } : {}),
    log: verbose || process.env.MINIFLARE_VERBOSE === "1" ? new Log(LogLevel.DEBUG) : new Log(LogLevel.WARN),
  });
  const url = await readyOrDisposed(mf);
  // Only our own children: a workerd another process started meanwhile is not this server's.
  const mine = workerdPids().filter((p) => !before.has(p) && isDescendant(p));
  const base = url.href.replace(/\/$/, "");
  return {
    server,
    client,
    mf,
    url: base,
    port: Number(url.port),
    secret: bindings.WORLD_SECRET,
    /** The environment a real client needs to use this server, delivering by HTTP. */
    env: { CELLD_FLEET_URL: base, CELLD_WORLD_SECRET: bindings.WORLD_SECRET, CELLD_QUEUE_MODE: "cells" },
    pids: () => mine.filter((p) => existsSync(`/proc/${p}`)),
    cpuMs: () => mine.reduce((sum, p) => sum + processCpuMs(p), 0),
    async dispose() {
      await mf.dispose();
    },
  };
}

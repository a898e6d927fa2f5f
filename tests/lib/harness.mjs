// Starts the built worker (build/index.js + wasm) in Miniflare on a real local HTTP port.
//
//   const w = await startWorker();              // the golden "standard" configuration
//   await w.rpc("runs", "wrun_1", "getRun", []); // or raw sockets on w.host / w.port
//   await w.dispose();
//
// Options:
//   vars              worker variables (default STANDARD_VARS); replaces, not merges
//   omitBindings      DO binding names to leave out, e.g. ["WORKFLOW_QUEUE"]
//   bindings          DO binding names to include (default: all four)
//   persistDir        durableObjectsPersist directory (default: in-memory, wiped on dispose)
//   scriptPath        the worker module (default build/index.js)
//   host, port        listen address (default 127.0.0.1, a free port)
//   verbose           let Miniflare/workerd log (default: false; also MINIFLARE_VERBOSE=1)
//   unsafeTriggerHandlers  serve Miniflare's /cdn-cgi/handler/scheduled trigger (default false)
//   transport         "fetch" (default) or "http" (node:http keep-alive; used by benchmarks)
//   inspectorPort     serve workerd's V8 inspector on this port (profiling)
//   logs              an array: every line the worker writes (console.log, console.error, …)
//                     is pushed onto it, as workerd prints it (the operator log tests)

import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Log, LogLevel, Miniflare } from "miniflare";
import { keepAliveAgent, makeRpc } from "./rpc.mjs";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const SCRIPT_PATH = join(ROOT, "build", "index.js");

/** The golden "standard" worker configuration (shared/golden/README.md). */
export const STANDARD_VARS = Object.freeze({
  WORLD_SECRET: "golden-secret",
  QUEUE_MAX_ATTEMPTS: "2",
  WORKFLOW_CALLBACK_SECRET: "golden-callback-secret",
});
export const STANDARD_SECRET = "golden-secret";

/** Polls `check` every 100 ms until it returns something truthy (returned); throws after `timeoutMs`. */
export async function waitFor(what, check, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Push every line the streams carry onto `into`. */
function collectLines(streams, into) {
  for (const stream of streams) {
    let rest = "";
    stream.setEncoding("utf8");
    stream.on("data", (chunk) => {
      const lines = (rest + chunk).split("\n");
      rest = lines.pop();
      into.push(...lines);
    });
  }
}

/** Binding name -> DO class name, and the compatibility settings, read from wrangler.toml. */
export function readWranglerConfig() {
  const text = readFileSync(join(ROOT, "wrangler.toml"), "utf8");
  const compatibilityDate = (text.match(/^\s*compatibility_date\s*=\s*"([^"]+)"/m) || [])[1];
  const flagsMatch = text.match(/^\s*compatibility_flags\s*=\s*\[([^\]]*)\]/m);
  const compatibilityFlags = flagsMatch ? [...flagsMatch[1].matchAll(/"([^"]+)"/g)].map((m) => m[1]) : [];
  const durableObjects = {};
  for (const block of text.split(/^\s*\[\[durable_objects\.bindings\]\]\s*$/m).slice(1)) {
    const body = block.split(/^\s*\[/m)[0];
    const name = (body.match(/^\s*name\s*=\s*"([^"]+)"/m) || [])[1];
    const className = (body.match(/^\s*class_name\s*=\s*"([^"]+)"/m) || [])[1];
    if (name && className) durableObjects[name] = className;
  }
  return { compatibilityDate, compatibilityFlags, durableObjects };
}

/**
 * Miniflare's options for serving a build of this worker (the module at `scriptPath` and its
 * wasm beside it) as wrangler.toml declares it: compatibility settings and every Durable
 * Object binding, less `omitBindings`, or only `bindings` when given.
 */
export function workerModuleOptions(scriptPath, { omitBindings = [], bindings } = {}) {
  const cfg = readWranglerConfig();
  const durableObjects = {};
  for (const [name, className] of Object.entries(cfg.durableObjects)) {
    if (omitBindings.includes(name)) continue;
    if (bindings && !bindings.includes(name)) continue;
    durableObjects[name] = { className, useSQLite: true };
  }
  return {
    scriptPath,
    modules: true,
    modulesRoot: dirname(scriptPath),
    modulesRules: [{ type: "CompiledWasm", include: ["**/*.wasm"], fallthrough: true }],
    compatibilityDate: cfg.compatibilityDate,
    compatibilityFlags: cfg.compatibilityFlags,
    durableObjects,
  };
}

/** The instance's URL once it serves; if it cannot start, it is disposed and the error thrown. */
export async function readyOrDisposed(mf) {
  try {
    return await mf.ready;
  } catch (err) {
    await mf.dispose().catch(() => {});
    throw err;
  }
}

export async function startWorker(options = {}) {
  const {
    vars = STANDARD_VARS,
    omitBindings = [],
    bindings,
    persistDir,
    scriptPath = SCRIPT_PATH,
    host = "127.0.0.1",
    port = 0,
    verbose = process.env.MINIFLARE_VERBOSE === "1",
    transport = "fetch",
    unsafeTriggerHandlers = false,
    inspectorPort,
    logs,
  } = options;
  if (!existsSync(scriptPath)) {
    throw new Error(`${scriptPath} is missing: run \`npm run build\` first`);
  }
  const mfOptions = {
    ...workerModuleOptions(scriptPath, { omitBindings, bindings }),
    bindings: { ...vars },
    host,
    port,
    // A fixed placeholder instead of fetching the real Request.cf object (offline).
    cf: { colo: "LOCAL", country: "XX" },
    log: verbose ? new Log(LogLevel.DEBUG) : new Log(LogLevel.WARN),
  };
  // `GET /cdn-cgi/handler/scheduled?cron=…` runs the scheduled handler (golden-0.4 §2.4).
  if (unsafeTriggerHandlers) mfOptions.unsafeTriggerHandlers = true;
  if (persistDir) mfOptions.durableObjectsPersist = persistDir;
  // V8 inspector of the workerd isolate (scripts/profile.mjs).
  if (inspectorPort !== undefined) mfOptions.inspectorPort = inspectorPort;
  if (logs) mfOptions.handleRuntimeStdio = (stdout, stderr) => collectLines([stdout, stderr], logs);
  const mf = new Miniflare(mfOptions);
  const url = await readyOrDisposed(mf);
  const secret = vars.WORLD_SECRET ?? null;
  // transport "http": node:http with a keep-alive agent instead of fetch (see rpc.mjs).
  const agent = transport === "http" ? keepAliveAgent() : undefined;
  const target = { url: url.href, secret, agent };
  return {
    mf,
    url: url.href,
    host: url.hostname,
    port: Number(url.port),
    secret,
    rpc: makeRpc(target),
    async dispose() {
      agent?.destroy();
      await mf.dispose();
    },
  };
}

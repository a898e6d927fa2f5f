// Instrumented copies of a worker for the workflow bench's counting pass: what a run asks of
// the platform, counted inside workerd without touching either worker's code.
//
// The copy's entry module (below) imports the worker's own module and re-exports it with:
//   - every Durable Object class subclassed so that its `this.ctx.storage` and `this.env`
//     are wrapped (both workers reach them only through `this` after construction);
//   - `env`'s Durable Object namespaces wrapped, so every method called on a stub they hand
//     out counts as one object call (from the router, or from another object: an
//     object→object hop), by the stub side, so an object's calls to its own methods do not
//     count;
//   - storage counted by the Durable Object storage API's billing units: rows read (a get
//     counts one per key, a list one per entry returned, an SQL cursor its rowsRead) and rows
//     written (a put or delete one per key, an SQL cursor its rowsWritten); alarms set
//     (setAlarm) and fired (the object's alarm() called by the runtime);
//   - GET /__bench/counts (the counts, JSON) and POST /__bench/reset on the entry.
// Durable Objects of a worker run in its isolate in workerd, so one module-level record
// holds the counts of the router and all objects.
//
// Wrapping costs CPU (a Proxy per storage and stub call), so the bench never times these
// copies.

import { copyFileSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { profileDir } from "../lib/workers.mjs";

const SHIM = String.raw`
import * as inner from "./__ENTRY__";

const fresh = () => ({ objectCalls: 0, objectToObject: 0, byMethod: {}, rowsRead: 0, rowsWritten: 0, storageCalls: 0, alarmsSet: 0, alarmsFired: 0, objects: {} });
const S = (globalThis.__celldBenchCounts ??= { c: fresh(), names: {} });
const count = (f, n = 1) => { S.c[f] += n; };
// Per object (keyed by its id): its namespace binding, its name (learnt from idFromName /
// getByName), the calls it served (stub calls from the router or another object) and the
// alarms it ran.
const object = (id, binding) => {
  const o = (S.c.objects[id] ??= { binding: S.names[id]?.binding ?? binding ?? null, name: S.names[id]?.name ?? null, requests: 0, alarms: 0 });
  if (!o.binding && binding) o.binding = binding;
  return o;
};

const bound = (t, v) => (typeof v === "function" ? v.bind(t) : v);

function wrapStub(stub, from, target) {
  return new Proxy(stub, {
    get(t, p) {
      const v = Reflect.get(t, p);
      if (typeof v !== "function" || typeof p !== "string") return v;
      return (...a) => {
        count("objectCalls");
        if (from !== "router") count("objectToObject");
        if (target) object(target.id, target.binding).requests += 1;
        // Our worker calls every object through one method, rpc(method, name, bytes).
        const key = from + "→" + (p === "rpc" && typeof a[0] === "string" ? a[0] : p);
        S.c.byMethod[key] = (S.c.byMethod[key] || 0) + 1;
        return Reflect.apply(v, t, a);
      };
    },
  });
}

const STUB_MAKERS = new Set(["get", "getByName", "getExisting"]);
function wrapNamespace(ns, from, binding) {
  return new Proxy(ns, {
    get(t, p) {
      const v = Reflect.get(t, p);
      if (typeof v === "function" && p === "idFromName")
        return (name, ...a) => {
          const id = Reflect.apply(v, t, [name, ...a]);
          S.names[String(id)] ??= { binding, name: String(name) };
          return id;
        };
      if (typeof v === "function" && STUB_MAKERS.has(p))
        return (...a) => {
          let target = null;
          if (p === "getByName") {
            const id = String(t.idFromName(a[0]));
            S.names[id] ??= { binding, name: String(a[0]) };
            target = { id, binding };
          } else if (a[0] !== undefined) target = { id: String(a[0]), binding };
          return wrapStub(Reflect.apply(v, t, a), from, target);
        };
      return bound(t, v);
    },
  });
}

const isNamespace = (v) => v && typeof v === "object" && typeof v.idFromName === "function" && typeof v.get === "function";
function wrapEnv(env, from) {
  const cache = new Map();
  return new Proxy(env, {
    get(t, p) {
      const v = Reflect.get(t, p);
      if (!isNamespace(v)) return v;
      if (!cache.has(p)) cache.set(p, wrapNamespace(v, from, String(p)));
      return cache.get(p);
    },
  });
}

const keysOf = (k) => (Array.isArray(k) ? k.length : k && typeof k === "object" ? Object.keys(k).length : 1);

function wrapCursor(c) {
  queueMicrotask(() => {
    count("rowsRead", c.rowsRead || 0);
    count("rowsWritten", c.rowsWritten || 0);
  });
  return c;
}

function wrapKv(kv) {
  return new Proxy(kv, {
    get(t, p) {
      const v = Reflect.get(t, p);
      if (typeof v !== "function") return v;
      if (p === "get") return (k, ...a) => (count("storageCalls"), count("rowsRead", keysOf(k)), Reflect.apply(v, t, [k, ...a]));
      if (p === "put" || p === "delete") return (k, ...a) => (count("storageCalls"), count("rowsWritten", keysOf(k)), Reflect.apply(v, t, [k, ...a]));
      if (p === "list")
        return (...a) => {
          count("storageCalls");
          const it = Reflect.apply(v, t, a);
          return (function* () {
            for (const e of it) {
              count("rowsRead");
              yield e;
            }
          })();
        };
      return v.bind(t);
    },
  });
}

function wrapStorage(st) {
  let kv;
  let sql;
  return new Proxy(st, {
    get(t, p) {
      if (p === "kv") return (kv ??= t.kv && wrapKv(t.kv));
      if (p === "sql") {
        const s = t.sql;
        return (sql ??= s && new Proxy(s, { get: (u, q) => (q === "exec" ? (...a) => (count("storageCalls"), wrapCursor(u.exec(...a))) : bound(u, Reflect.get(u, q))) }));
      }
      const v = Reflect.get(t, p);
      if (typeof v !== "function") return v;
      switch (p) {
        case "get":
          return (k, ...a) => (count("storageCalls"), count("rowsRead", keysOf(k)), v.call(t, k, ...a));
        case "put":
        case "delete":
          return (k, ...a) => (count("storageCalls"), count("rowsWritten", keysOf(k)), v.call(t, k, ...a));
        case "list":
          return async (...a) => {
            count("storageCalls");
            const m = await v.apply(t, a);
            count("rowsRead", m.size);
            return m;
          };
        case "setAlarm":
          return (...a) => (count("storageCalls"), count("alarmsSet"), v.apply(t, a));
        case "transaction":
          return (fn, ...a) => v.call(t, (txn) => fn(wrapStorage(txn)), ...a);
        default:
          return v.bind(t);
      }
    },
  });
}

function wrapCtx(ctx) {
  let storage;
  return new Proxy(ctx, {
    get(t, p) {
      if (p === "storage") return (storage ??= wrapStorage(t.storage));
      return bound(t, Reflect.get(t, p));
    },
  });
}

function wrapClass(C, name) {
  const W = class extends C {
    constructor(ctx, env) {
      // The runtime's base class takes only the real state; both workers read this.ctx and
      // this.env after construction, so the wrapped ones shadow them from here on.
      super(ctx, env);
      Object.defineProperty(this, "ctx", { value: wrapCtx(ctx), writable: true, configurable: true });
      Object.defineProperty(this, "env", { value: wrapEnv(env, name), writable: true, configurable: true });
    }
  };
  if (typeof C.prototype.alarm === "function") {
    W.prototype.alarm = function (...a) {
      count("alarmsFired");
      object(String(this.ctx.id)).alarms += 1;
      return C.prototype.alarm.apply(this, a);
    };
  }
  return W;
}

const base = inner.default;
const entry = {};
for (const k of Object.keys(base)) entry[k] = typeof base[k] === "function" ? base[k].bind(base) : base[k];
entry.fetch = async (request, env, ctx) => {
  const url = new URL(request.url);
  if (url.pathname === "/__bench/counts") return Response.json(S.c);
  if (url.pathname === "/__bench/reset") {
    S.c = fresh();
    return Response.json({});
  }
  return base.fetch.call(base, request, wrapEnv(env, "router"), ctx);
};
if (typeof base.scheduled === "function") entry.scheduled = (c, env, ctx) => base.scheduled.call(base, c, wrapEnv(env, "router"), ctx);
export default entry;

__EXPORTS__
`;

/** Names of the worker's Durable Object classes: its exports that are classes. */
function classExports(source) {
  const m = source.match(/export\s*\{([^}]*)\}\s*;?\s*$/);
  if (!m) throw new Error("instrument: no export list at the end of the worker module");
  const names = [];
  for (const part of m[1].split(",")) {
    const t = part.trim();
    if (!t) continue;
    const [, exported] = t.match(/(?:\S+\s+as\s+)?(\S+)$/);
    if (exported !== "default") names.push(exported);
  }
  return names;
}

/**
 * A `wrapEntry` for lib/workers.mjs startServer: copies the worker's module directory into
 * profiles/<profile>/.instrumented/<server>-<client>/ with the instrumenting entry beside it,
 * and returns that entry's path.
 */
export function instrumentedEntry(profile = "beta42") {
  return async (entryPath, { server, client }) => {
    const dir = join(profileDir(profile), ".instrumented", `${server}-${client}`);
    mkdirSync(dir, { recursive: true });
    const src = dirname(entryPath);
    for (const f of readdirSync(src)) {
      if (statSync(join(src, f)).isFile()) copyFileSync(join(src, f), join(dir, f));
    }
    // The worker's module under a .mjs name: Miniflare reads an imported .js as CommonJS.
    copyFileSync(entryPath, join(dir, "__bench_inner.mjs"));
    const names = classExports(readFileSync(entryPath, "utf8"));
    const exportsText = names
      .map((n) => `export const ${n} = typeof inner.${n} === "function" && /^class\\b/.test(Function.prototype.toString.call(inner.${n})) ? wrapClass(inner.${n}, ${JSON.stringify(n)}) : inner.${n};`)
      .join("\n");
    const out = join(dir, "__bench_entry.mjs");
    writeFileSync(out, SHIM.replace("__ENTRY__", "__bench_inner.mjs").replace("__EXPORTS__", exportsText));
    return out;
  };
}

/** The counts of an instrumented server since its last reset. */
export async function readCounts(server) {
  const res = await fetch(`${server.url}/__bench/counts`);
  if (!res.ok) throw new Error(`counts: ${res.status}`);
  return res.json();
}

export async function resetCounts(server) {
  const res = await fetch(`${server.url}/__bench/reset`, { method: "POST" });
  if (!res.ok) throw new Error(`reset counts: ${res.status}`);
}

/**
 * Every queue object of client shard q:0 made ready before a count, so that what happens
 * once in a queue object's life (its name written at its first call, the shard's pin taken
 * at its first enqueue: 16 partitions by default) is not counted as a workflow's: 256
 * messages enqueued for a run of no app, due in an hour (over 16 partitions each gets some:
 * the chance one is missed is below 1 in 2,000), then that run's expiry deletes them all.
 * The reference's queue does the same work once on its one object.
 */
export async function warmQueue(server) {
  const call = async (method, args) => {
    const res = await fetch(`${server.url}/v1/rpc/queue/q%3A0/${method}`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.secret}`, "content-type": "application/json" },
      body: JSON.stringify(args),
    });
    if (!res.ok) throw new Error(`warm queue: ${method} ${res.status} ${await res.text()}`);
    return res.json();
  };
  const runId = `wrun_bench_warm_${Date.now()}`;
  for (let i = 0; i < 256; i++) {
    const config = { targetBaseUrl: "http://127.0.0.1:9", queueShards: 1 };
    await call("enqueue", [{ messageId: `msg_bench_warm_${i}`, queueName: "__wkf_workflow_bench_warm", pathname: "flow", body: "{}", runId, delaySeconds: 3600, config }]);
  }
  await call("expireRun", [runId, Date.now()]);
}

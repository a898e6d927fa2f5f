// The Worker's JavaScript entry: the `fetch` router and the four Durable Object classes.
// Every decision is Rust's (src/shell/entry.rs over src/wire/router.rs; the DO cores over
// their storage); this module only does the platform I/O a call needs: read the path,
// headers and body, make one hop (hop.mjs), answer. The few things it decides itself, to
// save a crossing into wasm or an await, say so where they are ("Decided in JavaScript for
// speed"; also in path.mjs and body.mjs). The classes extend `DurableObject` so
// that workerd serves their `rpc` method over JavaScript RPC; each holds the Rust object
// of its instance and forwards to it.

import { DurableObject } from "cloudflare:workers";
import * as wasm from "./index.js";
import { hop } from "./hop.mjs";
import { pathnameOf } from "./path.mjs";
import { readLimited } from "./body.mjs";
import { isStreamRead, serveStreamRead, streamChunks, StreamWaiters } from "./stream_route.mjs";

const MAX_BODY_BYTES = 33554432;
/** The hourly maximum-age retention sweep's cron (spec-0.4 retention.md §5). */
const RETENTION_CRON = "0 * * * *";
const JSON_HEADERS = { "content-type": "application/json" };

// --- panic recovery -------------------------------------------------------------------
// A Rust panic aborts the wasm instance (a WebAssembly.RuntimeError); the next call resets
// the module's state and each object re-creates its Rust side.
let generation = 0;
let critical = false;

function checkReset() {
  if (critical) {
    critical = false;
    generation++;
    wasm.__wbg_reset_state();
  }
}

/**
 * The last errors this isolate logged (`console.error`, which the Rust side's error logs
 * use too), kept for `deliveryStats` (internal: a diagnosis that cannot read the logs).
 */
const recentErrors = [];
/** When this isolate evaluated the module (`deliveryStats`: an isolate made afresh). */
const isolateBorn = Date.now();
const logError = console.error.bind(console);
console.error = (...args) => {
  recentErrors.push(`${new Date().toISOString()} ${args.map(String).join(" ")}`.slice(0, 300));
  if (recentErrors.length > 12) recentErrors.shift();
  logError(...args);
};

/** Objects made and alarms run in this isolate, by class (diagnosis: `deliveryStats`). */
const made = {};
const alarms = {};

/** Resets so far in this isolate, and the last trap (diagnosis: `deliveryStats`). */
let resets = 0;
let lastTrap;

function noteCritical(e) {
  if (e instanceof WebAssembly.RuntimeError) {
    resets++;
    lastTrap = `${new Date().toISOString()} ${e.message} ${String(e.stack).split("\n").slice(1, 4).join(" | ")}`;
    console.error("wasm trapped; its state is reset on the next call", e);
    critical = true;
  }
}

// --- router ---------------------------------------------------------------------------
function respond(answer) {
  // `A<status><body>`: three status digits, then the body.
  return new Response(answer.slice(4), { status: +answer.slice(1, 4), headers: JSON_HEADERS });
}

// Forward decisions (F, X for the index facade, I for the 0.4 index coordinator), memoized: `wasm.route` is a pure function of its arguments, and a
// client calls the same few paths over and over (its run's `runs/<runId>`, `index/index`,
// its stream and queue shard), so most calls skip the crossing into wasm. Only forward
// decisions are kept (made with the right token, so a wrong token never hits), and only
// for a content-length that cannot exceed the limit (1 to 7 digits, or none), the one
// argument not in the key. Bounded: cleared when full.
// Decided in JavaScript for speed: a repeated forward decision comes from this memo, not from `wasm.route`.
const MEMO_LIMIT = 512;
const SMALL_LENGTH = /^[0-9]{1,7}$/;
const memo = new Map();
let memoSecret;
let memoPrevious;

function decide(request, env, authorization, contentLength) {
  const method = request.method;
  const pathname = pathnameOf(request.url);
  const secret = env.WORLD_SECRET;
  // During a rotation (docs/operations.md): the previous secret, accepted while it is set.
  const previous = env.WORLD_SECRET_PREVIOUS;
  const small = contentLength === null || SMALL_LENGTH.test(contentLength);
  const key = small && authorization !== null ? method + " " + authorization + " " + pathname : null;
  if (key !== null) {
    if (memoSecret !== secret || memoPrevious !== previous) {
      memo.clear();
      memoSecret = secret;
      memoPrevious = previous;
    }
    const hit = memo.get(key);
    if (hit !== undefined) return hit;
  }
  checkReset();
  const decision = wasm.route(method, pathname, authorization, secret, previous, contentLength);
  const kind = decision.charCodeAt(0);
  if (key !== null && (kind === 70 /* F */ || kind === 88 /* X */ || kind === 73 /* I */)) {
    if (memo.size >= MEMO_LIMIT) memo.clear();
    memo.set(key, decision);
  }
  return decision;
}

async function route(request, env) {
  const headers = request.headers;
  const contentLength = headers.get("content-length");
  const decision = decide(request, env, headers.get("authorization"), contentLength);
  const kind = decision.charCodeAt(0);
  if (kind === 65 /* A */) return respond(decision);
  // C<file>: the operator console's static files (src/shell/console.rs).
  if (kind === 67 /* C */) return consoleFile(decision.slice(1), request.method);
  // M: /v1/admin/… (src/shell/admin.rs); their POSTs take no body.
  if (kind === 77 /* M */) return admin(request, env);
  // S<segment>: the binary stream route reads its own body (its own limits).
  if (kind === 83 /* S */) return streamChunks(request, env, decision.slice(1));
  const body = await readLimited(request, contentLength, MAX_BODY_BYTES);
  if (body === null) return respond(wasm.tooLarge());
  if (kind === 66 /* B */) return respond(wasm.bodyError(body) || "A" + decision.slice(1));
  if (kind === 88 /* X */) return facade(env, decision, body);
  if (kind === 73 /* I */) return indexRoute(env, decision.slice(1), body);
  // F<ENV>\n<method>\n<name>
  const a = decision.indexOf("\n");
  const b = decision.indexOf("\n", a + 1);
  const ns = env[decision.slice(1, a)];
  if (!ns) return respond(wasm.bodyError(body) || wasm.missingBinding(decision.slice(1, a)));
  let name = decision.slice(b + 1);
  const method = decision.slice(a + 1, b);
  let reply;
  try {
    // A queue shard spread over partitions (src/shell/partitions.rs): the plan names the one
    // instance of the hop, or the call goes to all of them. Decided in JavaScript for speed:
    // a deployment of one queue object (QUEUE_PARTITIONS=1) forwards without asking.
    if (decision.startsWith("FWORKFLOW_QUEUE\n") && partitioned(env)) {
      const plan = wasm.queuePlan(method, name, body, env.QUEUE_PARTITIONS, env.QUEUE_PARTITIONS_PREVIOUS, env.QUEUE_MAX_INFLIGHT);
      if (plan[0] === 1) return new Response(plan[2], { status: plan[1], headers: JSON_HEADERS });
      if (plan[0] === 0) reply = await wasm.queuePartitionsCall(env, name, method, body);
      else name = plan[1];
    }
    reply ??= await hop(ns, name, method, body);
  } catch (e) {
    return respond(wasm.hopFailed(String(e?.message ?? e)));
  }
  return new Response(reply[1], { status: reply[0], headers: JSON_HEADERS });
}

/**
 * Whether the queue may be spread over partitions: unless QUEUE_PARTITIONS is 1 and its
 * previous value unset or 1 (unset, QUEUE_PARTITIONS is DEFAULT_QUEUE_PARTITIONS in
 * src/config.rs; the plan also reads QUEUE_MAX_INFLIGHT, which caps it).
 */
function partitioned(env) {
  const one = (v) => String(v).trim() === "1";
  const unset = (v) => v === undefined || v === "";
  return !(one(env.QUEUE_PARTITIONS) && (unset(env.QUEUE_PARTITIONS_PREVIOUS) || one(env.QUEUE_PARTITIONS_PREVIOUS)));
}

/** A console file with its headers (`[status, body, [[name, value]…]]`). */
function consoleFile(name, method) {
  const [status, body, headers] = wasm.consoleFile(name);
  return new Response(method === "HEAD" ? null : body, { status, headers });
}

/** `/v1/admin/…`: `[status, body]` from the admin front door (src/shell/admin.rs). */
async function admin(request, env) {
  const url = new URL(request.url);
  let reply;
  try {
    reply = await wasm.adminCall(env, request.method, pathnameOf(request.url), url.search);
  } catch (e) {
    noteCritical(e);
    return respond(wasm.hopFailed(String(e?.message ?? e)));
  }
  return new Response(reply[1], { status: reply[0], headers: { ...JSON_HEADERS, "cache-control": "no-store" } });
}

/** `X<ENV>\n<method>`: the 0.3 `index` binding over the index shards (src/shell/facade.rs). */
async function facade(env, decision, body) {
  const a = decision.indexOf("\n");
  if (!env[decision.slice(1, a)]) return respond(wasm.bodyError(body) || wasm.missingBinding(decision.slice(1, a)));
  const method = decision.slice(a + 1);
  let reply;
  try {
    // One hop where the plan names it; else the facade's own calls.
    // Decided in JavaScript for speed: the plan's one hop is made here, not by the asynchronous Rust path.
    const plan = wasm.facadePlan(method, body, env.WORKFLOW_CORRELATION_INDEX);
    const ns = plan[0] === 2 ? env[plan[1]] : undefined;
    if (plan[0] === 1) reply = [plan[1], plan[2]];
    else if (ns) reply = await hop(ns, plan[2], plan[3], plan.length > 4 ? plan[4] : body);
    else reply = await wasm.facadeCall(env, method, body);
  } catch (e) {
    noteCritical(e);
    return respond(wasm.hopFailed(String(e?.message ?? e)));
  }
  return new Response(reply[1], { status: reply[0], headers: JSON_HEADERS });
}

/** `I<op>`: one `/v1/index/*` operation over the index shards (src/shell/index_route.rs). */
async function indexRoute(env, op, body) {
  let reply;
  try {
    // One hop where the plan names it (`runs.commit`); else the coordinator's own calls.
    // Decided in JavaScript for speed: the plan's one hop is made here, not by the asynchronous Rust path.
    const plan = wasm.indexPlan(op, body);
    const ns = plan[0] === 2 ? env[plan[1]] : undefined;
    if (plan[0] === 1) reply = [plan[1], plan[2]];
    else if (ns) reply = await hop(ns, plan[2], plan[3], plan[4]);
    else reply = await wasm.indexCall(env, op, body);
  } catch (e) {
    noteCritical(e);
    return respond(wasm.hopFailed(String(e?.message ?? e)));
  }
  return new Response(reply[1], { status: reply[0], headers: JSON_HEADERS });
}

export default {
  async fetch(request, env) {
    try {
      return await route(request, env);
    } catch (e) {
      noteCritical(e);
      throw e;
    }
  },

  /**
   * Cron, dispatched on `controller.cron`: `0 * * * *` runs the maximum-age retention sweep
   * (src/sweep), every other schedule (`*\/10 * * * *`) one bounded step of the archive
   * migration (src/facade/migrate.rs).
   */
  async scheduled(controller, env) {
    checkReset();
    try {
      if (controller.cron === RETENTION_CRON) {
        const result = JSON.parse(await wasm.retentionSweep(env, controller.scheduledTime));
        if (result.scanned > 0) console.log("world-celld retention sweep", { cron: controller.cron, ...result });
        return;
      }
      const state = await wasm.migrateArchive(env);
      if (!JSON.parse(state).done) console.log(`world-celld index migration ${state}`);
    } catch (e) {
      noteCritical(e);
      throw e;
    }
  },
};

// --- Durable Object classes -----------------------------------------------------------
/** The asks one call may make before it takes the asynchronous path instead. */
// Decided in JavaScript for speed: up to MAX_ASKS asks between synchronous Rust calls beat one `rpcAsync`.
const MAX_ASKS = 3;
/** Thrown inside `transactionSync` to roll back a call that did not succeed. */
const ROLLBACK = Symbol("rollback");
const utf8 = new TextEncoder();
const utf8Decoder = new TextDecoder();


/** Shared by the four classes: the Rust object of this instance (re-created after a reset). */
class RustObject extends DurableObject {
  /** The Rust class's read-only methods (served without a transaction), read once per class. */
  static get readOnly() {
    if (!Object.hasOwn(this, "readOnlyMethods")) this.readOnlyMethods = new Set(this.Rust.readOnly().split(","));
    return this.readOnlyMethods;
  }

  rust() {
    checkReset();
    if (this.generation !== generation) {
      this.generation = generation;
      this.object = new this.constructor.Rust(this.ctx, this.env);
      made[this.constructor.name] = (made[this.constructor.name] ?? 0) + 1;
    }
    return this.object;
  }

  /** One RPC: `[status, body, alarm]` (src/shell/serve.rs); `body` is an ArrayBuffer or a view. */
  async rpc(method, name, data) {
    try {
      const body = data instanceof Uint8Array ? data : new Uint8Array(data);
      const object = this.rust();
      const current = this.currentAlarm(method);
      const alarm = typeof current === "number" ? current : await current;
      let reply = this.syncCall((direct) => object.rpcCall(method, name, body, direct, alarm));
      // 3: a step that needs another object's answer first (src/shell/serve.rs): ask it
      // here, then take the next step with the answer. If that cannot be done (or wasm
      // trapped meanwhile, so the answer's tag may belong to a lost state), the
      // asynchronous path asks (and reports the error).
      for (let asks = 0; reply[0] === 3; asks++) {
        const answer = asks < MAX_ASKS ? await this.ask(reply) : undefined;
        // Other calls may have run during the ask: an alarm reader starts again from the
        // alarm of now (read with the input gate closed, like the first).
        const again = answer === undefined ? NaN : this.currentAlarm(method);
        const current = typeof again === "number" ? again : await again;
        if (answer === undefined || critical || this.generation !== generation) {
          reply = [0];
          break;
        }
        reply = this.syncCall((direct) => object.rpcCall(method, name, body, direct, current, answer));
      }
      if (reply[0] === 0) reply = await this.rust().rpcAsync(method, name, body);
      const change = reply[2];
      if (change === change) await this.applyAlarm(change);
      return reply;
    } catch (e) {
      noteCritical(e);
      throw e;
    }
  }

  /**
   * The call a status-3 reply asks for (`[3, envBinding, name, method, body, tag]`), over
   * the hop: `[name, status, body, method, tag]`, or undefined when the binding is missing
   * or the hop threw.
   */
  async ask(reply) {
    const ns = this.env[reply[1]];
    if (!ns) return undefined;
    try {
      const answer = await hop(ns, reply[2], reply[3], reply[4]);
      return [reply[2], answer[0], answer[1], reply[3], reply[5]];
    } catch {
      return undefined;
    }
  }

  /**
   * One synchronous Rust call, `call(direct)`, on this object's storage. Rust holds a
   * writing call's writes back and writes them only once it has succeeded, so no
   * transaction is opened here: the platform commits them all together (src/shell/kv.rs,
   * `Writes`). Two statuses ask for more: 1, a write was too large to hold back (nothing
   * was written): call again writing directly, inside a transaction that anything but a
   * success rolls back; 2, storage failed while writing: abort this object, which discards
   * the uncommitted writes (the call fails; the next one gets a fresh object).
   */
  // Decided in JavaScript for speed: no `transactionSync` unless Rust reports a write too large to hold back.
  syncCall(call) {
    let reply = call(false);
    if (reply[0] === 1) {
      try {
        this.ctx.storage.transactionSync(() => {
          reply = call(true);
          if (reply[0] !== 200) throw ROLLBACK;
        });
      } catch (e) {
        if (e !== ROLLBACK) throw e;
      }
    } else if (reply[0] === 2) {
      const message = `${this.constructor.name}: storage failed while writing a call's changes; aborting the object: ${utf8Decoder.decode(reply[1])}`;
      console.error(message);
      this.ctx.abort(message);
    }
    return reply;
  }

  /**
   * The methods whose calls start from the current alarm (the Rust class's `alarmReaders`),
   * read once per class: the first read defines them as the class's own data property,
   * which every later read finds before this getter.
   */
  static get alarmReaders() {
    const methods = new Set(this.Rust.alarmReaders?.().split(",") ?? []);
    Object.defineProperty(this, "alarmReaders", { value: methods });
    return methods;
  }

  /** For the methods that start from it: (a promise of) the current alarm, `-1` when none is set; else `NaN`. */
  currentAlarm(method) {
    if (!this.constructor.alarmReaders.has(method)) return NaN;
    return this.ctx.storage.getAlarm().then((at) => at ?? -1);
  }

  /** The alarm a committed call asked for. The call is answered even if it fails. */
  async applyAlarm(alarm) {
    try {
      if (alarm < 0) await this.ctx.storage.deleteAlarm();
      else await this.ctx.storage.setAlarm(alarm);
    } catch (e) {
      console.error(`${this.constructor.name}: committed, but the alarm failed: ${e}`);
      // The Rust side (QueueDO) no longer knows what storage holds.
      this.object?.forgetAlarm?.();
    }
  }

  /** The hop's fetch form, for bodies too large for one RPC argument (hop.mjs). */
  async fetch(request) {
    const method = request.headers.get("x-celld-method") ?? "";
    const name = decodeURIComponent(request.headers.get("x-celld-name") ?? "");
    const reply = await this.rpc(method, name, await request.arrayBuffer());
    return new Response(reply[1], { status: reply[0], headers: JSON_HEADERS });
  }

  /** Internal (tests): the alarm storage holds (epoch ms), or null. Not routable. */
  storedAlarm() {
    return this.ctx.storage.getAlarm();
  }

  async alarm() {
    const counts = (alarms[this.constructor.name] ??= { started: 0, ended: 0, threw: 0, last: undefined });
    counts.started++;
    try {
      const object = this.rust();
      if (object.alarm) await object.alarm();
      counts.ended++;
    } catch (e) {
      counts.threw++;
      counts.last = `${new Date().toISOString()} ${String(e).slice(0, 200)}`;
      noteCritical(e);
      throw e;
    }
  }
}

export class WorkflowRunDO extends RustObject {
  static Rust = wasm.RunObject;
  /** The method that revokes a lifecycle lease (src/run/lease.rs). */
  static revocation = wasm.RunObject.leaseRevocation();

  /**
   * A committed call that broke lifecycle leases answers `[env binding, holder, runId]`
   * triples in a fourth slot: revoke them before answering (a failure is logged; that
   * lease then runs out by itself).
   */
  async rpc(method, name, data) {
    const reply = await super.rpc(method, name, data);
    if (reply.length > 3) await this.revokeLeases(reply.pop());
    return reply;
  }

  async revokeLeases(triples) {
    const revoke = WorkflowRunDO.revocation;
    await Promise.all(
      triples.map(async ([envName, holder, runId]) => {
        try {
          const ns = this.env[envName];
          if (!ns) throw new Error(`missing binding ${envName}`);
          const reply = await hop(ns, holder, revoke, utf8.encode(JSON.stringify([runId])));
          if (reply[0] !== 200) throw new Error(`status ${reply[0]}: ${utf8Decoder.decode(reply[1])}`);
        } catch (e) {
          console.error(`WorkflowRunDO lease revocation at ${holder}: ${e}`);
        }
      }),
    );
  }
}

export class StreamDO extends RustObject {
  static Rust = wasm.StreamObject;
  /** Long-poll readers of this instance (stream_route.mjs). */
  waiters = new StreamWaiters();

  /** Any committed mutation (write, close, fail, expire) wakes the waiting readers. */
  // Decided in JavaScript, where the waiters live: every successful call not read-only wakes them.
  async rpc(method, name, data) {
    const observed = this.waiters.version;
    const reply = await super.rpc(method, name, data);
    if (reply[0] === 200 && !StreamDO.readOnly.has(method)) this.waiters.wake();
    if (method === "getChunks" && reply[0] === 200) return this.holdLegacyRead(observed, name, data, reply);
    return reply;
  }

  /**
   * The 0.3.0 client's stream reader polls `getChunks` every 250 ms while a live stream has
   * nothing new: its empty answer waits here (in memory, no transaction) for the next
   * write, close or failure, at most the time Rust says (src/stream/chunks.rs
   * `legacy_hold_ms`; 0 for listings, finished streams and pages with chunks), then the
   * read runs again.
   */
  async holdLegacyRead(observed, name, data, reply) {
    const body = data instanceof Uint8Array ? data : new Uint8Array(data);
    const ms = wasm.StreamObject.legacyHoldMs(body, reply[1] instanceof Uint8Array ? reply[1] : new Uint8Array(reply[1]));
    if (ms === 0) return reply;
    await this.waiters.wait(observed, ms);
    return super.rpc("getChunks", name, data);
  }

  /** The binary write (from the stream route): `[status, bytes]`, all or nothing. */
  writeChunks(runId, body) {
    try {
      const object = this.rust();
      const reply = this.syncCall((direct) => object.writeChunks(runId, body, direct));
      if (reply[0] === 200) this.waiters.wake();
      return reply;
    } catch (e) {
      noteCritical(e);
      throw e;
    }
  }

  async fetch(request) {
    if (!isStreamRead(request)) return super.fetch(request);
    try {
      return await serveStreamRead(this, request);
    } catch (e) {
      noteCritical(e);
      throw e;
    }
  }

  /** Internal (tests): how many long-poll readers are waiting. Not routable. */
  streamWaiters() {
    return this.waiters.size;
  }
}

export class IndexDO extends RustObject {
  static Rust = wasm.IndexObject;
}

export class QueueDO extends RustObject {
  static Rust = wasm.QueueObject;

  constructor(ctx, env) {
    super(ctx, env);
    if (env.CELLD_TRACE_ALARMS) this.trace = traceAlarms(ctx.storage, () => this.object?.alarmWhy?.() ?? "no object yet");
  }

  async alarm() {
    this.trace?.("alarm handler starts");
    try {
      return await super.alarm();
    } finally {
      this.trace?.("alarm handler ends");
    }
  }

  /**
   * An `enqueue` that claimed its own message with no delivery loop running starts the
   * loop here, once its alarm is set and before it answers, instead of waiting for that
   * alarm to be scheduled (src/shell/queue_do.rs, `deliverNow`). The alarm still fires and
   * stays open until the loop ends; if this start fails, the alarm's own loop delivers.
   */
  // Decided in JavaScript: the loop must outlive the call that started it, un-awaited.
  async rpc(method, name, data) {
    const reply = await super.rpc(method, name, data);
    if (reply[0] === 200 && !critical && this.generation === generation && this.object.startsDelivery()) {
      const loop = this.object.deliverNow().catch((e) => {
        noteCritical(e);
        console.error(`QueueDO: the delivery loop an enqueue started failed: ${e}`);
      });
      this.ctx.waitUntil?.(loop);
    }
    // A courier's wake-up (src/shell/courier.rs): its loop starts once the shard has its
    // answer; the alarm the wake-up armed waits for it, or runs it if this start failed.
    if (reply[0] === 200 && !critical && this.generation === generation && this.object.startsCourier()) {
      const loop = this.object.courierRun().catch((e) => {
        noteCritical(e);
        console.error(`QueueDO: a courier's loop failed: ${e}`);
      });
      this.ctx.waitUntil?.(loop);
    }
    return reply;
  }

  /** Internal (tests, bench): this instance's delivery counters (src/shell/queue_do.rs `deliveryStats`). Not routable. */
  deliveryStats() {
    return { ...JSON.parse(this.rust().deliveryStats()), resets, lastTrap, lastPanic: globalThis.__celldPanic, recentErrors, isolateAgoMs: Date.now() - isolateBorn, made, alarms };
  }
}

/**
 * Diagnosis only, with the variable `CELLD_TRACE_ALARMS` set (`--var CELLD_TRACE_ALARMS=1`
 * of the chaos harness): every alarm write of this object (Rust's and the class's), with the
 * reason Rust noted for it, and each alarm handler's start and end, kept in storage under
 * `diag:alarms` (the last 24), so that a trial killed mid-run can be read afterwards.
 */
function traceAlarms(storage, why) {
  const set = storage.setAlarm.bind(storage);
  const del = storage.deleteAlarm.bind(storage);
  const note = (what) => {
    const ring = JSON.parse(storage.kv.get("diag:alarms") ?? "[]");
    ring.push([Date.now(), what]);
    storage.kv.put("diag:alarms", JSON.stringify(ring.slice(-24)));
  };
  storage.setAlarm = (at, options) => {
    note(`set ${Number(at) - Date.now()} ms ahead: ${why()}`);
    return set(at, options);
  };
  storage.deleteAlarm = (options) => {
    note(`delete: ${why()}`);
    return del(options);
  };
  return note;
}

// The sharded index (src/shell/shards.rs): internal methods only, reached by the 0.3
// `index` facade and the run DO's retention cleanup.
export class RunCatalogDO extends RustObject {
  static Rust = wasm.CatalogObject;
}

export class HookTokenDO extends RustObject {
  static Rust = wasm.HookTokenObject;
}

export class HookIdDO extends RustObject {
  static Rust = wasm.HookIdObject;
}

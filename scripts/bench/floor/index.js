// The floor: a hand-written JavaScript worker that does, per call of the `bench:cpu`
// workloads it serves, the platform work any implementation of this wire must do on
// workerd, and as little else as it can. It is a measuring stick, not a backend: no
// validation, no error table, no retention, no 0.4 routes, happy paths only.
//
//   npm run bench:cpu -- --floor --interleave --runs 3     # floor (A) against build/ (B)
//
// Per call it pays what our worker pays on the platform: the router's request (auth,
// path, one body read), one JS-RPC hop to the Durable Object, the same storage reads and
// writes (same keys per call, values of about the same size, written in the call's
// implicit transaction), and one JSON answer of the same shape. Bodies are parsed with
// V8's JSON.parse and answers written with JSON.stringify; tagged byte arrays are stored
// as received (never decoded). So `B/A` of our build against it is what our worker costs
// beyond the least a call can cost here: the TypeScript reference pays the same platform
// work plus its own, so no implementation measures below this floor on this workerd.
//
// Workloads served: health, getRun (missing and live), putOwned, enqueue, event, listEvents,
// run0 (`FLOOR_WORKLOADS` in ../cpu.mjs). Our own code; nothing here comes from the reference.

import { DurableObject } from "cloudflare:workers";

const JSON_HEADERS = { "content-type": "application/json" };
const HEALTH = '{"ok":true,"name":"world-celld","version":"0.1.0","specVersion":6}';
const utf8 = new TextDecoder();
const BINDINGS = { runs: "WORKFLOW_DB", index: "WORKFLOW_RUN_CATALOG", queue: "WORKFLOW_QUEUE" };
const CATALOG_SHARDS = 16;

const date = (iso) => ({ __type: "Date", iso });
const parseArgs = (body) => JSON.parse(utf8.decode(body));

/**
 * FNV-1a over UTF-16 code units: the catalog shard of a run. The twin of `shardOf` in
 * tests/lib/world-client.mjs, which this module cannot import (Miniflare loads it from its
 * own folder, and that file needs Node's Buffer).
 */
function shardOf(s) {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193) >>> 0;
  return h % CATALOG_SHARDS;
}

/** A stored record (dates as ISO text) in its answer form (dates tagged). */
function tagged(record) {
  if (record === null) return null;
  const out = { ...record };
  for (const k of ["createdAt", "updatedAt", "startedAt", "completedAt"]) if (typeof out[k] === "string") out[k] = date(out[k]);
  return out;
}

class FloorObject extends DurableObject {
  rpc(method, body) {
    return this[method](body);
  }
}

export class WorkflowRunDO extends FloorObject {
  getRun() {
    const kv = this.ctx.storage.kv;
    kv.get("retention:cleanup");
    kv.get("retention:tombstone");
    const run = kv.get("run");
    return JSON.stringify({ ok: true, value: run === undefined ? null : tagged(JSON.parse(run)) });
  }

  applyEvent(body) {
    const [{ runId, data }] = parseArgs(body);
    const kv = this.ctx.storage.kv;
    kv.get("retention:cleanup");
    kv.get("retention:tombstone");
    const n = (kv.get("seq") ?? 0) + 1;
    const now = new Date().toISOString();
    const eventId = `evnt_${String(n).padStart(26, "0")}`;
    const event = { ...data, eventId, runId, createdAt: now };
    const stored = kv.get("run");
    let run = stored === undefined ? null : JSON.parse(stored);
    const answer = { ok: true, releasedHooks: [] };
    const stepKey = `step:${data.correlationId}`;
    let step;
    switch (data.eventType) {
      case "run_created": {
        const { deploymentId, workflowName, input } = data.eventData;
        run = { runId, status: "pending", deploymentId, workflowName, input, attributes: {}, specVersion: data.specVersion, createdAt: now, updatedAt: now };
        break;
      }
      case "run_started":
        run = { ...run, status: "running", startedAt: now, updatedAt: now };
        break;
      case "run_completed":
        // A terminal run's hooks and waits go with it: any implementation has to look.
        for (const prefix of ["hook:", "wait:"]) for (const _ of kv.list({ prefix })) throw new Error("the floor's runs have no hooks or waits");
        run = { ...run, status: "completed", output: data.eventData.output, completedAt: now, updatedAt: now };
        break;
      case "step_created":
        step = { runId, stepId: data.correlationId, stepName: data.eventData.stepName, input: data.eventData.input, status: "pending", attempt: 0, specVersion: data.specVersion, createdAt: now, updatedAt: now };
        break;
      case "step_started":
        step = JSON.parse(kv.get(stepKey));
        step = { ...step, status: "running", attempt: step.attempt + 1, startedAt: now, updatedAt: now };
        break;
      case "step_completed":
        step = JSON.parse(kv.get(stepKey));
        step = { ...step, status: "completed", output: data.eventData.result, completedAt: now, updatedAt: now };
        break;
      default:
        throw new Error(`the floor does not serve ${data.eventType}`);
    }
    const eventKey = `event:${eventId}`;
    kv.put(eventKey, JSON.stringify(event));
    kv.put("seq", n);
    kv.put(`ix:${eventId}`, "1");
    if (step) {
      kv.put(stepKey, JSON.stringify(step));
      answer.step = tagged(step);
    } else {
      kv.put("run", JSON.stringify(run));
      answer.run = tagged(run);
      answer.maxEvents = 25000;
      if (data.eventType === "run_started") {
        answer.events = [...kv.list({ prefix: "event:" })].map(([, v]) => tagged(JSON.parse(v)));
        answer.hasMore = false;
        answer.cursor = null;
      }
    }
    answer.event = tagged(event);
    return JSON.stringify(answer);
  }

  listEvents() {
    const data = [...this.ctx.storage.kv.list({ prefix: "event:" })].map(([, v]) => tagged(JSON.parse(v)));
    return JSON.stringify({ ok: true, value: { data, hasMore: false, cursor: null } });
  }
}

export class RunCatalogDO extends FloorObject {
  putOwned(body) {
    const [runId, key, value] = parseArgs(body);
    const kv = this.ctx.storage.kv;
    if (kv.get(`expired:${runId}`) !== undefined) return '{"stored":false}';
    kv.put(key, value);
    return '{"stored":true}';
  }
}

export class QueueDO extends FloorObject {
  async enqueue(body) {
    const [message] = parseArgs(body);
    const kv = this.ctx.storage.kv;
    const id = message.messageId;
    // The run's expiry fence and the shard's pinned configuration, then the message row,
    // its schedule entry and the run's reference to it (what expiring the run pages).
    if (kv.get(`expired:${message.runId}`) !== undefined) return JSON.stringify({ ok: false, code: "RUN_EXPIRED" });
    if (kv.get("cfg") === undefined) kv.put("cfg", JSON.stringify({ queueShards: message.config?.queueShards, pinnedAt: Date.now() }));
    const due = Date.now() + (message.delaySeconds ?? 0) * 1000;
    const dueKey = `due:${String(due).padStart(13, "0")}:${id}`;
    kv.put(`msg:${id}`, JSON.stringify({ ...message, attempt: 0, enqueuedAt: Date.now() }));
    kv.put(dueKey, id);
    kv.put(`runmsg:${message.runId}:${id}`, dueKey);
    const alarm = await this.ctx.storage.getAlarm();
    if (alarm === null || due < alarm) await this.ctx.storage.setAlarm(due);
    return JSON.stringify({ ok: true, messageId: id });
  }

  async stats() {
    const pending = [...this.ctx.storage.kv.list({ prefix: "due:" })].length;
    return JSON.stringify({ alarmAt: await this.ctx.storage.getAlarm(), deadLetters: 0, inflight: 0, pending });
  }

  async alarm() {
    // Messages are delayed by an hour in the workloads: nothing becomes due during a run.
  }
}

// The rest of wrangler.toml's classes, unused.
export class StreamDO extends FloorObject {}
export class IndexDO extends FloorObject {}
export class HookTokenDO extends FloorObject {}
export class HookIdDO extends FloorObject {}

export default {
  async fetch(request, env) {
    const url = request.url;
    const path = url.slice(url.indexOf("/", url.indexOf("://") + 3));
    if (path === "/v1/health") return new Response(HEALTH, { headers: JSON_HEADERS });
    if (request.headers.get("authorization") !== `Bearer ${env.WORLD_SECRET}`) return new Response('{"error":{"name":"Unauthorized","message":"unauthorized"}}', { status: 401, headers: JSON_HEADERS });
    const [, v1, rpc, binding, name, method] = path.split("/");
    const ns = env[BINDINGS[binding]];
    if (v1 !== "v1" || rpc !== "rpc" || !ns || request.method !== "POST") return new Response('{"error":{"name":"Error","message":"not served by the floor"}}', { status: 404, headers: JSON_HEADERS });
    const body = new Uint8Array(await request.arrayBuffer());
    // The 0.3 `index` binding: a correlation key's putOwned goes to its run's catalog shard.
    const instance = binding === "index" ? `catalog:${shardOf(JSON.parse(utf8.decode(body))[0])}` : decodeURIComponent(name);
    const answer = await ns.getByName(instance).rpc(method, body);
    return new Response(answer, { headers: JSON_HEADERS });
  },
};

// The 0.4.0 client's call sequences (spec-0.4/client.md §3–§4) over HTTP: what
// `events.create`, `hooks.get*`, `runs.list` and the streamer send, in order, so tests and
// benchmarks drive the worker the way an app on `@ewhauser/world-celld` 0.4.x does.
//
//   const c = worldClient040({ url, secret }, { retentionMs: 0, queueShards: 1 });
//   const out = await c.createEvent(runId, { eventType: "run_created", ... });
//
// The shard names are the persisted protocol (spec-0.4/wire.md §8): FNV-1a-32 over the
// UTF-8 bytes, two lower-case hex digits.

import { decode, encode } from "./codec.mjs";
import { RpcError, rpcPath } from "./rpc.mjs";
import { sharedCodec } from "./world-client.mjs";

export const STREAM_BATCH_TYPE = "application/vnd.world-celld.stream-batch.v1";

/** FNV-1a 32-bit over the UTF-8 bytes of `s` (unsigned). */
export function fnv1aUtf8(s) {
  let h = 0x811c9dc5;
  for (const b of Buffer.from(s, "utf8")) {
    h ^= b;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}
const hh = (n) => n.toString(16).padStart(2, "0");
export const runCatalogShard = (runId) => `run-catalog:v1:${hh(fnv1aUtf8(runId) % 16)}`;
export const hookTokenShard = (token) => `hook-token:v1:${hh(fnv1aUtf8(token) % 32)}`;
export const hookIdShard = (hookId) => `hook-id:v1:${hh(fnv1aUtf8(hookId) % 32)}`;

/** A WCSW write frame (wire.md §6.1). */
export function writeFrame(chunks) {
  const parts = [Buffer.from([0x57, 0x43, 0x53, 0x57, 0, 1, chunks.length >> 8, chunks.length & 255])];
  for (const c of chunks) {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(c.byteLength, 0);
    parts.push(len, Buffer.from(c.buffer, c.byteOffset, c.byteLength));
  }
  return Buffer.concat(parts);
}

/** Decodes a WCSA ack (wire.md §6.2). */
export function readAck(buf) {
  if (buf.length !== 16 || buf.toString("latin1", 0, 4) !== "WCSA") throw new Error(`bad ack ${buf.toString("hex")}`);
  return { count: buf.readUInt16BE(6), startIndex: buf.readInt32BE(8), tailIndex: buf.readInt32BE(12) };
}

const STATES = ["open", "closed", "errored", "expired"];

/** Decodes a WCSR read answer (wire.md §6.3). */
export function readFrame(buf) {
  if (buf.length < 28 || buf.toString("latin1", 0, 4) !== "WCSR") throw new Error(`bad read frame ${buf.subarray(0, 32).toString("hex")}`);
  const count = buf.readUInt32BE(16);
  const nameLen = buf.readUInt32BE(20);
  const messageLen = buf.readUInt32BE(24);
  let at = 28;
  const chunks = [];
  for (let i = 0; i < count; i++) {
    const len = buf.readUInt32BE(at);
    chunks.push(new Uint8Array(buf.subarray(at + 4, at + 4 + len)));
    at += 4 + len;
  }
  const name = buf.toString("utf8", at, at + nameLen);
  const message = buf.toString("utf8", at + nameLen, at + nameLen + messageLen);
  return {
    state: STATES[buf[5]],
    timedOut: (buf[6] & 1) === 1,
    startIndex: buf.readInt32BE(8),
    tailIndex: buf.readInt32BE(12),
    chunks,
    error: nameLen || messageLen ? { name, message } : null,
  };
}

export function worldClient040({ url, secret }, { retentionMs = 0, queueShards = 1, streamLongPollMs = 2000 } = {}) {
  const auth = { authorization: `Bearer ${secret}` };

  async function post(path, args) {
    const res = await fetch(new URL(path, url), { method: "POST", headers: { "content-type": "application/json", ...auth }, body: encode(args) });
    const text = await res.text();
    let value;
    try {
      value = decode(text);
    } catch {
      value = undefined;
    }
    return { status: res.status, text, value };
  }
  async function call(path, args) {
    const r = await post(path, args);
    if (r.status !== 200) throw new RpcError(r.status, r.value, r.text);
    return r.value;
  }
  const rpc = (binding, name, method, args = []) => call(rpcPath(binding, name, method), args);
  const idx = (domain, op, args) => call(`/v1/index/${domain}/${op}`, args);

  /** events.create (client.md §3 steps 2–9). */
  async function createEvent(runId, data, params) {
    let reservation = null;
    let owner = null;
    let token = null;
    let tokenHolder;
    if (data.eventType === "hook_created") {
      token = data.eventData.token;
      owner = { runId, hookId: data.correlationId };
      const admission = await idx("hooks", "reserve", [token, owner]);
      if (admission.admitted) {
        reservation = admission.reservation;
        tokenHolder = null;
      } else {
        tokenHolder = admission.holder;
      }
    }
    const request = { runId, data, params, cleanup: { retentionMs, queueShards } };
    if (data.eventType === "hook_created") request.tokenHolder = tokenHolder;
    if (reservation) request.hookClaimId = reservation.claimId;
    let raw;
    try {
      raw = await post(rpcPath("runs", runId, "applyEvent"), [request]);
      if (raw.status !== 200) throw new RpcError(raw.status, raw.value, raw.text);
    } catch (err) {
      if (reservation) {
        const resolved = await rpc("runs", runId, "resolveHookTokenClaim", [{ hookId: owner.hookId, token, claimId: reservation.claimId }]);
        if (!resolved.committed) await idx("hooks", "release-reservation", [token, owner, reservation]);
      }
      throw err;
    }
    const out = raw.value;
    if (!out.ok) {
      if (reservation) await idx("hooks", "release-reservation", [token, owner, reservation]);
      return out;
    }
    if (out.run) {
      if (typeof out.indexPublicationExpiresAt !== "number") throw new Error("world-celld: authoritative run mutation omitted its index lease");
      const meta = JSON.stringify({ runId, createdAt: out.run.createdAt.toISOString(), status: out.run.status });
      await idx("runs", "commit", [out.run, meta, out.indexPublicationExpiresAt]);
    }
    if (out.hookToIndex) {
      const hook = out.hookToIndex;
      await idx("hooks", "finalize", [hook.token, hook.hookId, sharedCodec(hook), { runId: hook.runId, hookId: hook.hookId }, reservation]);
    } else if (reservation) {
      await idx("hooks", "release-reservation", [token, owner, reservation]);
    }
    if (out.releasedHooks?.length) await idx("hooks", "release", [{ runId, hooks: out.releasedHooks }]);
    return out;
  }

  const getByToken = (t) => rpc("hook-tokens", hookTokenShard(t), "get", [t]);
  const getHook = (id) => rpc("hook-ids", hookIdShard(id), "get", [id]);

  /** runs.list's index page (client.md §3 runs.list step 1). */
  const listRuns = (options) => idx("runs", "list", [options]);

  const streamPath = (name, query) => `/v1/streams/${encodeURIComponent(`stream:${name}`)}/chunks?${query}`;

  /** streams.writeMulti: registerStream, then one WCSW batch per ≤ 32 chunks. */
  async function writeMulti(runId, name, chunks) {
    await rpc("streams", `run-streams:${runId}`, "registerStream", [runId, name]);
    const acks = [];
    for (let i = 0; i < chunks.length; i += 32) {
      const res = await fetch(new URL(streamPath(name, `runId=${encodeURIComponent(runId)}`), url), {
        method: "POST",
        headers: { "content-type": STREAM_BATCH_TYPE, ...auth },
        body: writeFrame(chunks.slice(i, i + 32)),
      });
      const body = Buffer.from(await res.arrayBuffer());
      if (res.status !== 200) throw new RpcError(res.status, JSON.parse(body.toString("utf8")), body.toString("utf8"));
      acks.push(readAck(body));
    }
    return acks;
  }

  /** One WCSR read; `waitMs` 0 for page reads, the long-poll budget for `streams.get`. */
  async function read(runId, name, { startIndex = 0, maxChunks = 32, maxBytes = 8388608, waitMs = 0, signal } = {}) {
    const query = `runId=${encodeURIComponent(runId)}&startIndex=${startIndex}&maxChunks=${maxChunks}&maxBytes=${maxBytes}&waitMs=${waitMs}`;
    const res = await fetch(new URL(streamPath(name, query), url), { headers: auth, signal });
    const body = Buffer.from(await res.arrayBuffer());
    if (res.status !== 200) throw new RpcError(res.status, JSON.parse(body.toString("utf8")), body.toString("utf8"));
    return readFrame(body);
  }

  /** streams.get's long-poll read from `startIndex` (one pull). */
  const poll = (runId, name, startIndex, signal) => read(runId, name, { startIndex, waitMs: streamLongPollMs, signal });

  const closeStream = (runId, name) => rpc("streams", `stream:${name}`, "closeStream", [runId]);
  const failStream = (runId, name, error) => rpc("streams", `stream:${name}`, "failStream", [runId, error]);

  return { rpc, idx, createEvent, getByToken, getHook, listRuns, writeMulti, read, poll, closeStream, failStream };
}

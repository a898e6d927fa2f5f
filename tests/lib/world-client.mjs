// The reference client's storage call sequences (spec client.md §3), over our RPC helper:
// what `events.create` and friends send, in order, so integration tests and benchmarks
// drive the worker the way a real Workflow DevKit app does.
//
//   const c = worldClient(worker.rpc, { retentionMs: 0, queueShards: 1 });
//   const out = await c.createEvent(runId, { eventType: "run_created", ... });

/** 13-digit zero-padded epoch ms, as the client embeds in IndexDO keys. */
export const ms13 = (d) => String(d.getTime()).padStart(13, "0");

/** The shared codec the client uses for serialized hooks: Dates as ISO strings. */
export const sharedCodec = (v) =>
  JSON.stringify(v, (k, x) => (x instanceof Uint8Array ? { __type: "Uint8Array", data: Buffer.from(x).toString("base64") } : x));

/** The client's queue shard choice: FNV-1a-32 over UTF-16 code units, mod shards (client.md §5). */
export function shardOf(key, shards) {
  if (shards <= 1) return 0;
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h % shards;
}

export function worldClient(rpc, { retentionMs = 0, queueShards = 1 } = {}) {
  const ix = (method, args = []) => rpc("index", "index", method, args);

  /** events.create: reserve → applyEvent → index writes (client.md §3 steps 2–9). */
  async function createEvent(runId, data, params) {
    const owner = { runId, hookId: data.correlationId };
    let tokenHolder;
    if (data.eventType === "hook_created") {
      const claim = await ix("reserveHookToken", [data.eventData.token, owner]);
      tokenHolder = claim.claimed ? null : claim.holder;
    }
    const request = { runId, data, params, cleanup: { retentionMs, queueShards } };
    if (data.eventType === "hook_created") request.tokenHolder = tokenHolder;
    const raw = await rpc.raw("runs", runId, "applyEvent", [request]);
    if (raw.status !== 200 || !raw.value.ok) {
      if (data.eventType === "hook_created") await ix("releaseHookToken", [data.eventData.token, owner]);
      if (raw.status !== 200) {
        const err = new Error(raw.value?.error?.message ?? raw.text);
        err.name = raw.value?.error?.name ?? "Error";
        err.status = raw.status;
        throw err;
      }
      return raw.value;
    }
    const out = raw.value;
    if (out.run) {
      const meta = JSON.stringify({ runId, createdAt: out.run.createdAt.toISOString(), status: out.run.status });
      await ix("putOwned", [runId, `run:${out.run.workflowName}:${ms13(out.run.createdAt)}:${runId}`, meta]);
      await ix("putOwned", [runId, `runall:${ms13(out.run.createdAt)}:${runId}`, meta]);
    }
    if (out.hookToIndex) {
      const hook = out.hookToIndex;
      await ix("finalizeHookIndexes", [hook.token, hook.hookId, sharedCodec(hook), { runId: hook.runId, hookId: hook.hookId }]);
    } else if (data.eventType === "hook_created") {
      await ix("releaseHookToken", [data.eventData.token, owner]);
    }
    for (const r of out.releasedHooks) await ix("deleteHookIndexes", [r.token, r.hookId, { runId, hookId: r.hookId }]);
    if (out.event?.correlationId) {
      const key = `correlation:${encodeURIComponent(out.event.correlationId)}:${ms13(out.event.createdAt)}:${out.event.eventId}:${runId}`;
      await ix("putOwned", [runId, key, JSON.stringify({ runId, eventId: out.event.eventId })]);
    }
    return out;
  }

  /** streamer.writeToStream: register the name with the run, then append. */
  async function writeToStream(runId, name, chunk) {
    await rpc("streams", `run-streams:${runId}`, "registerStream", [runId, name]);
    return rpc("streams", `stream:${name}`, "writeChunk", [runId, chunk]);
  }

  /** queue.queue: one message to its shard. */
  async function enqueue({ messageId, queueName, body, runId, idempotencyKey, delaySeconds, targetBaseUrl }) {
    const shard = shardOf(idempotencyKey ?? messageId, queueShards);
    return rpc("queue", `q:${shard}`, "enqueue", [
      { messageId, queueName, pathname: "flow", body, runId, idempotencyKey, delaySeconds, config: { targetBaseUrl, queueShards } },
    ]);
  }

  return { createEvent, writeToStream, enqueue, ix };
}

// The binary stream route `GET|POST /v1/streams/<name>/chunks` (spec-0.4 wire.md §5) and
// the StreamDO's side of it. Every decision is Rust's (src/stream/route.rs, protocol.rs,
// chunks.rs through src/shell/stream_route.rs); this module reads the request, makes one hop
// and answers, and keeps the StreamDO's long-poll waiters (in memory, per instance).
//
// Hops: a write is a JS RPC `stub.writeChunks(runId, body)`; a read is a `stub.fetch` whose
// signal is the client request's, so that a client that goes away cancels the subrequest
// and the DO (whose `request.signal` then aborts; compat flag `enable_request_signal`) drops
// its waiter at once instead of keeping it until `waitMs` runs out.

import * as wasm from "./index.js";
import { readLimited } from "./body.mjs";

const BATCH_HEADERS = { "content-type": "application/vnd.world-celld.stream-batch.v1" };
const JSON_HEADERS = { "content-type": "application/json" };
const MAX_WRITE_BODY = 8389632;
const READ_URL = "https://celld.internal/stream-read";
const READ_HEADER = "x-celld-stream-read";
const RUN_HEADER = "x-celld-run";

/** `["A", status, body]` → the JSON error answer. */
function answer(a) {
  return new Response(a[2], { status: a[1], headers: JSON_HEADERS });
}

/** A DO reply `[status, bytes]`: the binary frame on 200, else its JSON error body. */
function frameReply(status, body) {
  return new Response(body, { status, headers: status === 200 ? BATCH_HEADERS : JSON_HEADERS });
}

function hopFailed(e) {
  const message = String(e?.message ?? e);
  return new Response(JSON.stringify({ error: { name: "Error", message } }), { status: 500, headers: JSON_HEADERS });
}

/**
 * The route, after authentication: `rawSegment` is the (percent-encoded) third path
 * segment, the StreamDO instance name.
 */
export async function streamChunks(request, env, rawSegment) {
  const query = new URL(request.url).searchParams;
  const headers = request.headers;
  const ns = env.WORKFLOW_STREAMS;
  const d = wasm.streamRoute(
    request.method,
    rawSegment,
    query.get("runId"),
    headers.get("content-type"),
    headers.get("content-length"),
    Boolean(ns),
    query.get("startIndex"),
    query.get("maxChunks"),
    query.get("maxBytes"),
    query.get("waitMs"),
  );
  if (d[0] === "A") return answer(d);
  const stub = ns.getByName(d[1]);
  if (d[0] === "W") {
    const body = await readLimited(request, request.headers.get("content-length"), MAX_WRITE_BODY);
    if (body === null) return answer(wasm.streamTooLarge());
    const bad = wasm.streamFrameError(body);
    if (bad !== null) return answer(bad);
    try {
      const reply = await stub.writeChunks(d[2], body);
      return frameReply(reply[0], reply[1]);
    } catch (e) {
      return hopFailed(e);
    }
  }
  // "R": name, runId, startIndex, maxChunks, maxBytes, waitMs.
  try {
    const resp = await stub.fetch(READ_URL, {
      headers: { [READ_HEADER]: `${d[3]},${d[4]},${d[5]},${d[6]}`, [RUN_HEADER]: encodeURIComponent(d[2]) },
      signal: request.signal,
    });
    return frameReply(resp.status, resp.body);
  } catch (e) {
    if (request.signal.aborted) throw e; // nobody is listening any more
    return hopFailed(e);
  }
}

// --- StreamDO side ---------------------------------------------------------------------

/** The in-memory long-poll waiters of one StreamDO instance. */
// Decided in JavaScript, where the timers and the request signal are: when a read stops waiting.
export class StreamWaiters {
  /** Bumped by every committed mutation (write, close, fail, expire). */
  version = 0;
  #waiting = new Set();

  get size() {
    return this.#waiting.size;
  }

  /** Wake every waiter (after a mutation committed). */
  wake() {
    this.version++;
    const all = [...this.#waiting];
    this.#waiting.clear();
    for (const w of all) w.done("change");
  }

  /**
   * Wait for the next mutation after `observed`, at most `ms`: resolves `"change"` or
   * `"timeout"`; rejects with the abort reason when `signal` aborts. The waiter is removed
   * in every case.
   */
  wait(observed, ms, signal) {
    if (this.version !== observed) return Promise.resolve("change");
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise((resolve, reject) => {
      const w = {
        done: (reason) => {
          clearTimeout(timer);
          signal?.removeEventListener("abort", onAbort);
          this.#waiting.delete(w);
          resolve(reason);
        },
      };
      const onAbort = () => {
        clearTimeout(timer);
        this.#waiting.delete(w);
        reject(signal.reason);
      };
      const timer = setTimeout(() => w.done("timeout"), ms);
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#waiting.add(w);
    });
  }
}

/** `true` for the StreamDO's read hop (a `stub.fetch` from `streamChunks`). */
export function isStreamRead(request) {
  return request.headers.has(READ_HEADER);
}

/**
 * Serve a read hop on StreamDO `so` (its `rust()` object, `waiters`, and `syncCall(call)`,
 * which runs one synchronous Rust call on its storage, see entry.mjs): snapshot; if idle,
 * wait in memory (other calls proceed) for the next change or the timeout; snapshot again.
 */
export async function serveStreamRead(so, request) {
  const [start, maxChunks, maxBytes, waitMs] = request.headers.get(READ_HEADER).split(",").map(Number);
  const runId = decodeURIComponent(request.headers.get(RUN_HEADER) ?? "");
  const observed = so.waiters.version;
  const read = (timedOut, mayWait) => {
    const object = so.rust();
    return so.syncCall((direct) => object.readChunks(runId, start, maxChunks, maxBytes, waitMs, timedOut, mayWait, direct));
  };
  let reply = read(false, true);
  if (reply[0] === 0) {
    let reason;
    try {
      reason = await so.waiters.wait(observed, waitMs, request.signal);
    } catch {
      // The caller went away: nobody reads this answer.
      return new Response(null, { status: 499 });
    }
    reply = read(reason === "timeout", false);
  }
  return new Response(reply[1], { status: reply[0] });
}

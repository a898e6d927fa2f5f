// The golden transcript replayer: shared/golden/README.md §3–§5, implemented exactly.
//
// For one transcript file: start a fresh worker (wiped storage) with the manifest's
// configuration and the callback server on a free port of 127.0.0.1 (the transcripts' 18999 in
// a request body is rewritten to it, and back in an answer, so that replays may run at once),
// then walk the lines in seq order:
//   pause    -> sleep
//   callback -> wait (≤ 30 s) for the delivery keyed (message id, attempt, occurrence), compare
//   exchange -> rewrite server-clock tokens in the body with S, send over a raw socket (3 ms
//               apart), compare status / media type / normalized body, learn S (level 2:
//               a recorded instant must always map to the same actual instant)
// and finally report deliveries that no callback line matched.

import { readFileSync } from "node:fs";
import { gunzipSync, inflateSync, brotliDecompressSync } from "node:zlib";
import { join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { ROOT, startWorker } from "./harness.mjs";
import { rawRequest } from "./raw-http.mjs";
import { CALLBACK_HEADERS, deliveryKey, startCallbackServer } from "./callback-server.mjs";
import {
  extractTokens040,
  mediaType,
  normalizeBody,
  normalizeBody040,
  rewriteTokens,
  rewriteUuids,
} from "./normalize.mjs";

export const CALLBACK_PORT = 18999;

export function goldenDir() {
  return process.env.GOLDEN_DIR ? resolve(process.env.GOLDEN_DIR) : resolve(ROOT, "..", "shared", "golden");
}

/** The 0.4.0 transcripts (shared/golden-0.4), or GOLDEN040_DIR. */
export function goldenDir040() {
  return process.env.GOLDEN040_DIR ? resolve(process.env.GOLDEN040_DIR) : resolve(ROOT, "..", "shared", "golden-0.4");
}

/** Whether the folder holds 0.4.0-format transcripts (its manifest says so). */
export function isGolden040(dir) {
  try {
    return /0\.4\.0/.test(loadManifest(dir).format || "");
  } catch {
    return false;
  }
}

/** 0.4 §2.2: the bytes of a generated WCSW request body. */
export function buildFrame(spec) {
  const chunks = spec.chunks || [];
  const parts = [];
  const head = Buffer.alloc(8);
  head.write(spec.magic ?? "WCSW", 0, 4, "latin1");
  head.writeUInt16BE(spec.version ?? 1, 4);
  head.writeUInt16BE(spec.count ?? chunks.length, 6);
  parts.push(head);
  for (const c of chunks) {
    const payload = "base64" in c ? Buffer.from(c.base64, "base64") : Buffer.alloc(c.length, Buffer.from(c.fill, "utf8")[0]);
    const len = Buffer.alloc(4);
    len.writeUInt32BE("length" in c ? c.length : payload.length, 0);
    parts.push(len, payload);
  }
  if (spec.trailingBase64) parts.push(Buffer.from(spec.trailingBase64, "base64"));
  return Buffer.concat(parts);
}

export function loadManifest(dir = goldenDir()) {
  return JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8"));
}

export function loadLines(dir, file) {
  return readFileSync(join(dir, file), "utf8")
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l))
    .sort((a, b) => a.seq - b.seq);
}

/**
 * The namespaces that implement the 0.3 `index` binding here (issue #9): IndexDO `index` is
 * the archive and the facade's entry, the three shard classes hold the index. A recording
 * that binds WORKFLOW_INDEX binds them all.
 */
export const INDEX_SHARD_BINDINGS = ["WORKFLOW_RUN_CATALOG", "WORKFLOW_HOOK_TOKENS", "WORKFLOW_HOOK_IDS"];

/** Worker options for a manifest entry. */
export function workerOptionsFor(entry) {
  // 0.3 manifests: vars are the members of `worker`; 0.4 ones: `worker.vars`.
  const { bindings, ...rest } = entry.worker;
  const vars = rest.vars && typeof rest.vars === "object" ? rest.vars : rest;
  if (!bindings) return { vars, bindings, unsafeTriggerHandlers: true };
  // One deployment serves both client generations: a 0.3 recording (WORKFLOW_INDEX) gets
  // the shards, a 0.4 recording (the shards, no WORKFLOW_INDEX) gets the archive/facade.
  let all = bindings;
  let v = vars;
  if (bindings.includes("WORKFLOW_INDEX")) {
    all = [...bindings, ...INDEX_SHARD_BINDINGS];
    // The 0.3.0 reference kept the client's `correlation:` index keys (its recordings read
    // them back and count their retention markers); this worker does on
    // WORKFLOW_CORRELATION_INDEX=on (default off: no client reads them, docs/compatibility.md).
    v = { WORKFLOW_CORRELATION_INDEX: "on", ...vars };
  } else if (INDEX_SHARD_BINDINGS.every((b) => bindings.includes(b))) all = [...bindings, "WORKFLOW_INDEX"];
  return { vars: v, bindings: all, unsafeTriggerHandlers: true };
}

/** Names accepted in GOLDEN_FILES: the scenario (`health`) or the file (`health.jsonl`). */
export const entryNames = (entry) => [entry.scenario, entry.file, entry.file.replace(/\.jsonl$/, "")];

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function decodeBody(res) {
  const enc = (res.headers["content-encoding"] || "").toLowerCase();
  try {
    if (enc === "gzip") return gunzipSync(res.body);
    if (enc === "deflate") return inflateSync(res.body);
    if (enc === "br") return brotliDecompressSync(res.body);
  } catch {
    // fall through: compare the raw bytes
  }
  return res.body;
}

function describeRequest(req, path) {
  const body =
    "bodySynthetic" in req
      ? `<synthetic ${req.bodySynthetic.length} bytes>`
      : "bodyFrame" in req
        ? `<frame of ${req.bodyFrame.chunks?.length ?? 0} chunks>`
        : "bodyBase64" in req
        ? `<base64 ${req.bodyBase64}>`
        : req.body.length > 300
          ? `${req.body.slice(0, 300)}…`
          : req.body;
  return `${req.method} ${path}${req.transfer ? ` (${req.transfer})` : ""} ${body}`;
}

/**
 * Replays one transcript. Returns a report:
 *   {file, scenario, normative, exchanges: {total, passed}, callbacks: {total, passed},
 *    failures: [{seq, step, kind, ...}], unexpected: [...], aborted, durationMs}
 */
export async function replayFile(entry, options = {}) {
  const {
    dir = goldenDir(),
    requestTimeoutMs = Number(process.env.GOLDEN_TIMEOUT_MS || 15000),
    callbackTimeoutMs = 30000,
    shortCallbackTimeoutMs = 3000,
    pauseFactor = Math.max(1, Number(process.env.GOLDEN_PAUSE_FACTOR || 1)),
    maxConsecutiveErrors = Number(process.env.GOLDEN_MAX_CONSECUTIVE_ERRORS || 5),
    onLine = null,
    // The callback server's port. The transcripts were recorded with 18999 (CALLBACK_PORT);
    // 0 picks a free one, and the recorded address in a request body is rewritten to it (and
    // back in the answer), so that two replays (npm test runs two test files at once) need
    // not wait for each other.
    callbackPort = 0,
    // (entry, {callbackPort}) => {host, port, dispose()}: the server under test; default the
    // built worker.
    startServer = (e) => startWorker(workerOptionsFor(e)),
    // Test hook for negative controls: disable the §5 step 4.2 body rewrite.
    rewrite = true,
    // The 0.4.0 format (golden-0.4/README.md): UUID masking and the U map. Default: from the
    // folder's manifest.
    v040 = isGolden040(dir),
    // Top-level members this worker adds to a JSON answer that the other client generation
    // requires (tests/golden-conflicts.json "additiveMembers"): an answer that equals the
    // recorded one once such a member (absent from the recording) is removed counts as
    // matching, and is reported in `report.additive`.
    additiveMembers = [],
    // Event pages whose recorded `cursor: null` (last page) this worker answers with the id
    // of the page's last event (tests/golden-conflicts.json "resumeCursors"): counted as
    // matching when that is the only difference, and reported in `report.resumeCursors`.
    resumeCursors = false,
  } = options;
  const started = performance.now();
  const lines = loadLines(dir, entry.file);
  const report = {
    file: entry.file,
    scenario: entry.scenario,
    normative: entry.normative,
    exchanges: { total: 0, passed: 0 },
    callbacks: { total: 0, passed: 0 },
    failures: [],
    unexpected: [],
    additive: {},
    resumeCursors: [],
    aborted: null,
    durationMs: 0,
  };

  // §5.2: index the callback lines by (id, attempt, occurrence).
  const answers = new Map();
  const callbackKeys = new Map(); // seq -> key
  const occurrences = new Map();
  for (const line of lines) {
    if (line.request) report.exchanges.total++;
    if (!line.callback) continue;
    report.callbacks.total++;
    const h = line.callback.headers;
    const pair = `${h["x-vqs-message-id"]}\u0000${h["x-vqs-message-attempt"]}`;
    const n = (occurrences.get(pair) || 0) + 1;
    occurrences.set(pair, n);
    const key = deliveryKey(h["x-vqs-message-id"], h["x-vqs-message-attempt"], n);
    callbackKeys.set(line.seq, key);
    answers.set(key, line.callback.response);
  }

  const callbacks = await startCallbackServer({ port: callbackPort, answers });
  const recordedAddress = `127.0.0.1:${CALLBACK_PORT}`;
  const actualAddress = `127.0.0.1:${callbacks.port}`;
  const toActual = (text) => (callbacks.port === CALLBACK_PORT ? text : text.replaceAll(recordedAddress, actualAddress));
  const toRecorded = (text) => (callbacks.port === CALLBACK_PORT ? text : text.replaceAll(actualAddress, recordedAddress));
  let worker;
  try {
    worker = await startServer(entry, { callbackPort: callbacks.port });
  } catch (err) {
    await callbacks.close();
    throw err;
  }

  const S = new Map(); // recorded epoch ms -> actual epoch ms
  let lastResponseEnd = 0;
  let consecutiveErrors = 0;
  // Once a delivery failed to arrive, later waits are short until one arrives again, so a
  // server without a working queue does not cost 30 s per callback line.
  let missingCallbacks = 0;
  const U = new Map(); // 0.4: recorded UUID -> actual UUID
  const inFlight = new Map(); // 0.4: async tag -> {line, promise}
  const norm = v040 ? normalizeBody040 : normalizeBody;

  /** Compares one exchange's outcome with its line, learns S (and U); "abort" stops the file. */
  const judge = (line, { res, error }) => {
    const req = line.request;
    const exp = line.response;
    const binary = "bodyBase64" in exp;
    const expNorm = binary ? `base64:${exp.bodyBase64}` : norm(exp.body);
    if (error) {
      consecutiveErrors++;
      report.failures.push({
        seq: line.seq,
        step: line.step,
        kind: "exchange",
        reasons: ["transport"],
        request: describeRequest(req, req.path),
        expected: { status: exp.status, contentType: exp.contentType, body: expNorm },
        actual: { error: String(error.message || error) },
      });
      if (consecutiveErrors >= maxConsecutiveErrors) {
        report.aborted = `${consecutiveErrors} consecutive transport errors (last: ${error.message}); stopped at seq ${line.seq}`;
        return "abort";
      }
      return "failed";
    }
    consecutiveErrors = 0;
    const actBytes = decodeBody(res);
    const actText = toRecorded(actBytes.toString("utf8"));
    const actCt = res.headers["content-type"] ?? null;
    let actText2 = actText;
    let actNorm = binary ? `base64:${actBytes.toString("base64")}` : norm(actText, { firstLine: "bodyNote" in exp });
    let added = null;
    let resumed = false;
    let candidate = actText;
    if (!binary && actNorm !== expNorm && resumeCursors) {
      // A resume cursor explains the difference when putting the recorded null back leaves
      // the recording (or leaves only additive members).
      const nulled = nullResumeCursors(actText, exp.body);
      if (nulled) {
        candidate = nulled;
        resumed = true;
        if (norm(candidate, { firstLine: "bodyNote" in exp }) === expNorm) {
          actText2 = candidate;
          actNorm = expNorm;
        }
      }
    }
    if (!binary && actNorm !== expNorm && additiveMembers.length) {
      // An additive member explains the difference when removing it leaves the recording.
      const stripped = stripAdditive(candidate, exp.body, additiveMembers);
      if (stripped && norm(stripped.text) === expNorm) {
        added = stripped.members;
        actText2 = stripped.text;
        actNorm = expNorm;
      }
    }
    const reasons = [];
    if (res.status !== exp.status) reasons.push("status");
    if (mediaType(actCt) !== mediaType(exp.contentType)) reasons.push("content-type");
    if (actNorm !== expNorm) reasons.push(actNorm.startsWith("base64:") || !binary ? "body" : "body (expected binary)");

    // §5 step 4.4: learn S (and U), with the level-2 consistency check. Nothing is learned
    // from binary bodies (0.4 §3.4).
    const level2 = [];
    if (!binary) {
      const actSource = "bodyNote" in exp ? actText2.split("\n")[0] : actText2;
      // 0.3: instants only; 0.4: instants and UUIDs, paired position by position.
      const tokens = (text) => (v040 ? extractTokens040(text) : extractTokens040(text).filter((t) => t.kind === "ms"));
      const rec = tokens(exp.body);
      const act = tokens(actSource);
      if (rec.length === act.length) {
        rec.forEach((r, i) => {
          const a = act[i];
          if (a.kind !== r.kind) return;
          const map = r.kind === "ms" ? S : U;
          const show = (x) => (r.kind === "ms" ? new Date(x).toISOString() : x);
          if (map.has(r.v) && map.get(r.v) !== a.v) level2.push(`${show(r.v)} was ${show(map.get(r.v))}, now ${show(a.v)}`);
          else if (!map.has(r.v)) map.set(r.v, a.v);
        });
      }
    }
    if (level2.length) reasons.push("level2");
    if (reasons.length === 0) {
      report.exchanges.passed++;
      for (const m of added || []) (report.additive[m] ||= []).push(line.seq);
      if (resumed && actNorm === expNorm) report.resumeCursors.push(line.seq);
      return "passed";
    }
    report.failures.push({
      seq: line.seq,
      step: line.step,
      kind: "exchange",
      reasons,
      request: describeRequest(req, req.path),
      expected: { status: exp.status, contentType: exp.contentType, body: expNorm },
      actual: { status: res.status, contentType: actCt, body: actNorm },
      level2: level2.length ? level2 : undefined,
    });
    return "failed";
  };

  try {
    for (const line of lines) {
      if (onLine) onLine(line);
      if (line.pause) {
        await sleep(Math.ceil(line.pause.ms * pauseFactor));
        continue;
      }
      if (line.callback) {
        const key = callbackKeys.get(line.seq);
        const waitMs = missingCallbacks > 0 ? Math.min(callbackTimeoutMs, shortCallbackTimeoutMs) : callbackTimeoutMs;
        const d = await callbacks.waitFor(key, waitMs);
        const rec = line.callback;
        if (!d) missingCallbacks++;
        else missingCallbacks = 0;
        if (!d) {
          report.failures.push({
            seq: line.seq,
            step: line.step,
            kind: "callback-missing",
            detail: `no delivery of ${rec.headers["x-vqs-message-id"]} attempt ${rec.headers["x-vqs-message-attempt"]} within ${waitMs} ms`,
          });
          continue;
        }
        d.matched = true;
        const reasons = [];
        if (d.method !== rec.method) reasons.push("method");
        if (d.path !== rec.path) reasons.push("path");
        for (const h of CALLBACK_HEADERS) if ((d.headers[h] ?? null) !== (rec.headers[h] ?? null)) reasons.push(`header ${h}`);
        const expBody = normalizeBody(rec.body);
        const actBody = normalizeBody(d.body);
        if (expBody !== actBody) reasons.push("body");
        if (reasons.length === 0) report.callbacks.passed++;
        else
          report.failures.push({
            seq: line.seq,
            step: line.step,
            kind: "callback",
            reasons,
            expected: { method: rec.method, path: rec.path, headers: rec.headers, body: expBody },
            actual: { method: d.method, path: d.path, headers: d.headers, body: actBody },
          });
        continue;
      }
      if (line.scheduled) {
        // 0.4 §2.4: run the worker's scheduled handler (Miniflare's trigger route) and wait.
        const sch = line.scheduled;
        let res = null;
        let error = null;
        try {
          res = await rawRequest({
            host: worker.host,
            port: worker.port,
            method: sch.trigger.method,
            path: sch.trigger.path,
            headers: [],
            body: null,
            timeoutMs: Math.max(requestTimeoutMs, 60000),
          });
        } catch (err) {
          error = err;
        }
        lastResponseEnd = performance.now();
        if (error || res.status !== 200) {
          report.failures.push({
            seq: line.seq,
            step: line.step,
            kind: "scheduled",
            detail: error ? `trigger failed: ${error.message}` : `trigger answered ${res.status} ${decodeBody(res).toString("utf8").slice(0, 300)}`,
          });
        }
        continue;
      }
      if (line.await) {
        // 0.4 §2.3: the response of an earlier `async` exchange.
        const pending = inFlight.get(line.await);
        inFlight.delete(line.await);
        if (!pending) {
          report.failures.push({ seq: line.seq, step: line.step, kind: "await", detail: `no async exchange tagged ${line.await}` });
          continue;
        }
        const outcome = await pending.promise;
        if (judge(pending.line, outcome) === "abort") break;
        continue;
      }
      if (!line.request) continue;

      // --- exchange ---
      const req = line.request;
      const headers = [];
      if (req.contentType !== null && req.contentType !== undefined) headers.push(["content-type", req.contentType]);
      if (req.authorization !== null && req.authorization !== undefined) headers.push(["authorization", req.authorization]);
      let body = null;
      let synthetic = null;
      if ("bodySynthetic" in req) synthetic = req.bodySynthetic;
      else if ("bodyFrame" in req) body = buildFrame(req.bodyFrame);
      else if ("bodyBase64" in req) body = Buffer.from(req.bodyBase64, "base64");
      else {
        let text = rewrite ? rewriteTokens(req.body ?? "", S) : req.body ?? "";
        if (v040 && rewrite) text = rewriteUuids(text, U);
        text = toActual(text);
        if (text !== "") body = Buffer.from(text, "utf8");
        else if (["POST", "PUT", "PATCH"].includes(req.method)) body = Buffer.alloc(0);
      }
      // Keep ≥ 3 ms between the end of one response and the next request.
      const wait = lastResponseEnd + 4 - performance.now();
      if (wait > 0) await sleep(wait);

      const sent = rawRequest({
        host: worker.host,
        port: worker.port,
        method: req.method,
        path: req.path,
        headers,
        body,
        synthetic,
        chunked: req.transfer === "chunked",
        timeoutMs: synthetic || (body && body.length > 1 << 20) ? Math.max(requestTimeoutMs, 60000) : requestTimeoutMs,
      }).then(
        (res) => ({ res, error: null }),
        (error) => ({ res: null, error }),
      );
      if (line.async) {
        // Sent; its response is compared at the matching `await` line.
        inFlight.set(line.async, { line, promise: sent });
        continue;
      }
      const outcome = await sent;
      lastResponseEnd = performance.now();
      if (judge(line, outcome) === "abort") break;
    }
    for (const [tag, pending] of inFlight) {
      report.failures.push({ seq: pending.line.seq, step: pending.line.step, kind: "await", detail: `async exchange ${tag} never awaited` });
      await pending.promise;
    }
    // §5.5: wait, then report deliveries that no callback line matched.
    await sleep(300);
    for (const d of callbacks.deliveries) {
      if (d.matched) continue;
      report.unexpected.push({
        messageId: d.headers["x-vqs-message-id"],
        attempt: d.headers["x-vqs-message-attempt"],
        path: d.path,
        body: d.body.length > 200 ? `${d.body.slice(0, 200)}…` : d.body,
        recorded: !d.unexpected,
      });
    }
  } finally {
    await worker.dispose().catch(() => {});
    await callbacks.close().catch(() => {});
    report.durationMs = Math.round(performance.now() - started);
  }
  return report;
}

/** True when every exchange and callback matched and nothing unexpected arrived. */
export const reportPassed = (r) =>
  !r.aborted &&
  r.failures.length === 0 &&
  r.unexpected.length === 0 &&
  r.exchanges.passed === r.exchanges.total &&
  r.callbacks.passed === r.callbacks.total;

/** Both answers parsed as JSON, or null when either is not JSON. */
function parseBoth(actualText, recordedText) {
  try {
    return [JSON.parse(actualText), JSON.parse(recordedText)];
  } catch {
    return null;
  }
}

/**
 * The actual JSON text without the listed top-level members that the recorded body lacks,
 * or null when there is nothing to remove (or either body is not a JSON object).
 */
function stripAdditive(actualText, recordedText, members) {
  const [actual, recorded] = parseBoth(actualText, recordedText) ?? [];
  const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
  if (!isObject(actual) || !isObject(recorded)) return null;
  // A member may be a dotted path ("tombstone.status"): removed from the object at that
  // path when both answers have an object there and only the actual one has the member.
  const removed = [];
  for (const m of members) {
    const path = m.split(".");
    const last = path.pop();
    let a = actual;
    let r = recorded;
    for (const k of path) {
      a = isObject(a) ? a[k] : undefined;
      r = isObject(r) ? r[k] : undefined;
    }
    if (isObject(a) && isObject(r) && Object.hasOwn(a, last) && !Object.hasOwn(r, last)) {
      delete a[last];
      removed.push(m);
    }
  }
  if (!removed.length) return null;
  return { text: JSON.stringify(actual), members: removed };
}

/**
 * `actualText` with each event page's resume cursor put back to the recorded null, or null
 * when there is none. An event page is an object with `cursor`, `hasMore` and an array of
 * events (`data` or `events`, each with an `eventId`); its cursor is a resume cursor when
 * the recording has `cursor: null` and `hasMore: false` at the same place, and the actual
 * page has `hasMore: false` and, as its cursor, exactly the `eventId` of its last event.
 */
export function nullResumeCursors(actualText, recordedText) {
  const [actual, recorded] = parseBoth(actualText, recordedText) ?? [];
  if (actual === undefined) return null;
  const isObject = (v) => v !== null && typeof v === "object";
  let count = 0;
  const visit = (a, r) => {
    if (!isObject(a) || !isObject(r)) return;
    if (!Array.isArray(a)) {
      const events = Array.isArray(a.data) ? a.data : Array.isArray(a.events) ? a.events : null;
      const last = events?.at(-1);
      if (
        events &&
        r.cursor === null &&
        r.hasMore === false &&
        a.hasMore === false &&
        typeof a.cursor === "string" &&
        isObject(last) &&
        a.cursor === last.eventId
      ) {
        a.cursor = null;
        count++;
      }
    }
    for (const k of Object.keys(a)) if (Object.hasOwn(r, k)) visit(a[k], r[k]);
  };
  visit(actual, recorded);
  return count ? JSON.stringify(actual) : null;
}

export function summaryLine(r) {
  const parts = [`${r.exchanges.passed}/${r.exchanges.total} exchanges`];
  if (r.callbacks.total) parts.push(`${r.callbacks.passed}/${r.callbacks.total} callbacks`);
  if (r.unexpected.length) parts.push(`${r.unexpected.length} unexpected deliveries`);
  for (const [m, seqs] of Object.entries(r.additive || {})) parts.push(`${seqs.length} with the additive member ${m}`);
  if (r.resumeCursors?.length) parts.push(`${r.resumeCursors.length} with a resume cursor`);
  parts.push(`${(r.durationMs / 1000).toFixed(1)}s`);
  let s = `${r.scenario}: ${parts.join(", ")}`;
  if (r.aborted) s += ` — ABORTED: ${r.aborted}`;
  return s;
}

const clip = (s, n = 600) => (s && s.length > n ? `${s.slice(0, n)}…(${s.length} chars)` : s);

/** Human-readable lines for the first `max` failures. */
export function formatFailures(r, max = 5) {
  const out = [];
  const fails = r.failures.slice(0, max);
  for (const f of fails) {
    out.push(`seq ${f.seq} [${f.kind}${f.reasons ? `: ${f.reasons.join(", ")}` : ""}] ${f.step}`);
    if (f.request) out.push(`    request:  ${clip(f.request, 200)}`);
    if (f.detail) out.push(`    ${f.detail}`);
    if (f.expected) {
      const fmt = (x) =>
        x.error
          ? `ERROR ${x.error}`
          : "status" in x
            ? `${x.status} ${x.contentType ?? "(no content-type)"} ${clip(x.body)}`
            : clip(JSON.stringify(x));
      out.push(`    expected: ${fmt(f.expected)}`);
      out.push(`    actual:   ${fmt(f.actual)}`);
    }
    if (f.level2) out.push(`    level 2:  ${f.level2.slice(0, 3).join("; ")}`);
  }
  if (r.failures.length > max) out.push(`… and ${r.failures.length - max} more failing seqs: ${r.failures.slice(max).map((f) => f.seq).join(",")}`);
  for (const u of r.unexpected.slice(0, max)) {
    out.push(`unexpected delivery: ${u.messageId} attempt ${u.attempt} ${u.path} ${u.body}`);
  }
  return out;
}

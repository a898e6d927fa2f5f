// The golden transcript replayer: shared/golden/README.md §3–§5, implemented exactly.
//
// For one transcript file: start a fresh worker (wiped storage) with the manifest's
// configuration and the callback server on 127.0.0.1:18999, then walk the lines in seq order:
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
import { extractTokens, mediaType, normalizeBody, rewriteTokens } from "./normalize.mjs";

export const CALLBACK_PORT = 18999;

export function goldenDir() {
  return process.env.GOLDEN_DIR ? resolve(process.env.GOLDEN_DIR) : resolve(ROOT, "..", "shared", "golden");
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

/** Worker options for a manifest entry: vars = every member but `bindings`. */
export function workerOptionsFor(entry) {
  const { bindings, ...vars } = entry.worker;
  if (!bindings) return { vars, bindings };
  const withShards = bindings.includes("WORKFLOW_INDEX") ? [...bindings, ...INDEX_SHARD_BINDINGS] : bindings;
  return { vars, bindings: withShards };
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
    // The callback server's port: the transcripts need 18999; 0 picks a free one (self-tests).
    callbackPort = CALLBACK_PORT,
    // (entry, {callbackPort}) => {host, port, dispose()}: the server under test; default the
    // built worker.
    startServer = (e) => startWorker(workerOptionsFor(e)),
    // Test hook for negative controls: disable the §5 step 4.2 body rewrite.
    rewrite = true,
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
      if (!line.request) continue;

      // --- exchange ---
      const req = line.request;
      const headers = [];
      if (req.contentType !== null && req.contentType !== undefined) headers.push(["content-type", req.contentType]);
      if (req.authorization !== null && req.authorization !== undefined) headers.push(["authorization", req.authorization]);
      let body = null;
      let synthetic = null;
      if ("bodySynthetic" in req) synthetic = req.bodySynthetic;
      else if ("bodyBase64" in req) body = Buffer.from(req.bodyBase64, "base64");
      else {
        const text = rewrite ? rewriteTokens(req.body ?? "", S) : req.body ?? "";
        if (text !== "") body = Buffer.from(text, "utf8");
        else if (["POST", "PUT", "PATCH"].includes(req.method)) body = Buffer.alloc(0);
      }
      // Keep ≥ 3 ms between the end of one response and the next request.
      const wait = lastResponseEnd + 4 - performance.now();
      if (wait > 0) await sleep(wait);

      let res = null;
      let error = null;
      try {
        res = await rawRequest({
          host: worker.host,
          port: worker.port,
          method: req.method,
          path: req.path,
          headers,
          body,
          synthetic,
          chunked: req.transfer === "chunked",
          timeoutMs: synthetic ? Math.max(requestTimeoutMs, 60000) : requestTimeoutMs,
        });
      } catch (err) {
        error = err;
      }
      lastResponseEnd = performance.now();
      const exp = line.response;
      const expNorm = normalizeBody(exp.body);
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
          break;
        }
        continue;
      }
      consecutiveErrors = 0;
      const actText = decodeBody(res).toString("utf8");
      const actCt = res.headers["content-type"] ?? null;
      const actNorm = normalizeBody(actText, { firstLine: "bodyNote" in exp });
      const reasons = [];
      if (res.status !== exp.status) reasons.push("status");
      if (mediaType(actCt) !== mediaType(exp.contentType)) reasons.push("content-type");
      if (actNorm !== expNorm) reasons.push("body");

      // §5 step 4.4: learn S (and the level-2 consistency check).
      const recTokens = extractTokens(exp.body);
      const actTokens = extractTokens("bodyNote" in exp ? actText.split("\n")[0] : actText);
      const level2 = [];
      if (recTokens.length === actTokens.length) {
        recTokens.forEach((r, i) => {
          const a = actTokens[i];
          if (S.has(r) && S.get(r) !== a) {
            level2.push(
              `${new Date(r).toISOString()} was ${new Date(S.get(r)).toISOString()}, now ${new Date(a).toISOString()}`,
            );
          } else if (!S.has(r)) {
            S.set(r, a);
          }
        });
      }
      if (level2.length) reasons.push("level2");
      if (reasons.length === 0) report.exchanges.passed++;
      else
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

export function summaryLine(r) {
  const parts = [`${r.exchanges.passed}/${r.exchanges.total} exchanges`];
  if (r.callbacks.total) parts.push(`${r.callbacks.passed}/${r.callbacks.total} callbacks`);
  if (r.unexpected.length) parts.push(`${r.unexpected.length} unexpected deliveries`);
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

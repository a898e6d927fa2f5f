// The golden replayer checked against a fake server that answers the recorded responses with
// every server-clock value shifted (so S learning and request rewriting are exercised), plus
// the README's negative controls. Needs no worker build.

import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { buildFrame, goldenDir, loadManifest, nullResumeCursors, replayFile, reportPassed, summaryLine } from "./lib/golden.mjs";
import { extractTokens040, normalizeBody, normalizeBody040, rewriteUuids } from "./lib/normalize.mjs";
import { startFakeGoldenServer } from "./lib/fake-golden-server.mjs";

const dir = goldenDir();
const present = existsSync(join(dir, "manifest.json"));
const entry = (name) => loadManifest(dir).files.find((e) => e.scenario === name);
// The fake delivers to whatever port the replayer's callback server got (0 = a free one).
const fake = (opts = {}) => (e, { callbackPort }) => startFakeGoldenServer(e, { dir, callbackPort, ...opts });

test("replayer passes router-errors (raw sockets, 32 MiB bodies, chunked) against recorded answers", { skip: !present }, async () => {
  const r = await replayFile(entry("router-errors"), { dir, callbackPort: 0, startServer: fake() });
  assert.ok(reportPassed(r), `${summaryLine(r)}\n${JSON.stringify(r.failures.slice(0, 3), null, 2)}`);
});

test("replayer learns S and rewrites request bodies (runs-pagination)", { skip: !present }, async () => {
  const r = await replayFile(entry("runs-pagination"), { dir, callbackPort: 0, startServer: fake() });
  assert.ok(reportPassed(r), `${summaryLine(r)}\n${JSON.stringify(r.failures.slice(0, 3), null, 2)}`);
});

test("negative control: without the body rewrite, requests carry recorded instants", { skip: !present }, async () => {
  const r = await replayFile(entry("runs-pagination"), { dir, callbackPort: 0, rewrite: false, startServer: fake() });
  assert.ok(!reportPassed(r));
  assert.ok(r.failures.length > 10);
});

test("negative control: a one-character change in a response is reported", { skip: !present }, async () => {
  const mutate = (line, body) => (line.seq === 5 ? body.replace("true", "fals") : body);
  const r = await replayFile(entry("health"), { dir, callbackPort: 0, startServer: fake({ mutate }) });
  assert.deepEqual(
    r.failures.map((f) => f.seq),
    [5],
  );
});

test("level 2: an instant that maps to two different actual instants is reported", { skip: !present }, async () => {
  // Shift one response's instants differently from all others.
  const e = entry("runs-core");
  let shiftedSeq = null;
  const mutate = (line, body) => {
    if (shiftedSeq === null && line.seq > 3 && /"createdAt"/.test(body)) {
      shiftedSeq = line.seq;
      return body.replace(/(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.)(\d{3})Z/g, (_, a, ms) => `${a}${String((Number(ms) + 1) % 1000).padStart(3, "0")}Z`);
    }
    return body;
  };
  const r = await replayFile(e, { dir, callbackPort: 0, startServer: fake({ mutate }) });
  assert.ok(r.failures.some((f) => f.reasons && f.reasons.includes("level2")), summaryLine(r));
});

test("callbacks: deliveries keyed by (id, attempt, occurrence) are answered and compared (queue-deadletters)", { skip: !present, timeout: 120000 }, async () => {
  const r = await replayFile(entry("queue-deadletters"), { dir, callbackPort: 0, startServer: fake() });
  assert.ok(reportPassed(r), `${summaryLine(r)}\n${JSON.stringify(r.failures.slice(0, 3), null, 2)}`);
  assert.equal(r.callbacks.passed, r.callbacks.total);
});

// --- the 0.4.0 format additions (shared/golden-0.4/README.md §2–§3) --------------------

test("0.4: bodyFrame builds the spec's WCSW example byte for byte", () => {
  const frame = buildFrame({ chunks: [{ base64: "AQID" }, { base64: "BA==" }] });
  assert.equal(frame.toString("hex"), "5743535700010002000000030102030000000104");
  const generated = buildFrame({ magic: "WCSX", version: 2, count: 3, chunks: [{ length: 2, fill: "b" }], trailingBase64: "AA==" });
  assert.equal(generated.toString("hex"), "5743535800020003" + "00000002" + "6262" + "00");
});

test("0.4: UUIDs are masked, learned in traversal order with instants, and substituted", () => {
  const rec = "6f1c2a3b-1111-4222-8333-444455556666";
  const act = "0a0b0c0d-aaaa-4bbb-8ccc-dddddddddddd";
  const recorded = JSON.stringify({ admitted: true, reservation: { claimId: `${rec}:${rec}`, hookIdClaimId: rec }, at: 1700000000000 });
  const actual = JSON.stringify({ at: 1764460800123, admitted: true, reservation: { hookIdClaimId: act, claimId: `${act}:${act}` } });
  assert.equal(normalizeBody040(recorded), normalizeBody040(actual));
  assert.match(normalizeBody040(recorded), /"claimId":"«UUID»:«UUID»"/);
  const r = extractTokens040(recorded);
  const a = extractTokens040(actual);
  assert.deepEqual(
    r.map((t) => t.kind),
    ["ms", "uuid", "uuid", "uuid"],
  );
  assert.deepEqual(
    a.map((t) => t.v),
    [1764460800123, act, act, act],
  );
  const U = new Map([[rec, act]]);
  assert.equal(rewriteUuids(`[{"claimId":"-:${rec}"}]`, U), `[{"claimId":"-:${act}"}]`);
  // 0.3 normalization leaves UUIDs alone.
  assert.match(normalizeBody(recorded), new RegExp(rec));
});

test("resume cursors: only an event page's last-event cursor, where the recording has null on its last page", () => {
  const ev = (n) => ({ eventId: `evnt_${String(n).padStart(26, "0")}` });
  const page = (cursor, hasMore, events, key = "data") => ({ ok: true, value: { [key]: events, cursor, hasMore } });
  const recorded = JSON.stringify(page(null, false, [ev(1), ev(2)]));
  // The cursor of the page's last event on a last page: put back to null.
  assert.equal(nullResumeCursors(JSON.stringify(page(ev(2).eventId, false, [ev(1), ev(2)])), recorded), recorded);
  // Nested, as an applyEvent answer carries its events.
  const answer = (cursor) => JSON.stringify({ ok: true, event: ev(2), events: [ev(1), ev(2)], cursor, hasMore: false });
  assert.equal(nullResumeCursors(answer(ev(2).eventId), answer(null)), answer(null));
  // Anything else is left as it is.
  assert.equal(nullResumeCursors(JSON.stringify(page(ev(1).eventId, false, [ev(1), ev(2)])), recorded), null, "not the last event");
  assert.equal(nullResumeCursors(JSON.stringify(page(ev(2).eventId, true, [ev(1), ev(2)])), recorded), null, "more pages");
  assert.equal(
    nullResumeCursors(JSON.stringify(page(ev(2).eventId, false, [ev(1), ev(2)])), JSON.stringify(page(null, true, [ev(1), ev(2)]))),
    null,
    "recorded with more pages",
  );
  const steps = (cursor) => JSON.stringify(page(cursor, false, [{ stepId: "s1" }, { stepId: "s2" }]));
  assert.equal(nullResumeCursors(steps("s2"), steps(null)), null, "not an event page");
  assert.equal(nullResumeCursors(JSON.stringify(page(null, false, [])), JSON.stringify(page(null, false, []))), null, "nothing to put back");
});

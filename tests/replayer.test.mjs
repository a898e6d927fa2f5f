// The golden replayer checked against a fake server that answers the recorded responses with
// every server-clock value shifted (so S learning and request rewriting are exercised), plus
// the README's negative controls. Needs no worker build.

import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { goldenDir, loadManifest, replayFile, reportPassed, summaryLine } from "./lib/golden.mjs";
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

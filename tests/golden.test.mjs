// Golden wire transcripts (shared/golden) replayed against the built worker.
//
// Every manifest file is one test. Files listed in EXPECTED_PASS must pass; the others run as
// `todo` tests: their status is reported but does not fail the suite. Add a scenario to
// EXPECTED_PASS as soon as it passes.
//
// Environment:
//   GOLDEN_DIR=path         transcripts folder (default: ../shared/golden from the repo root)
//   GOLDEN_FILES=a,b        run only these scenarios (names or file names)
//   GOLDEN_SKIP_TODO=1      skip files that are not in EXPECTED_PASS
//   GOLDEN_TIMEOUT_MS=n     per-request timeout (default 15000)
//   GOLDEN_PAUSE_FACTOR=x   lengthen the recorded pauses (default 1; never below 1)
// Full reports (every failing seq) are written to target/golden/<scenario>.json.
// `node scripts/golden.mjs <scenario>` replays outside the test runner with all failures.

import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "./lib/harness.mjs";
import {
  entryNames,
  formatFailures,
  goldenDir,
  loadManifest,
  replayFile,
  reportPassed,
  summaryLine,
} from "./lib/golden.mjs";

// Scenarios that must pass for `npm test` to be green. Extend this list as DOs land.
export const EXPECTED_PASS = [
  "health",
  "router-errors",
  "router-nosecret",
  "router-nobinding",
  "streams",
  "index-do",
  "runs-core", "runs-steps", "runs-hooks", "runs-waits-attrs", "runs-pagination",
  "queue", "queue-deadletters",
  "retention",
];

// Where we deliberately answer differently from the reference (wire.md §5 allows both
// fixes; README "Compatibility notes"): seq -> the answer we give instead. Such a file
// passes when exactly these seqs differ, each with exactly this answer.
export const DELIBERATE = {
  "router-quirks": Object.fromEntries([
    ...["constructor", "__proto__", "toString", "hasOwnProperty", "valueOf"].map((b, i) => [
      i + 1,
      { status: 404, error: { name: "NotFound", message: `unknown binding: ${b}` } },
    ]),
    ...[6, 7, 8].map((seq) => [seq, { status: 400, error: { name: "BadRequest", message: "malformed rpc name" } }]),
  ]),
};

/** Do the failures of `report` consist of exactly the deliberate differences? */
function onlyDeliberate(report, deliberate) {
  if (report.aborted || (report.unexpected && report.unexpected.length)) return false;
  const failing = new Map(report.failures.map((f) => [f.seq, f]));
  if (failing.size !== Object.keys(deliberate).length) return false;
  return Object.entries(deliberate).every(([seq, want]) => {
    const f = failing.get(Number(seq));
    if (!f || !f.actual || f.actual.status !== want.status) return false;
    try {
      const body = JSON.parse(f.actual.body);
      return body.error?.name === want.error.name && body.error?.message === want.error.message;
    } catch {
      return false;
    }
  });
}

const dir = goldenDir();
if (!existsSync(join(dir, "manifest.json"))) {
  test("golden transcripts are present", () => {
    assert.fail(`no manifest.json in ${dir}; set GOLDEN_DIR to the shared/golden folder`);
  });
} else {
  const manifest = loadManifest(dir);
  const wanted = (process.env.GOLDEN_FILES || "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  const unknown = wanted.filter((w) => !manifest.files.some((e) => entryNames(e).includes(w)));
  if (unknown.length) {
    test("GOLDEN_FILES names exist", () => assert.fail(`unknown golden files: ${unknown.join(", ")}`));
  }
  const entries = manifest.files.filter((e) => wanted.length === 0 || entryNames(e).some((n) => wanted.includes(n)));
  const reportDir = join(ROOT, "target", "golden");

  for (const entry of entries) {
    const deliberate = DELIBERATE[entry.scenario];
    const expected = EXPECTED_PASS.includes(entry.scenario) || Boolean(deliberate);
    if (!expected && process.env.GOLDEN_SKIP_TODO === "1" && wanted.length === 0) continue;
    const label = `golden ${entry.scenario}${entry.normative ? "" : " (informative)"}`;
    const todo = expected ? false : "not in EXPECTED_PASS yet";
    test(label, { todo, timeout: 10 * 60 * 1000 }, async (t) => {
      const report = await replayFile(entry, { dir });
      try {
        mkdirSync(reportDir, { recursive: true });
        writeFileSync(join(reportDir, `${entry.scenario}.json`), JSON.stringify(report, null, 2));
      } catch {
        // reports are a convenience only
      }
      t.diagnostic(summaryLine(report));
      const passed = deliberate ? onlyDeliberate(report, deliberate) : reportPassed(report);
      if (deliberate && passed) t.diagnostic(`only the ${Object.keys(deliberate).length} deliberate differences (see DELIBERATE)`);
      if (!passed) {
        const failing = report.failures.map((f) => f.seq);
        t.diagnostic(`failing seqs: ${failing.join(",") || "(none)"}`);
        for (const line of formatFailures(report, 5)) t.diagnostic(line);
      }
      assert.ok(passed, summaryLine(report));
    });
  }
}

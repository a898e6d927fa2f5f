// One node:test per golden transcript file of a folder (tests/golden.test.mjs for the 0.3.0
// set, tests/golden-040.test.mjs for the 0.4.0 set).
//
// A file listed in `expectedPass` must pass; other files run as `todo` tests (reported, not
// failing). A file with known differences — deliberate fixes (`deliberate`) or rows that
// cannot hold together with the other client generation's set (tests/golden-conflicts.json)
// — passes when exactly those seqs differ, each with exactly the listed answer.
//
// Environment:
//   GOLDEN_FILES=a,b        run only these scenarios (names or file names)
//   GOLDEN_SKIP_TODO=1      skip files that are not expected to pass
//   GOLDEN_TIMEOUT_MS=n     per-request timeout (default 15000)
//   GOLDEN_PAUSE_FACTOR=x   lengthen the recorded pauses (default 1; never below 1)
// Full reports (every failing seq) are written to target/golden/<scenario>.json.

import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "./harness.mjs";
import { entryNames, formatFailures, loadManifest, replayFile, reportPassed, summaryLine } from "./golden.mjs";
import { canonical } from "./normalize.mjs";

// Where we deliberately answer differently from the reference (wire.md §5 allows both
// fixes; README "Compatibility notes"): seq -> the answer we give instead. Such a file
// passes when exactly these seqs differ, each with exactly this answer. (0.3.0 set.)
export const DELIBERATE = {
  "router-quirks": Object.fromEntries([
    ...["constructor", "__proto__", "toString", "hasOwnProperty", "valueOf"].map((b, i) => [
      i + 1,
      { status: 404, error: { name: "NotFound", message: `unknown binding: ${b}` } },
    ]),
    ...[6, 7, 8].map((seq) => [seq, { status: 400, error: { name: "BadRequest", message: "malformed rpc name" } }]),
  ]),
};

/** tests/golden-conflicts.json: set -> scenario -> seq -> {status, error | body, reason}. */
export function loadConflicts() {
  return JSON.parse(readFileSync(join(ROOT, "tests", "golden-conflicts.json"), "utf8"));
}

/** The additive member names listed for a set. */
export function additiveFor(conflicts, set) {
  return ((conflicts.additiveMembers || {})[set] || []).map((a) => a.member);
}

/** Whether the set lists "resumeCursors" (event pages' last-page cursors, see the file). */
export function resumeCursorsFor(conflicts, set) {
  return Boolean((conflicts.resumeCursors || {})[set]);
}

/** Does the actual answer of a failure equal the listed one? */
function answerMatches(actual, want) {
  if (!actual || actual.status !== want.status) return false;
  if (want.error) {
    try {
      const body = JSON.parse(actual.body);
      return body.error?.name === want.error.name && body.error?.message === want.error.message;
    } catch {
      return false;
    }
  }
  if ("body" in want) return actual.body === canonical(want.body);
  return true;
}

/** Do the failures of `report` consist of exactly the listed differences? */
export function onlyListed(report, listed) {
  if (report.aborted || (report.unexpected && report.unexpected.length)) return false;
  const failing = new Map(report.failures.map((f) => [f.seq, f]));
  if (failing.size !== Object.keys(listed).length) return false;
  return Object.entries(listed).every(([seq, want]) => {
    const f = failing.get(Number(seq));
    return Boolean(f) && f.kind === "exchange" && answerMatches(f.actual, want);
  });
}

export function defineGoldenSuite({ dir, set, expectedPass, deliberate = {}, missingHint }) {
  if (!existsSync(join(dir, "manifest.json"))) {
    test(`${set} transcripts are present`, () => assert.fail(`no manifest.json in ${dir}; ${missingHint}`));
    return;
  }
  const manifest = loadManifest(dir);
  const all = loadConflicts();
  const conflicts = all[set] || {};
  const additiveMembers = additiveFor(all, set);
  const resumeCursors = resumeCursorsFor(all, set);
  const wanted = (process.env.GOLDEN_FILES || "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  // (GOLDEN_FILES may name the other set's files: those select nothing here.)
  const entries = manifest.files.filter((e) => wanted.length === 0 || entryNames(e).some((n) => wanted.includes(n)));
  const reportDir = join(ROOT, "target", "golden");

  for (const entry of entries) {
    const listed = { ...(deliberate[entry.scenario] || {}), ...(conflicts[entry.scenario] || {}) };
    const hasListed = Object.keys(listed).length > 0;
    const expected = expectedPass.includes(entry.scenario) || hasListed;
    if (!expected && process.env.GOLDEN_SKIP_TODO === "1" && wanted.length === 0) continue;
    const label = `${set} ${entry.scenario}${entry.normative ? "" : " (informative)"}`;
    const todo = expected ? false : "not expected to pass yet";
    test(label, { todo, timeout: 10 * 60 * 1000 }, async (t) => {
      const report = await replayFile(entry, { dir, additiveMembers, resumeCursors });
      try {
        mkdirSync(reportDir, { recursive: true });
        writeFileSync(join(reportDir, `${entry.scenario}.json`), JSON.stringify(report, null, 2));
      } catch {
        // reports are a convenience only
      }
      t.diagnostic(summaryLine(report));
      const passed = hasListed ? onlyListed(report, listed) : reportPassed(report);
      if (hasListed && passed) t.diagnostic(`only the ${Object.keys(listed).length} listed differences (deliberate fixes / golden-conflicts.json)`);
      if (!passed) {
        const failing = report.failures.map((f) => f.seq);
        t.diagnostic(`failing seqs: ${failing.join(",") || "(none)"}`);
        for (const line of formatFailures(report, 5)) t.diagnostic(line);
      }
      assert.ok(passed, summaryLine(report));
    });
  }
}

#!/usr/bin/env node
// Replay golden transcripts outside the test runner and print every failure.
//
//   node scripts/golden.mjs                 all manifest files
//   node scripts/golden.mjs health streams  selected scenarios
//   node scripts/golden.mjs --max 20 runs-core
//   node scripts/golden.mjs --040 router-040   the 0.4.0 set (shared/golden-0.4)
// Needs a built worker (npm run build). Exit code 1 if any selected file fails.

import {
  entryNames,
  formatFailures,
  goldenDir,
  goldenDir040,
  loadManifest,
  replayFile,
  reportPassed,
  summaryLine,
} from "../tests/lib/golden.mjs";
import { additiveFor, DELIBERATE, loadConflicts, onlyListed, resumeCursorsFor } from "../tests/lib/golden-suite.mjs";

const args = process.argv.slice(2);
let max = Infinity;
let v040 = false;
const names = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--max") max = Number(args[++i]);
  else if (args[i] === "--040") v040 = true;
  else names.push(args[i]);
}
const dir = v040 ? goldenDir040() : goldenDir();
const set = v040 ? "golden-0.4" : "golden";
const conflicts = loadConflicts()[set] || {};
const additiveMembers = additiveFor(loadConflicts(), set);
const resumeCursors = resumeCursorsFor(loadConflicts(), set);
const manifest = loadManifest(dir);
const entries = manifest.files.filter((e) => names.length === 0 || entryNames(e).some((n) => names.includes(n)));
if (entries.length === 0) {
  console.error(`no golden file matches ${names.join(", ")}`);
  process.exit(2);
}
let failed = 0;
for (const entry of entries) {
  const report = await replayFile(entry, { dir, additiveMembers, resumeCursors });
  const both = { ...(v040 ? {} : DELIBERATE[entry.scenario] || {}), ...(conflicts[entry.scenario] || {}) };
  const listed = Object.keys(both).length ? both : null;
  const ok = listed ? onlyListed(report, listed) : reportPassed(report);
  if (!ok) failed++;
  const note = listed ? ` (${Object.keys(listed).length} listed rows: deliberate fixes / tests/golden-conflicts.json)` : "";
  console.log(`${ok ? "PASS" : "FAIL"} ${summaryLine(report)}${note}`);
  if (!ok) for (const line of formatFailures(report, max)) console.log(`  ${line}`);
}
console.log(`golden: ${entries.length - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);

#!/usr/bin/env node
// Replay golden transcripts outside the test runner and print every failure.
//
//   node scripts/golden.mjs                 all manifest files
//   node scripts/golden.mjs health streams  selected scenarios
//   node scripts/golden.mjs --max 20 runs-core
// Needs a built worker (npm run build). Exit code 1 if any selected file fails.

import { entryNames, formatFailures, goldenDir, loadManifest, replayFile, reportPassed, summaryLine } from "../tests/lib/golden.mjs";

const args = process.argv.slice(2);
let max = Infinity;
const names = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--max") max = Number(args[++i]);
  else names.push(args[i]);
}
const dir = goldenDir();
const manifest = loadManifest(dir);
const entries = manifest.files.filter((e) => names.length === 0 || entryNames(e).some((n) => names.includes(n)));
if (entries.length === 0) {
  console.error(`no golden file matches ${names.join(", ")}`);
  process.exit(2);
}
let failed = 0;
for (const entry of entries) {
  const report = await replayFile(entry, { dir });
  const ok = reportPassed(report);
  if (!ok) failed++;
  console.log(`${ok ? "PASS" : "FAIL"} ${summaryLine(report)}`);
  if (!ok) for (const line of formatFailures(report, max)) console.log(`  ${line}`);
}
console.log(`golden: ${entries.length - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);

#!/usr/bin/env node
// `workflow inspect … --json` (the DevKit CLI) through the real world-celld clients against
// the built worker: tests/conformance/inspect.mjs, one fresh worker and app per client and
// profile. Prints one line per client and profile:
//
//   inspect 0.4.0 (runtime 5.0.0-beta.42): N passed, N failed
//
//   node tests/conformance/inspect-run.mjs [--profile beta42|beta55|all] [--client 0.3|0.4]
//        [--server ours|reference] [--only REGEX] [--jobs N] [--verbose]
//
//   --only REGEX         run only the checks whose name matches (npm test runs
//                        `--only "^inspect runs"` on the second runtime profile)
//
//   --server reference   the TypeScript reference worker of each client instead of ours
//                        (for comparison: it answers `inspect runs` with an empty page,
//                        see docs/compatibility.md)
//
// Exits non-zero when any check failed (each failure is printed with its command and output).

import { APP_NAME, INSPECT_WORKFLOWS, inspectSuite } from "./inspect.mjs";
import { buildApp, CLIENTS, ensureProfile, PROFILES } from "./lib/profile.mjs";

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] && !args[i + 1].startsWith("--") ? args[i + 1] : dflt;
};
const profileArg = opt("--profile", "beta42");
const profiles = profileArg === "all" ? Object.keys(PROFILES) : [profileArg];
const clients = opt("--client") ? [opt("--client")] : Object.keys(CLIENTS);
const verbose = args.includes("--verbose");
const serverKind = opt("--server", "ours");
const only = opt("--only") ? new RegExp(opt("--only")) : undefined;
for (const c of clients) if (!CLIENTS[c]) throw new Error(`unknown client ${c} (${Object.keys(CLIENTS).join(", ")})`);

// A profile's client runs go `--jobs` at a time (default 1), each its own worker and app. The
// CLI calls are CPU-bound (each ~3 s of one core loading the CLI, two at a time within a
// run): the two clients side by side took 141 s against 126 s one after the other (2 cores).
const jobs = Math.max(1, Number(opt("--jobs", "1")) || 1);
const lines = [];
let anyFailed = false;
for (const profile of profiles) {
  ensureProfile(profile);
  const app = buildApp(profile, APP_NAME, { template: null, workflowsDir: INSPECT_WORKFLOWS });
  const tasks = clients.map((client) => ({ client }));
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) {
      const task = tasks[next++];
      task.label = `inspect ${CLIENTS[task.client]} (runtime ${PROFILES[profile].runtime})` + (serverKind === "ours" ? "" : ` against ${serverKind}`);
      if (verbose) console.log(`=== ${task.label}`);
      task.r = await inspectSuite({ profile, client: task.client, app, server: serverKind, verbose, only });
    }
  };
  await Promise.all(Array.from({ length: Math.min(jobs, tasks.length) }, worker));
  for (const { label, r } of tasks) {
    for (const f of r.results.filter((x) => !x.ok)) console.log(`FAIL [${label}] ${f.name}\n  ${f.error.replace(/\n/g, "\n  ")}`);
    if (verbose && r.results.log) {
      const cli = r.results.log;
      console.log(`  ${label}: ${cli.length} CLI calls, ${Math.round(cli.reduce((s, x) => s + x.ms, 0) / cli.length)} ms each on average`);
    }
    lines.push(`${label}: ${r.passed} passed, ${r.failed} failed (${(r.ms / 1000).toFixed(1)} s)`);
    if (r.failed) anyFailed = true;
  }
}
for (const line of lines) console.log(line);
process.exit(anyFailed ? 1 : 0);

#!/usr/bin/env node
// The DevKit web UI (`workflow web`) in headless Chromium through the real world-celld
// clients against the built worker: tests/conformance/web-ui.mjs, one fresh worker, app and
// web UI per client and profile. Prints one line per client and profile:
//
//   web 0.4.0 (runtime 5.0.0-beta.42): N passed, N failed
//
//   node tests/conformance/web-ui-run.mjs [--profile beta42|beta55|all] [--client 0.3|0.4]
//        [--server ours|reference] [--jobs N] [--verbose] [--docs-image]
//
//   --docs-image   copy the first client's runs-list screenshot to docs/images/web-runs.png
//
// Without a Chromium (/usr/bin/chromium, or CHROMIUM_PATH) it prints `web: SKIP (no
// chromium)` and exits 0 (Debian: `apt-get install -y chromium`). Screenshots go to
// tests/conformance/.artifacts/web/. Exits non-zero when any check failed (each failure is
// printed with the UI's RPC answers during it).

import { buildWebApp, chromiumPath, webSuite } from "./web-ui.mjs";
import { CLIENTS, ensureProfile, PROFILES } from "./lib/profile.mjs";

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] && !args[i + 1].startsWith("--") ? args[i + 1] : dflt;
};
const profileArg = opt("--profile", "beta42");
const profiles = profileArg === "all" ? Object.keys(PROFILES) : [profileArg];
// 0.4 first: the newer client generation.
const clients = opt("--client") ? [opt("--client")] : Object.keys(CLIENTS).reverse();
const verbose = args.includes("--verbose");
const serverKind = opt("--server", "ours");
for (const c of clients) if (!CLIENTS[c]) throw new Error(`unknown client ${c} (${Object.keys(CLIENTS).join(", ")})`);
for (const p of profiles) if (!PROFILES[p]) throw new Error(`unknown profile ${p} (${Object.keys(PROFILES).join(", ")})`);

if (!chromiumPath()) {
  console.log("web: SKIP (no chromium)");
  process.exit(0);
}

// The client runs of a profile go `--jobs` at a time (default 2): a run mostly waits (on the
// UI, the browser, the workflows), 46 s of CPU in 112 s for two one after the other.
const jobs = Math.max(1, Number(opt("--jobs", "2")) || 1);
const lines = [];
let anyFailed = false;
for (const profile of profiles) {
  ensureProfile(profile);
  const app = buildWebApp(profile);
  const tasks = clients.map((client) => ({ client }));
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) {
      const task = tasks[next++];
      const { client } = task;
      const label = `web ${CLIENTS[client]} (runtime ${PROFILES[profile].runtime})` + (serverKind === "ours" ? "" : ` against ${serverKind}`);
      if (verbose) console.log(`=== ${label}`);
      const docsImage = args.includes("--docs-image") && client === clients[0] && profile === profiles[0];
      task.label = label;
      task.r = await webSuite({ profile, client, app, server: serverKind, verbose, docsImage });
    }
  };
  await Promise.all(Array.from({ length: Math.min(jobs, tasks.length) }, worker));
  for (const { label, r } of tasks) {
    for (const f of r.results.filter((x) => !x.ok)) console.log(`FAIL [${label}] ${f.name}\n  ${f.error.replace(/\n/g, "\n  ")}`);
    for (const n of r.notes) console.log(`note [${label}] ${n}`);
    if (verbose) console.log(`  ${r.screenshots.length} screenshots in tests/conformance/.artifacts/web/`);
    lines.push(`${label}: ${r.passed} passed, ${r.failed} failed (${(r.ms / 1000).toFixed(1)} s)`);
    if (r.failed) anyFailed = true;
  }
}
for (const line of lines) console.log(line);
process.exit(anyFailed ? 1 : 0);

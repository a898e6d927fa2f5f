#!/usr/bin/env node
// npm run conformance: the Workflow DevKit's conformance suite (@workflow/world-testing,
// its tests run unchanged) through the real world-celld 0.3.0 and 0.4.0 clients, against the
// built worker in Miniflare, every message delivered by our QueueDO over HTTP
// (CELLD_QUEUE_MODE=cells). Prints one line per client and runtime:
//
//   conformance 0.3.0: N passed, M failed, K skipped
//
//   node tests/conformance/run.mjs [--profile beta42|beta55|all] [--client 0.3|0.4]
//        [--server ours|reference] [--install] [--no-skips] [--jobs N]
//
//   --profile    the Workflow runtime: beta42 (5.0.0-beta.42, default) or beta55
//                (5.0.0-beta.55, spec version 7); `all` runs both
//   --server     reference: the TypeScript reference worker of each client instead of ours
//   --install    only install the profiles and build the apps
//   --no-skips   run the tests of SKIPS too (to check that a skip is still needed)
//   --jobs N     suites run at once (default 2)
//
// Exits non-zero when any test failed. Tests skipped on purpose are listed in SKIPS below,
// each with its reason; nothing else is skipped.

import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildApp, CLIENTS, ensureProfile, PROFILES, runNode22, WORKFLOWS } from "./lib/profile.mjs";
import { profileDir, startServer } from "./lib/workers.mjs";

/**
 * The only tests skipped, by profile and exact name, with the reason. A skip is for a cause
 * outside this worker, verified on the reference workers too.
 */
export const SKIPS = {
  beta55: {
    hooks:
      "runtime 5.0.0-beta.55 made a hook's `metadata` a lazy getter (a Promise); the suite's " +
      "server (5.0.0-beta.35) passes it to resumeHook unawaited, which fails with 'Failed to " +
      "serialize step return value at path \".metadata\"' before any World is called; a " +
      "test/runtime mismatch, not a World one",
  },
};

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] && !args[i + 1].startsWith("--") ? args[i + 1] : dflt;
};
const flag = (name) => args.includes(name);

const profileArg = opt("--profile", "beta42");
const profiles = profileArg === "all" ? Object.keys(PROFILES) : [profileArg];
const clients = opt("--client") ? [opt("--client")] : Object.keys(CLIENTS);
const serverKind = opt("--server", "ours");

// The suite's package, copied with its own dependencies, its workflows rebuilt with the
// profile's runtime (see workflows/README.md for why they cannot be used as published).
function suiteApp(profile) {
  const installed = join(profileDir(profile), "node_modules", "@workflow", "world-testing");
  return buildApp(profile, ".suite", { template: installed, workflowsDir: WORKFLOWS });
}

function escapeRegex(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

async function runSuite(profile, client, app) {
  // The world module the suite's server loads (WORKFLOW_TARGET_WORLD, relative to its cwd).
  const worldFile = `world-celld-${client}.mjs`;
  writeFileSync(join(app, worldFile), `export { createWorld } from "world-celld-${client}";\n`);
  writeFileSync(
    join(app, "conformance.test.mjs"),
    'import { createTestSuite } from "./dist/src/index.mjs";\ncreateTestSuite(process.env.CONFORMANCE_WORLD);\n',
  );
  const server = await startServer({ server: serverKind, client });
  const dir = mkdtempSync(join(tmpdir(), "conformance-"));
  const report = join(dir, "report.json");
  const skips = flag("--no-skips") ? {} : SKIPS[profile] || {};
  const vitestArgs = [
    join(profileDir(profile), "node_modules", "vitest", "vitest.mjs"),
    "run",
    "conformance.test.mjs",
    "--reporter=default",
    "--reporter=json",
    `--outputFile.json=${report}`,
  ];
  if (Object.keys(skips).length) {
    vitestArgs.push("-t", `^(?!(${Object.keys(skips).map(escapeRegex).join("|")})$)`);
  }
  let result;
  try {
    const r = await runNode22(profile, vitestArgs, {
      cwd: app,
      env: { ...server.env, CONFORMANCE_WORLD: `./${worldFile}`, FORCE_COLOR: "0", NO_COLOR: "1" },
      capture: true,
    });
    let json = null;
    try {
      json = JSON.parse(readFileSync(report, "utf8"));
    } catch {
      // vitest crashed before reporting
    }
    const passed = json?.numPassedTests ?? 0;
    const failed = (json?.numFailedTests ?? 0) + (json ? 0 : 1);
    const skipped = (json?.numPendingTests ?? 0) + (json?.numTodoTests ?? 0);
    result = { passed, failed, skipped, code: r.code, out: r.out };
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await server.dispose();
  }
  return result;
}

// Each (runtime, client) pair is its own server and vitest; --jobs of them run at once
// (default 2: the suite mostly waits on sleeps, retries and deliveries). Output is printed
// whole when a pair finishes.
const tasks = [];
for (const profile of profiles) {
  ensureProfile(profile);
  const app = suiteApp(profile);
  if (flag("--install")) continue;
  for (const client of clients) {
    const label = `conformance ${CLIENTS[client]}` + (profiles.length > 1 || profile !== "beta42" ? ` (runtime ${PROFILES[profile].runtime})` : "");
    tasks.push({ profile, client, app, label });
  }
}
const jobs = Math.max(1, Number(opt("--jobs", "2")) || 1);
let next = 0;
async function worker() {
  while (next < tasks.length) {
    const task = tasks[next++];
    task.result = await runSuite(task.profile, task.client, task.app);
    console.log(`\n=== ${task.label} against ${serverKind} ===`);
    process.stdout.write(task.result.out);
  }
}
await Promise.all(Array.from({ length: Math.min(jobs, tasks.length) }, worker));
const lines = [];
let anyFailed = false;
for (const task of tasks) {
  const r = task.result;
  lines.push(`${task.label}: ${r.passed} passed, ${r.failed} failed, ${r.skipped} skipped`);
  if (r.failed || r.code !== 0) anyFailed = true;
}
if (!flag("--install")) {
  console.log("");
  for (const [profile, skips] of Object.entries(SKIPS)) {
    if (!profiles.includes(profile) || flag("--no-skips")) continue;
    for (const [name, why] of Object.entries(skips)) console.log(`skipped on ${PROFILES[profile].runtime}: "${name}": ${why}`);
  }
  for (const line of lines) console.log(line);
}
process.exit(anyFailed ? 1 : 0);

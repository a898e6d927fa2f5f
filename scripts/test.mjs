#!/usr/bin/env node
// npm test: native unit tests (cargo test), the worker build, the JS tests
// (node --test tests/*.test.mjs: golden replays, harness and deploy checks), then the
// Workflow DevKit's conformance suite through both real clients on both runtime profiles
// (tests/conformance/run.mjs --profile all), then the DevKit CLI's inspection commands through
// both clients (tests/conformance/inspect-run.mjs).
//
//   npm test                         everything
//   npm test -- tests/golden.test.mjs   only these JS test files (still cargo test + build;
//                                       no conformance phase)
//   npm test -- --skip-cargo --skip-build --skip-conformance
//   npm test -- --dev                build with --dev (debug profile, no wasm-opt)
// Prints a summary with one line per phase and a closing "N passed, N failed" line.

import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "./lib/tools.mjs";

const args = process.argv.slice(2);
const flag = (f) => args.includes(f);
const files = args.filter((a) => !a.startsWith("--"));
const buildArgs = [];
if (flag("--dev")) buildArgs.push("--dev");
if (flag("--no-opt")) buildArgs.push("--no-opt");

const phases = [];
const fmt = (ms) => `${(ms / 1000).toFixed(1)}s`;

function run(cmd, cmdArgs, { capture = false, env = process.env } = {}) {
  return new Promise((resolve) => {
    const child = spawn(cmd, cmdArgs, { cwd: ROOT, env, stdio: ["ignore", capture ? "pipe" : "inherit", "inherit"] });
    let out = "";
    if (capture) {
      child.stdout.on("data", (d) => {
        out += d;
        process.stdout.write(d);
      });
    }
    child.on("error", (err) => resolve({ code: 127, out, err }));
    child.on("exit", (code, signal) => resolve({ code: code ?? (signal ? 1 : 0), out }));
  });
}

// The failed tests of a TAP report, each with its location and the first line of its error, so
// that the summary (the tail a CI log keeps) names what failed.
function tapFailures(text) {
  const out = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const m = lines[i].match(/^(\s*)not ok \d+ - (.*)$/);
    if (!m) continue;
    const indent = m[1];
    let where = "";
    let error = "";
    for (let j = i + 1; j < lines.length && !lines[j].startsWith(`${indent}  ...`); j++) {
      const l = lines[j].trim();
      if (!where && l.startsWith("location:")) where = l.slice(9).trim().replace(/^'|'$/g, "");
      if (!error && l.startsWith("error:")) {
        error = l.slice(6).trim();
        if (/^[|>]-?$/.test(error)) error = (lines[j + 1] || "").trim();
      }
    }
    out.push(`${indent}not ok: ${m[2]}${where ? ` (${where})` : ""}${error ? ` — ${error.slice(0, 300)}` : ""}`);
  }
  return out;
}

async function phase(name, fn) {
  const t0 = Date.now();
  console.log(`\n=== ${name} ===`);
  const r = await fn();
  phases.push({ name, ...r, ms: Date.now() - t0 });
  return r;
}

let passed = 0;
let failed = 0;
let skipped = 0;

// 1. cargo test (native)
if (!flag("--skip-cargo")) {
  await phase("cargo test", async () => {
    const r = await run("cargo", ["test", "--color", "never"], { capture: true });
    let p = 0;
    let f = 0;
    let ig = 0;
    for (const m of r.out.matchAll(/test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored/g)) {
      p += Number(m[1]);
      f += Number(m[2]);
      ig += Number(m[3]);
    }
    passed += p;
    failed += f;
    skipped += ig;
    if (r.code !== 0 && f === 0) failed += 1; // compile error or crash
    return { ok: r.code === 0, detail: `${p} passed, ${f} failed, ${ig} ignored` };
  });
}

// 2. build
let built = true;
if (!flag("--skip-build")) {
  const r = await phase("build", async () => {
    const b = await run(process.execPath, [join(ROOT, "scripts", "build.mjs"), ...buildArgs]);
    return { ok: b.code === 0, detail: b.code === 0 ? "build/index.js ready" : `exit code ${b.code}` };
  });
  if (!r.ok) {
    built = false;
    failed += 1;
  }
}

// 3. node --test
if (built) {
  await phase("node --test", async () => {
    const testFiles = files.length
      ? files
      : readdirSync(join(ROOT, "tests"))
          .filter((f) => f.endsWith(".test.mjs"))
          .sort()
          .map((f) => join("tests", f));
    const dir = mkdtempSync(join(tmpdir(), "world-celld-test-"));
    const tap = join(dir, "results.tap");
    const r = await run(process.execPath, [
      "--test",
      // Three files at once: the tests mostly wait (on alarms, deliveries, timers), each file
      // on its own worker and ports; 451 s one at a time, 267 s two at a time, 180 s three
      // at a time (2026-12-07, 2 cores).
      "--test-concurrency=3",
      "--test-reporter=spec",
      "--test-reporter-destination=stdout",
      "--test-reporter=tap",
      `--test-reporter-destination=${tap}`,
      ...testFiles,
    ]);
    let text = "";
    try {
      text = readFileSync(tap, "utf8");
    } catch {
      // no report: the runner crashed
    }
    rmSync(dir, { recursive: true, force: true });
    const count = (name) => {
      const m = text.match(new RegExp(`^# ${name} (\\d+)$`, "m"));
      return m ? Number(m[1]) : 0;
    };
    const p = count("pass");
    const f = count("fail") + count("cancelled");
    const todo = count("todo");
    const sk = count("skipped");
    // pass/fail exclude todo and skipped tests; todo tests are reported as skipped.
    const todoPassed = (text.match(/^ok \d+ - .*# TODO/gm) || []).length;
    passed += p;
    failed += f;
    skipped += todo + sk;
    if (r.code !== 0 && f === 0) failed += 1;
    return {
      ok: r.code === 0,
      detail: `${p} passed, ${f} failed, ${todo} todo (${todoPassed} of them passing), ${sk} skipped`,
      failures: tapFailures(text),
    };
  });
}

// 4. the conformance suite (real clients, real runtime; prints one line per client and runtime)
if (built && !files.length && !flag("--skip-conformance")) {
  await phase("conformance", async () => {
    // The four (runtime, client) suites at once: they mostly wait (123 s two at a time, 91 s
    // four at a time, 2026-12-07).
    const r = await run(process.execPath, [join(ROOT, "tests", "conformance", "run.mjs"), "--profile", "all", "--jobs", "4"], { capture: true });
    let p = 0;
    let f = 0;
    let sk = 0;
    const lines = [];
    for (const m of r.out.matchAll(/^(conformance [^:\n]+): (\d+) passed, (\d+) failed, (\d+) skipped$/gm)) {
      lines.push(m[0]);
      p += Number(m[2]);
      f += Number(m[3]);
      sk += Number(m[4]);
    }
    passed += p;
    failed += f;
    skipped += sk;
    if (r.code !== 0 && f === 0) failed += 1;
    if (!lines.length && r.code === 0) failed += 1; // ran no suite
    return { ok: r.code === 0 && lines.length > 0, detail: `${p} passed, ${f} failed, ${sk} skipped (${lines.length} suite runs)` };
  });
}

// 5. the DevKit CLI's `workflow inspect … --json` through both real clients (issue #46):
// every check on runtime beta.42, the run listing on beta.55.
if (built && !files.length && !flag("--skip-conformance")) {
  await phase("inspect", async () => {
    const script = join(ROOT, "tests", "conformance", "inspect-run.mjs");
    let p = 0;
    let f = 0;
    let ok = true;
    const lines = [];
    // One runtime profile after the other: side by side they took longer (236 s against
    // 214 s in CI, 2026-12-07; building each app is CPU-bound).
    for (const extra of [["--profile", "beta42"], ["--profile", "beta55", "--only", "^inspect runs"]]) {
      const r = await run(process.execPath, [script, ...extra], { capture: true });
      let found = 0;
      for (const m of r.out.matchAll(/^(inspect [^:\n]+): (\d+) passed, (\d+) failed/gm)) {
        lines.push(m[0]);
        found++;
        p += Number(m[2]);
        f += Number(m[3]);
      }
      if (r.code !== 0 || found === 0) ok = false;
      if (r.code !== 0 && found === 0) f += 1;
    }
    passed += p;
    failed += f;
    return { ok, detail: `${p} passed, ${f} failed (${lines.length} client runs)` };
  });
}

/**
 * A phase that runs one of the headless-Chromium scripts, which print `<label> …: N passed,
 * N failed` per client run, or `<label>: SKIP` where no Chromium is installed (.ci/run
 * installs Debian's).
 */
async function browserPhase(name, script, label) {
  await phase(name, async () => {
    const r = await run(process.execPath, [join(ROOT, "tests", "conformance", script)], { capture: true });
    if (new RegExp(`^${label}: SKIP`, "m").test(r.out)) {
      skipped += 1;
      return { ok: r.code === 0, detail: "SKIP: no Chromium installed (apt-get install chromium)" };
    }
    let p = 0;
    let f = 0;
    let n = 0;
    for (const m of r.out.matchAll(new RegExp(`^${label} [^:\\n]+: (\\d+) passed, (\\d+) failed`, "gm"))) {
      n++;
      p += Number(m[1]);
      f += Number(m[2]);
    }
    if (r.code !== 0 && f === 0) f += 1;
    passed += p;
    failed += f;
    return { ok: r.code === 0 && n > 0, detail: `${p} passed, ${f} failed (${n} client runs)` };
  });
}

// 6. the DevKit web UI in headless Chromium through both clients (issue #46), and the
// operator console (/console, issue #55): a real workflow's message dead-lettered by a
// failing app, seen, redriven, its run completed.
if (built && !files.length && !flag("--skip-conformance")) {
  await browserPhase("web UI", "web-ui-run.mjs", "web");
  await browserPhase("console", "console-run.mjs", "console");
}

// 7. small forms of the I/O, DevKit and scale benches (issue #45, #47, #54): every run
// completes, deliveries run together within the platform's connection limit, every scenario
// measures, the default layout spreads the queue.
if (built && !files.length && !flag("--skip-conformance")) {
  await phase("benches", async () => {
    let p = 0;
    let f = 0;
    let ok = true;
    for (const name of ["io-small.mjs", "devkit-small.mjs", "scale-small.mjs"]) {
      const r = await run(process.execPath, [join(ROOT, "tests", "conformance", "bench", name)], { capture: true });
      const m = r.out.match(/^[a-z-]+: (\d+) passed, (\d+) failed/m);
      if (m) {
        p += Number(m[1]);
        f += Number(m[2]);
      }
      if (r.code !== 0 || !m) ok = false;
      if (!m) f += 1;
    }
    passed += p;
    failed += f;
    return { ok, detail: `${p} passed, ${f} failed (io-small, devkit-small, scale-small)` };
  });
}

console.log("\n=== summary ===");
for (const ph of phases) {
  console.log(`${ph.ok ? "PASS" : "FAIL"}  ${ph.name.padEnd(12)} ${fmt(ph.ms).padStart(7)}  ${ph.detail}`);
  for (const line of (ph.failures || []).slice(0, 20)) console.log(`      ${line}`);
}
if (!built) console.log("SKIP  node --test   (the build failed)");
const ok = phases.every((p) => p.ok);
console.log(`${ok ? "OK" : "FAILED"}: ${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(ok ? 0 : 1);

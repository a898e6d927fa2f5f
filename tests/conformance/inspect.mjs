// The Workflow DevKit CLI's inspection commands (`workflow inspect runs|run|steps|events|
// streams|stream|hooks|hook --json`, the profile's @workflow/cli) through a real
// world-celld client (0.3.0 or 0.4.0, selected as the CLI's backend with
// WORKFLOW_TARGET_WORLD=world-celld-<client>, the alias the profile installs it under)
// against the built worker in Miniflare. The runs it inspects are real workflows
// (inspect-workflows/inspect.ts) started by a real app (lib/app.mjs) on the same client:
// three runs of 2, 3 and 4 sequential steps, one that fails in its step, and one that
// writes two objects to its output stream, creates three hooks and waits (still running).
// Every command's JSON is checked against what the runs are: ids, statuses, counts, order,
// filters, and paging with --limit and --cursor (the cursor the previous page returned for
// runs and hooks; for steps and events, whose --json prints no cursor, the cursor the
// client itself returns for the same page).
//
//   const r = await inspectSuite({ profile: "beta42", client: "0.4", app: dir });
//   // r.passed, r.failed, r.results [{name, ok, error}]
//
// `app` is the directory lib/profile.mjs buildApp made from inspect-workflows/ (see
// inspect-run.mjs, which prints one line per client and profile).

import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startApp } from "./lib/app.mjs";
import { runNode22 } from "./lib/profile.mjs";
import { profileDir, startServer } from "./lib/workers.mjs";

export const INSPECT_WORKFLOWS = fileURLToPath(new URL("./inspect-workflows", import.meta.url));
export const APP_NAME = ".inspect";
export const FILE = "workflows/inspect.ts";
const STEP_COUNTS = [2, 3, 4];
const sum = (n) => (n * (n - 1)) / 2;

// A tiny program run in the app directory: one call of the client's World, printed as JSON
// (the CLI prints no cursor for steps and events; this is the client's own answer).
const CLIENT_CALL = `const { createWorld } = await import(process.env.WORLD_MODULE);
const world = await createWorld();
const [kind, arg] = process.argv.slice(1);
const page = await world[kind].list(JSON.parse(arg));
process.stdout.write(JSON.stringify({ data: page.data, cursor: page.cursor ?? null, hasMore: page.hasMore }));
await world.close?.();
process.exit(0);
`;

/** A failed check (its message is the report; anything else thrown is reported with its stack). */
export class Check extends Error {}
export function assert(cond, msg) {
  if (!cond) throw new Check(msg);
}
/** Equal as JSON; the message shows both sides (800 characters of each). */
export function eq(actual, expected, msg) {
  const a = JSON.stringify(actual);
  const e = JSON.stringify(expected);
  if (a !== e) throw new Check(`${msg}: got ${a.slice(0, 800)}, expected ${e.slice(0, 800)}`);
}
/** How many checks run at once (each is one or more CLI processes). */
const INSPECT_CONCURRENCY = 2;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const time = (x) => new Date(x).getTime();

/** Runs `workflow inspect <args> --json` in the app directory; resolves with the parsed stdout. */
export function cliRunner({ profile, client, app, server }) {
  const cli = join(profileDir(profile), "node_modules", "@workflow", "cli", "bin", "run.js");
  const env = {
    ...server.env,
    WORKFLOW_TARGET_WORLD: `world-celld-${client}`,
    WORKFLOW_NO_UPDATE_CHECK: "1",
    FORCE_COLOR: "0",
    NO_COLOR: "1",
    CI: "1",
  };
  const log = [];
  async function inspect(...args) {
    return inspectWith(env, ...args);
  }
  async function inspectWith(env, ...args) {
    const argv = [cli, "inspect", ...args, "--json"];
    const t0 = Date.now();
    const r = await runNode22(profile, argv, { cwd: app, env, capture: true });
    const cmd = `workflow inspect ${args.join(" ")} --json`;
    log.push({ cmd, ms: Date.now() - t0, code: r.code });
    let value;
    try {
      value = JSON.parse(r.stdout);
    } catch {
      value = undefined;
    }
    if (r.code !== 0 || value === undefined) {
      const err = new Check(`\`${cmd}\` exited ${r.code}${value === undefined ? " without JSON on stdout" : ""}:\n${r.out.slice(-1500)}`);
      err.code = r.code;
      err.out = r.out;
      throw err;
    }
    return value;
  }
  async function clientList(kind, arg) {
    const r = await runNode22(profile, ["--input-type=module", "-e", CLIENT_CALL, kind, JSON.stringify(arg)], {
      cwd: app,
      env: { ...server.env, WORLD_MODULE: `world-celld-${client}` },
      capture: true,
    });
    if (r.code !== 0) throw new Error(`client ${kind}.list(${JSON.stringify(arg)}) exited ${r.code}: ${r.out.slice(-1500)}`);
    return JSON.parse(r.stdout);
  }
  /** The same with the World named by --backend instead of WORKFLOW_TARGET_WORLD. */
  const inspectBackend = (...args) => inspectWith({ ...env, WORKFLOW_TARGET_WORLD: undefined }, "--backend", `world-celld-${client}`, ...args);
  return { inspect, inspectBackend, clientList, log };
}

/** Starts the runs to inspect; resolves with what they are. */
export async function makeRuns(app, tag) {
  const runs = [];
  for (const n of STEP_COUNTS) {
    const { runId } = await app.start(FILE, "steps", [n]);
    runs.push({ runId, kind: "steps", n, status: "completed", output: sum(n) });
    await sleep(5); // distinct createdAt, so that the listing's order is known
  }
  const failed = (await app.start(FILE, "fails", [])).runId;
  runs.push({ runId: failed, kind: "fails", n: 1, status: "failed" });
  await sleep(5);
  const token = `inspect-${tag}-${Date.now().toString(36)}`;
  const waiting = (await app.start(FILE, "waits", [token])).runId;
  runs.push({ runId: waiting, kind: "waits", n: 1, status: "running", token });
  for (const r of runs) {
    if (r.kind !== "waits") r.record = await app.waitRun(r.runId, { timeoutMs: 60_000 });
  }
  // The waiting run: until its step completed and its three hooks exist.
  const w = runs.at(-1);
  const deadline = Date.now() + 60_000;
  for (;;) {
    const events = await app.events(w.runId);
    const hooks = events.filter((e) => e.eventType === "hook_created").length;
    const stepDone = events.some((e) => e.eventType === "step_completed");
    if (hooks === 3 && stepDone) break;
    if (Date.now() > deadline) throw new Error(`run ${w.runId}: ${hooks} hooks, step completed ${stepDone} after 60 s: ${JSON.stringify(events.map((e) => e.eventType))}`);
    await sleep(50);
  }
  w.record = await app.run(w.runId);
  for (const r of runs) r.events = await app.events(r.runId);
  return runs;
}

/**
 * One client on one profile: a fresh worker, an app on it, the runs, then every check.
 * `server`: "ours" (default) or "reference" (the client's TypeScript reference worker, to
 * compare with). Resolves with {passed, failed, results, ms}.
 */
export async function inspectSuite({ profile = "beta42", client = "0.4", app: appDir, server: serverKind = "ours", verbose = false, only } = {}) {
  const t0 = Date.now();
  const results = [];
  const server = await startServer({ server: serverKind, client, profile });
  let app;
  try {
    app = await startApp({ profile, dir: appDir, client, server });
    const { inspect, inspectBackend, clientList, log } = cliRunner({ profile, client, app: appDir, server });
    const runs = await makeRuns(app, client.replace(".", ""));
    const byId = new Map(runs.map((r) => [r.runId, r]));
    const [s2, s3, s4] = runs;
    const failedRun = runs[3];
    const waiting = runs[4];
    // Newest first, by createdAt (then runId, descending).
    const desc = [...runs].sort((a, b) => time(b.record.createdAt) - time(a.record.createdAt) || (a.runId < b.runId ? 1 : -1)).map((r) => r.runId);
    // The checks only read, so they run two at a time (each CLI call is about 3 s of one core
    // loading the CLI's modules; CI has two). A check that needs an earlier one's answer names
    // it with `after`. Results keep the order the checks are written in.
    const pending = [];
    let free = INSPECT_CONCURRENCY;
    const waiters = [];
    const acquire = () => (free > 0 ? (free--, Promise.resolve()) : new Promise((r) => waiters.push(r)));
    const release = () => (waiters.length ? waiters.shift()() : free++);
    const test = (name, fn, { after } = {}) => {
      // `only`: a RegExp of the check names to run (npm test runs the listing checks alone on the second runtime).
      if (only && !only.test(name)) return Promise.resolve();
      const i = results.push(undefined) - 1;
      const p = (async () => {
        await after;
        await acquire();
        const t = Date.now();
        try {
          await fn();
          results[i] = { name, ok: true, ms: Date.now() - t };
          if (verbose) console.log(`  ok   ${name} (${Date.now() - t} ms)`);
        } catch (err) {
          results[i] = { name, ok: false, ms: Date.now() - t, error: err instanceof Check ? err.message : String(err?.stack || err) };
          if (verbose) console.log(`  FAIL ${name}: ${results[i].error}`);
        } finally {
          release();
        }
      })();
      pending.push(p);
      return p;
    };

    // ---- runs ----
    test("inspect runs: every run, newest first, with its status", async () => {
      const page = await inspect("runs");
      eq(page.data.map((r) => r.runId), desc, "runIds (desc)");
      for (const r of page.data) {
        const want = byId.get(r.runId);
        eq(r.status, want.status, `status of ${r.runId} (${want.kind})`);
        eq(r.workflowName, want.record.workflowName, `workflowName of ${r.runId}`);
        assert(r.input === undefined && r.output === undefined, `a listing without --withData carries no input/output (${r.runId}: ${JSON.stringify(r).slice(0, 300)})`);
      }
      eq(page.hasMore, false, "hasMore");
    });
    test("inspect runs --sort asc: oldest first", async () => {
      const page = await inspect("runs", "--sort", "asc");
      eq(page.data.map((r) => r.runId), [...desc].reverse(), "runIds (asc)");
      eq(page.hasMore, false, "hasMore");
    });
    test("inspect runs --limit 2, then --cursor: three pages, each run once, in order", async () => {
      const seen = [];
      let cursor;
      const sizes = [];
      for (let i = 0; i < 3; i++) {
        const page = await inspect("runs", "--limit", "2", ...(cursor ? ["--cursor", cursor] : []));
        sizes.push(page.data.length);
        seen.push(...page.data.map((r) => r.runId));
        if (i < 2) {
          eq(page.hasMore, true, `page ${i + 1} hasMore`);
          assert(typeof page.cursor === "string" && page.cursor.length > 0, `page ${i + 1} has a cursor (${JSON.stringify(page.cursor)})`);
          cursor = page.cursor;
        } else eq(page.hasMore, false, "last page hasMore");
      }
      eq(sizes, [2, 2, 1], "page sizes");
      eq(seen, desc, "runIds over the pages");
    });
    test("inspect runs --limit 3 --sort asc, then --cursor", async () => {
      const p1 = await inspect("runs", "--limit", "3", "--sort", "asc");
      eq(p1.data.map((r) => r.runId), [...desc].reverse().slice(0, 3), "page 1");
      eq(p1.hasMore, true, "page 1 hasMore");
      const p2 = await inspect("runs", "--limit", "3", "--sort", "asc", "--cursor", p1.cursor);
      eq(p2.data.map((r) => r.runId), [...desc].reverse().slice(3), "page 2");
      eq(p2.hasMore, false, "page 2 hasMore");
    });
    test("inspect runs --status completed|failed|running", async () => {
      for (const status of ["completed", "failed", "running"]) {
        const page = await inspect("runs", "--status", status);
        eq(page.data.map((r) => r.runId), desc.filter((id) => byId.get(id).status === status), `--status ${status}`);
        assert(page.data.every((r) => r.status === status), `--status ${status}: statuses ${JSON.stringify(page.data.map((r) => r.status))}`);
      }
    });
    test("inspect runs --workflowName <the steps workflow>", async () => {
      const page = await inspect("runs", "--workflowName", s2.record.workflowName);
      eq(page.data.map((r) => r.runId), desc.filter((id) => byId.get(id).kind === "steps"), `--workflowName ${s2.record.workflowName}`);
    });

    test("inspect runs --backend world-celld-<client> (no WORKFLOW_TARGET_WORLD)", async () => {
      const page = await inspectBackend("runs", "--limit", "1");
      eq(page.data.map((r) => r.runId), desc.slice(0, 1), "the newest run");
      eq(page.hasMore, true, "hasMore");
    });

    // ---- run ----
    test("inspect run <id>: a completed run with its input and output", async () => {
      const run = await inspect("run", s3.runId);
      eq(run.runId, s3.runId, "runId");
      eq(run.status, "completed", "status");
      eq(run.workflowName, s3.record.workflowName, "workflowName");
      eq(run.input, [3], "input (hydrated)");
      eq(run.output, sum(3), "output (hydrated)");
      eq(time(run.createdAt), time(s3.record.createdAt), "createdAt");
      eq(time(run.completedAt), time(s3.record.completedAt), "completedAt");
      assert(time(run.startedAt) >= time(run.createdAt) && time(run.completedAt) >= time(run.startedAt), `createdAt ≤ startedAt ≤ completedAt (${run.createdAt}, ${run.startedAt}, ${run.completedAt})`);
    });
    test("inspect run <id>: the failed run and its error", async () => {
      const run = await inspect("run", failedRun.runId);
      eq(run.runId, failedRun.runId, "runId");
      eq(run.status, "failed", "status");
      // The run record's error is what the World derives from run_failed, whose error is a
      // serialized (binary) payload: {code: "USER_ERROR", message: "Unknown error"}, the
      // same on the TypeScript reference worker. The message itself is in the event.
      eq(run.error?.code, "USER_ERROR", "error.code");
      assert(typeof run.error?.message === "string", `error.message (${JSON.stringify(run.error)})`);
      const events = await inspect("events", "--runId", failedRun.runId, "--sort", "asc", "--withData");
      eq(events.map((e) => e.eventType), ["run_created", "run_started", "step_created", "step_started", "step_failed", "run_failed"], "eventTypes");
      const last = events.at(-1);
      assert(JSON.stringify(last.eventData ?? null).includes("inspect: this step always fails"), `run_failed's hydrated error names the step's failure: ${JSON.stringify(last.eventData).slice(0, 400)}`);
    });
    test("inspect run <id>: the waiting run is running", async () => {
      const run = await inspect("run", waiting.runId);
      eq(run.status, "running", "status");
      eq(run.input, [waiting.token], "input");
      assert(run.completedAt == null, `no completedAt (${run.completedAt})`);
    });
    test("inspect run <unknown id> fails", async () => {
      let err;
      try {
        await inspect("run", "wrun_01JZZZZZZZZZZZZZZZZZZZZZZZ");
      } catch (e) {
        err = e;
      }
      assert(err && err.code !== 0, "exits non-zero");
      assert(/not found|404/i.test(err.out || err.message), `says not found: ${(err.out || err.message).slice(-300)}`);
    });

    // ---- steps ----
    test("inspect steps --runId: each run's steps, their status and count", async () => {
      for (const r of [s2, s3, s4]) {
        const steps = await inspect("steps", "--runId", r.runId);
        eq(steps.length, r.n, `steps of the ${r.n}-step run`);
        assert(steps.every((s) => s.runId === r.runId && s.status === "completed"), `all completed: ${JSON.stringify(steps.map((s) => [s.runId, s.status]))}`);
        assert(steps.every((s) => /add/.test(s.stepName)), `stepName names the step: ${JSON.stringify(steps.map((s) => s.stepName))}`);
        eq(new Set(steps.map((s) => s.stepId)).size, r.n, "distinct stepIds");
        const created = r.events.filter((e) => e.eventType === "step_created").map((e) => e.correlationId);
        eq([...steps.map((s) => s.stepId)].sort(), [...created].sort(), "stepIds = the step_created events' correlationIds");
        for (let i = 1; i < steps.length; i++) assert(time(steps[i - 1].createdAt) >= time(steps[i].createdAt), "newest first");
        eq(steps.map((s) => s.stepId), [...created].reverse(), "stepIds newest first");
      }
      const failedSteps = await inspect("steps", "--runId", failedRun.runId);
      eq(failedSteps.map((s) => [s.status, s.attempt]), [["failed", 1]], "the failing run's step (status, attempt)");
    });
    test("inspect steps --sort asc --limit 2, then --cursor (the client's cursor)", async () => {
      const created = s4.events.filter((e) => e.eventType === "step_created").map((e) => e.correlationId);
      const p1 = await inspect("steps", "--runId", s4.runId, "--sort", "asc", "--limit", "2");
      eq(p1.map((s) => s.stepId), created.slice(0, 2), "page 1");
      const viaClient = await clientList("steps", { runId: s4.runId, pagination: { sortOrder: "asc", limit: 2, cursor: "" }, resolveData: "none" });
      eq(viaClient.data.map((s) => s.stepId), created.slice(0, 2), "the client's page 1 (cursor \"\")");
      eq(viaClient.hasMore, true, "the client's page 1 hasMore");
      assert(viaClient.cursor, `the client's page 1 has a cursor (${viaClient.cursor})`);
      const p2 = await inspect("steps", "--runId", s4.runId, "--sort", "asc", "--limit", "2", "--cursor", viaClient.cursor);
      eq(p2.map((s) => s.stepId), created.slice(2), "page 2");
    });
    test("inspect steps without --runId: the newest run's steps", async () => {
      // The newest run is the waiting one: one completed step (writeLines).
      const steps = await inspect("steps");
      assert(steps.every((s) => s.runId === desc[0]), `runId ${desc[0]}: ${JSON.stringify(steps.map((s) => s.runId))}`);
      eq(steps.length, 1, "one step");
    });
    test("inspect step <stepId> --runId: one step with its input and output", async () => {
      const created = s3.events.filter((e) => e.eventType === "step_created").map((e) => e.correlationId);
      const step = await inspect("step", created[2], "--runId", s3.runId);
      eq(step.stepId, created[2], "stepId");
      eq(step.runId, s3.runId, "runId");
      eq(step.status, "completed", "status");
      eq(step.output, sum(3), "output: 1 + 2");
      eq(step.attempt, 1, "attempt");
    });

    // ---- events ----
    test("inspect events --runId: the run's events, newest first", async () => {
      for (const r of [s2, s4, failedRun, waiting]) {
        const events = await inspect("events", "--runId", r.runId);
        const want = [...r.events].reverse().slice(0, 20);
        eq(events.map((e) => e.eventId), want.map((e) => e.eventId), `eventIds of ${r.kind}${r.kind === "steps" ? r.n : ""}`);
        eq(events.map((e) => e.eventType), want.map((e) => e.eventType), "eventTypes");
        assert(events.every((e) => e.runId === r.runId), "runId of every event");
      }
      const types = (await inspect("events", "--runId", s4.runId, "--sort", "asc")).map((e) => e.eventType);
      const count = (t) => types.filter((x) => x === t).length;
      eq([count("run_created"), count("run_started"), count("step_created"), count("step_started"), count("step_completed"), count("run_completed")], [1, 1, 4, 4, 4, 1], "event counts of the 4-step run (run_created, run_started, step_created, step_started, step_completed, run_completed)");
      eq(types[0], "run_created", "first event");
      eq(types.at(-1), "run_completed", "last event");
    });
    test("inspect events --limit 5, then --cursor (the client's cursor), to the end", async () => {
      const all = [...s4.events].reverse().map((e) => e.eventId); // desc
      const p1 = await inspect("events", "--runId", s4.runId, "--limit", "5");
      eq(p1.map((e) => e.eventId), all.slice(0, 5), "page 1");
      const seen = [...p1.map((e) => e.eventId)];
      let page = await clientList("events", { runId: s4.runId, pagination: { sortOrder: "desc", limit: 5, cursor: "" }, resolveData: "none" });
      eq(page.data.map((e) => e.eventId), all.slice(0, 5), "the client's page 1 (cursor \"\")");
      for (let i = 2; page.hasMore; i++) {
        assert(i < 10, "too many pages");
        const next = await inspect("events", "--runId", s4.runId, "--limit", "5", "--cursor", page.cursor);
        seen.push(...next.map((e) => e.eventId));
        page = await clientList("events", { runId: s4.runId, pagination: { sortOrder: "desc", limit: 5, cursor: page.cursor }, resolveData: "none" });
        eq(next.map((e) => e.eventId), page.data.map((e) => e.eventId), `page ${i}: the CLI and the client agree`);
      }
      eq(seen, all, `all ${all.length} events over the pages, each once, in order`);
    });
    test("inspect events --stepId: one step's events", async () => {
      const stepId = s3.events.find((e) => e.eventType === "step_created").correlationId;
      const events = await inspect("events", "--runId", s3.runId, "--stepId", stepId, "--sort", "asc");
      eq(events.map((e) => e.eventType), ["step_created", "step_started", "step_completed"], "eventTypes");
      assert(events.every((e) => e.correlationId === stepId), "correlationId");
    });

    // ---- streams ----
    let streamId;
    const streamsListed = test("inspect streams --runId: the waiting run's output stream; none for the others", async () => {
      const streams = await inspect("streams", "--runId", waiting.runId);
      eq(streams.length, 1, `one stream (${JSON.stringify(streams)})`);
      eq(streams[0].runId, waiting.runId, "runId");
      assert(typeof streams[0].streamId === "string" && streams[0].streamId.length > 0, "streamId");
      streamId = streams[0].streamId;
      eq(await inspect("streams", "--runId", s2.runId), [], "the 2-step run's streams");
    });
    test("inspect stream <streamId> --runId: the objects written, in order", async () => {
      assert(streamId, "no stream id from the previous test");
      const cli = join(profileDir(profile), "node_modules", "@workflow", "cli", "bin", "run.js");
      const r = await runNode22(profile, [cli, "inspect", "stream", streamId, "--runId", waiting.runId, "--json"], {
        cwd: appDir,
        env: { ...server.env, WORKFLOW_TARGET_WORLD: `world-celld-${client}`, WORKFLOW_NO_UPDATE_CHECK: "1", NO_COLOR: "1", CI: "1" },
        capture: true,
      });
      eq(r.code, 0, `exit code (${r.out.slice(-600)})`);
      const lines = r.stdout.split("\n").filter(Boolean).map((l) => JSON.parse(l));
      eq(lines, [{ line: "first" }, { line: "second" }], "the stream's objects (newline-delimited JSON)");
    }, { after: streamsListed });

    // ---- hooks ----
    const tokens = [0, 1, 2].map((i) => `${waiting.token}-${i}`);
    let hookIds = [];
    const hooksListed = test("inspect hooks --runId: the run's three hooks", async () => {
      const page = await inspect("hooks", "--runId", waiting.runId);
      eq(page.data.length, 3, "hooks");
      eq(page.hasMore, false, "hasMore");
      assert(page.data.every((h) => h.runId === waiting.runId), "runId of every hook");
      eq([...page.data.map((h) => h.token)].sort(), tokens, "tokens");
      const created = waiting.events.filter((e) => e.eventType === "hook_created").map((e) => e.correlationId);
      eq([...page.data.map((h) => h.hookId)].sort(), [...created].sort(), "hookIds = the hook_created events' correlationIds");
      hookIds = page.data.map((h) => h.hookId);
      eq((await inspect("hooks", "--runId", s2.runId)).data, [], "the 2-step run has none");
    });
    test("inspect hooks --runId --limit 2, then --cursor", async () => {
      const p1 = await inspect("hooks", "--runId", waiting.runId, "--limit", "2");
      eq(p1.data.length, 2, "page 1 size");
      eq(p1.hasMore, true, "page 1 hasMore");
      assert(typeof p1.cursor === "string" && p1.cursor.length > 0, `page 1 cursor (${JSON.stringify(p1.cursor)})`);
      const p2 = await inspect("hooks", "--runId", waiting.runId, "--limit", "2", "--cursor", p1.cursor);
      eq(p2.data.length, 1, "page 2 size");
      eq(p2.hasMore, false, "page 2 hasMore");
      eq([...p1.data, ...p2.data].map((h) => h.hookId), hookIds, "the pages in the order of the full listing");
      const asc = await inspect("hooks", "--runId", waiting.runId, "--sort", "asc");
      eq(asc.data.map((h) => h.hookId), [...hookIds].reverse(), "--sort asc reverses it");
    }, { after: hooksListed });
    test("inspect hook <hookId>: token, run and metadata", async () => {
      const created = waiting.events.filter((e) => e.eventType === "hook_created").map((e) => e.correlationId);
      for (const hookId of created) {
        const hook = await inspect("hook", hookId);
        eq(hook.hookId, hookId, "hookId");
        eq(hook.runId, waiting.runId, "runId");
        assert(tokens.includes(hook.token), `token ${hook.token}`);
        eq(hook.metadata, { i: tokens.indexOf(hook.token) }, "metadata (hydrated)");
      }
    });

    await Promise.all(pending);
    results.log = log;
  } catch (err) {
    results.push({ name: "setup", ok: false, error: String(err?.stack || err) + (app ? `\napp log:\n${app.log().slice(-3000)}` : "") });
  } finally {
    await app?.stop().catch(() => {});
    await server.dispose().catch(() => {});
  }
  const failed = results.filter((r) => !r.ok).length;
  return { passed: results.length - failed, failed, results, ms: Date.now() - t0 };
}

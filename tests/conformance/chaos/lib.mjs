// The chaos trial: real workflows through a real world-celld client and the Workflow
// runtime (lib/app.mjs), while the workerd serving the World is SIGKILLed at random moments
// and restarted on the same persisted Durable Object state and the same port. Used by
// chaos.mjs (npm run chaos, the full form) and tests/chaos.test.mjs (npm test, one kill).
//
// A trial checks:
//   * every workflow completes, with the output chaos/workflows/chaos.ts must give
//     (computed here independently, expectedOutput);
//   * no step body ran after its step's completion was recorded (classify): at-least-once
//     delivery allows a body to run again only while its step_completed is not yet
//     recorded (or, a moment later, under its own step_started granted before that);
//   * no step_completed the World acknowledged (applied, answered {ok:true}) is missing from
//     the run's events afterwards;
//   * the kills came while workflows were still running.
// It also reports the messages the World delivered again under an attempt number it had
// already used: the runtime takes x-vqs-message-attempt 1 for a message's first delivery
// (it then runs the first steps without reading the run's events), so such a redelivery
// re-runs completed steps.
// It measures the time from the last restart until the last workflow completed.

import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { isDeepStrictEqual } from "node:util";
import { startApp } from "../lib/app.mjs";
import { buildApp, ensureProfile } from "../lib/profile.mjs";
import { rpc } from "../../lib/rpc.mjs";
import { gateStats, isCourier, partitionsTotal, SHARD } from "../bench/io.mjs";
import { isDescendant, startServer, workerdPids } from "../lib/workers.mjs";

export const CHAOS = resolve(fileURLToPath(import.meta.url), "..");
export const WORKFLOWS_DIR = join(CHAOS, "workflows");
/** The workflow file of the built app (the manifest's key). */
export const FILE = "workflows/chaos.ts";
/** The app's name under profiles/<profile>/. */
export const APP_NAME = ".chaos";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Installs the runtime profile if needed and builds the chaos app; returns its directory. */
export function prepareApp(profile = "beta42") {
  ensureProfile(profile);
  return buildApp(profile, APP_NAME, { template: null, workflowsDir: WORKFLOWS_DIR });
}

/** A small seeded generator (mulberry32): the same seed, the same plan and kill targets. */
export function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** What each workflow of chaos.ts returns, computed here the same way. */
export function expectedOutput(workflow, args) {
  if (workflow === "chaosSequential") {
    const [n, salt] = args;
    let acc = salt;
    for (let i = 0; i < n; i++) acc = (acc * 31 + i * 7 + salt) % 1_000_003;
    return acc;
  }
  if (workflow === "chaosParallel") {
    const [n, salt] = args;
    return Array.from({ length: n }, (_, i) => i * i + salt);
  }
  if (workflow === "chaosPayload") {
    const [n, kb, salt] = args;
    let p = "";
    for (let i = 0; i < kb * 1024; i++) p += String.fromCharCode(97 + ((i * 7 + salt) % 26));
    for (let i = 0; i < n; i++) p = p.slice(1) + String.fromCharCode(97 + ((p.charCodeAt(0) - 97 + i) % 26));
    return p;
  }
  throw new Error(`unknown workflow ${workflow}`);
}

/** Step counts per workflow kind: [min, max] for the full form, fixed for the bounded one. */
const SIZES = {
  full: { chaosSequential: [10, 30], chaosParallel: [8, 24], chaosPayload: [6, 14] },
  small: { chaosSequential: [12, 12], chaosParallel: [10, 10], chaosPayload: [8, 8] },
};
const KINDS = ["chaosSequential", "chaosParallel", "chaosPayload"];

/** The trial's workflows: the three kinds in turn, sizes drawn from `rand`. */
export function planWorkflows(count, rand, scale = "full") {
  const plan = [];
  for (let i = 0; i < count; i++) {
    const workflow = KINDS[i % KINDS.length];
    const [lo, hi] = SIZES[scale][workflow];
    const n = lo + Math.floor(rand() * (hi - lo + 1));
    const salt = Math.floor(rand() * 1000);
    const args = workflow === "chaosPayload" ? [n, 10, salt] : [n, salt];
    plan.push({ index: i, workflow, args, steps: n, expected: expectedOutput(workflow, args) });
  }
  return plan;
}

const ms = (v) => (v === undefined || v === null ? undefined : typeof v === "number" ? v : Date.parse(v));

/**
 * How long after its step_started was granted a body may start and still count as run
 * under that grant (the answer's way back to the app and the body's setup, on a loaded
 * machine). Only used when the grant came before the completion; see classify.
 */
export const GRANT_LATENCY_MS = 2000;
/** The app's request times (performance.timeOrigin + now()) and Date.now() may differ slightly. */
const CLOCK_SLACK_MS = 5;

/**
 * Classifies the step bodies' executions of the given runs.
 *   runs:       [{ runId, events, readAt }]   events as world.events.list gives them (oldest
 *               first), read from readAt on (epoch ms; acknowledgements from then on are not
 *               looked for in them)
 *   executions: [{ runId, stepId, attempt, at, name }]   one per body run (at: epoch ms)
 *   trace:      the app's request trace (applyEvent entries with eventType, correlationId,
 *               ok and okAt: Date.now() when the answer was read)
 * A step's completion is recorded at C = the earlier of its step_completed event's
 * createdAt and the moment the client got the World's acknowledgement of it (a completion
 * acknowledged and then lost still counts from its acknowledgement). An execution is
 * allowed when it started at or before C. It is also allowed when it started after C under
 * its own step_started granted before C, at most GRANT_LATENCY_MS before it: a second
 * handler was granted the step, the first one's completion landed, and the second body
 * started a moment later — at-least-once, not a lost completion. "Its own": the k-th
 * step_started event gives attempt k; of the executions that report attempt k, only the
 * one nearest to that grant ran under it (the runtime can run a body before its
 * step_started is answered, with attempt 1, and discard it when the start is refused: such
 * a body owns no grant). Anything else ran after the completion was recorded. Returns
 *   reExecutions     every execution of a step beyond its first, with `allowed` and
 *                    `sinceCompletionMs` (its start minus C; negative: before)
 *   violations       executions (of any rank) that are not allowed
 *   lostCompletions  step_completed acknowledged to the client but absent from the events
 *                    (none there, or only one created after the acknowledgement)
 */
export function classify({ runs, executions, trace = [] }) {
  const acks = new Map();
  for (const e of trace) {
    if (e.kind !== "request" || e.eventType !== "step_completed" || e.ok !== true || !e.correlationId) continue;
    const key = `${e.runId}|${e.correlationId}`;
    acks.set(key, Math.min(acks.get(key) ?? Infinity, e.okAt ?? e.end));
  }
  const steps = new Map(); // key -> { completedAt, completions, started: [createdAt] }
  const runIds = new Set();
  const readAt = new Map();
  for (const { runId, events, readAt: at } of runs) {
    runIds.add(runId);
    if (at !== undefined) readAt.set(runId, at);
    for (const ev of events) {
      if (!ev.correlationId) continue;
      const key = `${runId}|${ev.correlationId}`;
      let s = steps.get(key);
      if (!s) steps.set(key, (s = { completedAt: undefined, completions: 0, started: [] }));
      if (ev.eventType === "step_started") s.started.push(ms(ev.createdAt));
      if (ev.eventType === "step_completed") {
        s.completions += 1;
        if (s.completedAt === undefined) s.completedAt = ms(ev.createdAt);
      }
    }
  }
  // An acknowledged completion is lost when the events hold none for the step, or only one
  // created after the acknowledgement arrived (so not the acknowledged one).
  const lostCompletions = [];
  for (const [key, ackAt] of acks) {
    const [runId, stepId] = key.split("|");
    if (!runIds.has(runId)) continue;
    // Acknowledged after the events were read (a run still moving when the trial gave up
    // waiting): the listing could not hold it.
    if (ackAt >= (readAt.get(runId) ?? Infinity)) continue;
    const s = steps.get(key);
    if (!s?.completions || s.completedAt > ackAt + CLOCK_SLACK_MS) lostCompletions.push({ runId, stepId, ackAt, completedAt: s?.completedAt });
  }
  const byStep = new Map();
  for (const x of executions) {
    if (!runIds.has(x.runId)) continue;
    const key = `${x.runId}|${x.stepId}`;
    if (!byStep.has(key)) byStep.set(key, []);
    byStep.get(key).push(x);
  }
  const reExecutions = [];
  const violations = [];
  for (const [key, list] of byStep) {
    list.sort((a, b) => a.at - b.at);
    const s = steps.get(key);
    const completedAt = Math.min(s?.completedAt ?? Infinity, acks.get(key) ?? Infinity);
    const recorded = Number.isFinite(completedAt);
    // The owner of each grant: the execution with that attempt nearest to it.
    const owner = new Map();
    for (const x of list) {
      const grantedAt = s?.started[x.attempt - 1];
      if (grantedAt === undefined) continue;
      const o = owner.get(x.attempt);
      if (!o || Math.abs(x.at - grantedAt) < Math.abs(o.at - grantedAt)) owner.set(x.attempt, x);
    }
    list.forEach((x, rank) => {
      const grantedAt = s?.started[x.attempt - 1];
      const underGrant =
        recorded && owner.get(x.attempt) === x && grantedAt <= completedAt && x.at - grantedAt <= GRANT_LATENCY_MS;
      const allowed = !recorded || x.at <= completedAt || underGrant;
      const entry = { ...x, rank, allowed, sinceCompletionMs: recorded ? x.at - completedAt : null, grantedBeforeCompletion: underGrant, firstAt: list[0].at };
      if (rank > 0) {
        // The step's step_started/step_completed requests before this execution, relative to
        // the first execution's start: [type, sent, answered, status] (status 0: no answer).
        const [runId, stepId] = key.split("|");
        entry.requests = trace
          .filter((e) => e.kind === "request" && e.runId === runId && e.correlationId === stepId && e.start < x.at && /^step_(started|completed)$/.test(e.eventType))
          .map((e) => [e.eventType.slice(5), Math.round(e.start - list[0].at), Math.round(e.end - list[0].at), e.status]);
      }
      if (rank > 0) reExecutions.push(entry);
      if (!allowed) violations.push(entry);
    });
  }
  return { reExecutions, violations, lostCompletions };
}

/** The workerd processes of a server that are children of this process (never anyone else's). */
export function ownWorkerd(server) {
  return server.pids().filter((pid) => {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const [state, ppid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      return Number(ppid) === process.pid && state !== "Z";
    } catch {
      return false;
    }
  });
}

async function withTimeout(promise, timeoutMs) {
  let timer;
  const timeout = new Promise((r) => (timer = setTimeout(() => r("timeout"), timeoutMs)));
  try {
    return await Promise.race([promise.then(() => "ok", (e) => `error: ${e?.message || e}`), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** startServer on a given port, retried while the port is still held (a dying process). */
async function restartServer(options) {
  let lastErr;
  for (let i = 0; i < 20; i++) {
    try {
      return await startServer(options);
    } catch (err) {
      lastErr = err;
      await sleep(250);
    }
  }
  throw lastErr;
}

/** Processes to end if this process exits early (Ctrl-C, a crash): children only. */
const live = { apps: new Set(), servers: new Set() };
let exitHook = false;
function registerCleanup() {
  if (exitHook) return;
  exitHook = true;
  for (const signal of ["SIGINT", "SIGTERM"]) process.once(signal, () => process.exit(130));
  process.on("exit", () => {
    for (const app of live.apps) {
      try {
        app.child.kill("SIGKILL");
      } catch {
        // gone
      }
    }
    for (const w of live.servers) {
      for (const pid of ownWorkerd(w)) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          // gone
        }
      }
    }
  });
}

/**
 * One trial. Options:
 *   server      "ours" | "reference"
 *   client      "0.3" | "0.4"
 *   profile     the runtime profile (beta42)
 *   appDir      prepareApp(profile)
 *   workflows   how many (the kinds in turn)
 *   kills       how many SIGKILLs
 *   seed        the plan, kill targets and downtimes
 *   scale       "full" (sizes drawn per workflow) or "small" (fixed, for npm test)
 *   timeoutMs   how long after the last restart the workflows may take
 *   downtimeMs  [min, max]: how long workerd stays dead before the restart begins
 *   killBand    [from, to]: the kills come at random shares of the steps run, one in each
 *               of `kills` equal parts of this range
 *   worker      another build of our worker to serve (the path of its index.js, next to its
 *               index_bg.wasm), e.g. a candidate fix; default build/index.js
 *   sabotage    null, "no-restart" (the last kill is not followed by a restart) or
 *               "lose-queue" (the queue's persisted state is deleted before each restart:
 *               a World that loses its deliveries) — to see the checks fail
 *   log         a function for progress lines
 * Resolves with the trial's record (see the end of the function); `ok` says whether it passed.
 */
export async function runTrial({
  server: serverKind = "ours",
  client = "0.3",
  profile = "beta42",
  appDir,
  workflows = 20,
  kills = 3,
  seed = 1,
  scale = "full",
  timeoutMs = 180_000,
  downtimeMs = [0, 500],
  killBand = [0.05, 0.85],
  worker = null,
  vars = {},
  sabotage = null,
  log = () => {},
}) {
  registerCleanup();
  const serve = { server: serverKind, client, vars, persistDir: undefined, ...(worker ? { wrapEntry: () => resolve(worker) } : {}) };
  const rand = rng(seed);
  const plan = planWorkflows(workflows, rand, scale);
  const totalSteps = plan.reduce((a, p) => a + p.steps, 0);
  const persistDir = mkdtempSync(join(tmpdir(), "celld-chaos-"));
  serve.persistDir = persistDir;
  const started = Date.now();
  let w;
  let app;
  const killLog = [];
  let trialOk = false;
  try {
    w = await startServer(serve);
    live.servers.add(w);
    const port = w.port;
    app = await startApp({ profile, dir: appDir, client, server: w });
    live.apps.add(app);
    const runIds = await Promise.all(plan.map((p) => app.start(FILE, p.workflow, p.args).then((r) => r.runId)));
    plan.forEach((p, i) => (p.runId = runIds[i]));
    const mine = new Set(runIds);
    const progress = async () => {
      const seen = new Set();
      for (const x of await app.executions()) if (mine.has(x.runId)) seen.add(`${x.runId}|${x.stepId}`);
      return seen.size;
    };
    // A stall (no new step for STALL_MS while the server is up): what the World and the app
    // were doing then, once per server life (the state after the wait may have moved on).
    const stalls = [];
    let advancedAt = Date.now();
    let lastDone = -1;
    let stalledLife = -1;
    const watchStall = async (done, life) => {
      if (done !== lastDone) {
        lastDone = done;
        advancedAt = Date.now();
        return;
      }
      if (Date.now() - advancedAt < STALL_MS || stalledLife === life) return;
      stalledLife = life;
      const snap = { at: at(Date.now()), life, upMs: Date.now() - readyAt, steps: done };
      if (serverKind === "ours") snap.queue = await queueDiagnosis(w, app.port, vars).catch((err) => ({ error: String(err) }));
      const trace = await app.trace().catch(() => []);
      const open = trace.filter((e) => e.end === 0);
      const groups = {};
      for (const e of open) {
        const key = e.kind === "delivery" ? `delivery ${e.path}` : `${e.path} ${e.method ?? ""} ${e.eventType ?? ""}`.trim();
        const g = (groups[key] ??= { count: 0, oldestMs: 0 });
        g.count += 1;
        g.oldestMs = Math.max(g.oldestMs, Math.round(Date.now() - e.start));
      }
      snap.appOpen = groups;
      // What the app did during the stall: its deliveries and World calls by kind and answer.
      const recent = {};
      for (const e of trace) {
        if (e.start < advancedAt) continue;
        const what = e.kind === "delivery" ? `delivery ${e.path.split("/").pop()} ${e.status}` : `${e.method ?? e.path} ${e.eventType ?? ""} ${e.status}${e.ok === false ? " refused" : ""}`;
        recent[what] = (recent[what] ?? 0) + 1;
      }
      snap.appDid = recent;
      stalls.push(snap);
    };
    let readyAt = Date.now();
    let serverUp = true;
    for (let k = 0; k < kills; k++) {
      // Kill k once the workflows have run a random share of their steps in the k-th of
      // `kills` equal parts of killBand (default 5 %..85 %) and, after a restart, the server
      // has been up for a random 0.1..0.6 s; if the steps stop advancing (a stuck World),
      // after 30 s anyway. Then a random 0..40 ms more (the progress is polled every 40 ms).
      const [lo, hi] = killBand;
      const target = Math.ceil(totalSteps * (lo + ((hi - lo) * (k + rand())) / kills));
      const minUp = k === 0 ? 0 : 100 + Math.floor(rand() * 500);
      const jitter = Math.floor(rand() * 40);
      const downtime = downtimeMs[0] + Math.floor(rand() * (downtimeMs[1] - downtimeMs[0] + 1));
      let done = 0;
      for (;;) {
        done = await progress();
        await watchStall(done, k);
        const up = Date.now() - readyAt;
        if (done >= totalSteps) break;
        if ((done >= target && up >= minUp) || up >= 30_000) break;
        await sleep(40);
      }
      if (done >= totalSteps) {
        log(`kill ${k + 1}: not done, every step had already run (${done}/${totalSteps})`);
        break;
      }
      await sleep(jitter);
      const pids = ownWorkerd(w);
      if (!pids.length) throw new Error("no workerd child process to kill");
      const before = await progress();
      for (const pid of pids) process.kill(pid, "SIGKILL");
      const killedAt = Date.now();
      serverUp = false;
      await withTimeout(w.dispose(), 10_000);
      live.servers.delete(w);
      if (sabotage === "lose-queue") {
        for (const d of readdirSync(persistDir)) if (d.endsWith("QueueDO")) rmSync(join(persistDir, d), { recursive: true, force: true });
      }
      const entry = { k: k + 1, atProgress: before / totalSteps, killedAt, upMs: killedAt - readyAt, downMs: 0, pids, alarms: queueAlarms(persistDir, killedAt) };
      killLog.push(entry);
      if (sabotage === "no-restart" && k === kills - 1) {
        log(`kill ${k + 1}: workerd ${pids.join(",")} SIGKILLed at ${before}/${totalSteps} steps; not restarted (sabotage)`);
        break;
      }
      await sleep(downtime);
      w = await restartServer({ ...serve, port });
      live.servers.add(w);
      serverUp = true;
      readyAt = Date.now();
      entry.downMs = readyAt - killedAt;
      log(
        `kill ${k + 1}: workerd ${pids.join(",")} SIGKILLed at ${before}/${totalSteps} steps, ${entry.upMs} ms after it was up; ` +
          `back on port ${port} after ${entry.downMs} ms`,
      );
    }
    const lastRestartAt = readyAt;
    // Wait for every run to finish (or the deadline).
    const deadline = lastRestartAt + timeoutMs;
    const runs = new Map();
    for (;;) {
      for (const p of plan) {
        if (runs.has(p.runId)) continue;
        try {
          const r = await app.run(p.runId);
          if (r.status !== "pending" && r.status !== "running") runs.set(p.runId, r);
        } catch {
          // the server is down (sabotage) or busy: ask again
        }
      }
      if (runs.size === plan.length || Date.now() > deadline) break;
      await watchStall(await progress().catch(() => lastDone), kills);
      await sleep(250);
    }
    // Results, events, executions.
    const failures = [];
    let correct = 0;
    let lastCompletedAt = 0;
    let within30s = 0; // completed no later than 30 s after the last restart
    const events = [];
    for (const p of plan) {
      const r = runs.get(p.runId);
      if (!r) {
        let status = "unknown (server down)";
        try {
          status = (await app.run(p.runId)).status;
        } catch {
          // down
        }
        failures.push({ ...describe(p), problem: `not finished ${Math.round(timeoutMs / 1000)} s after the last restart (status ${status})` });
      } else if (r.status !== "completed") {
        // The app logs the error that failed a run; the client's transport error (the World
        // unreachable) is one the runtime does not take for a World error (see chaos.mjs).
        const transport = new RegExp(`Error while running workflow\\s+FleetTransportError\\s+run\\s+${p.runId}`).test(app.log());
        failures.push({
          ...describe(p),
          problem: `${r.status}: ${JSON.stringify(r.error)?.slice(0, 300)}${transport ? " — the app logged FleetTransportError for it (the client's transport error, which the runtime took for the workflow's own)" : ""}`,
        });
      } else {
        lastCompletedAt = Math.max(lastCompletedAt, ms(r.completedAt));
        if (ms(r.completedAt) <= lastRestartAt + 30_000) within30s += 1;
        const out = await app.output(p.runId);
        if (isDeepStrictEqual(out, p.expected)) correct += 1;
        else failures.push({ ...describe(p), problem: `wrong output ${JSON.stringify(out)?.slice(0, 120)} (expected ${JSON.stringify(p.expected).slice(0, 120)})` });
      }
      if (serverUp) {
        try {
          const readAt = Date.now();
          events.push({ runId: p.runId, events: await app.events(p.runId), readAt });
        } catch (err) {
          failures.push({ ...describe(p), problem: `events unreadable: ${err.message}` });
        }
      }
    }
    // Unfinished runs on ours: what the queue holds and does, to tell a stuck queue from a
    // stuck app.
    let queue;
    if (runs.size < plan.length && serverKind === "ours" && serverUp) queue = await queueDiagnosis(w, app.port, vars).catch((err) => ({ error: String(err) }));
    const executions = await app.executions();
    const trace = await app.trace();
    const cls = classify({ runs: events, executions, trace });
    // Deliveries, per message: the attempt numbers the World sent (x-vqs-message-attempt).
    // The runtime takes attempt 1 for the first delivery of a message. A message comes again
    // under the same number after a 503 with timeoutSeconds (not an attempt); after anything
    // else (here: a delivery cut off by the kill) the number should have moved on.
    const deliveries = new Map();
    for (const e of trace) {
      if (e.kind !== "delivery" || !e.messageId || !mine.has(e.runId)) continue;
      if (!deliveries.has(e.messageId)) deliveries.set(e.messageId, { messageId: e.messageId, runId: e.runId, attempts: [], statuses: [] });
      const d = deliveries.get(e.messageId);
      d.repeated ||= d.attempts.some((a, i) => a === e.attempt && d.statuses[i] !== 503);
      d.attempts.push(e.attempt);
      d.statuses.push(e.status);
    }
    const repeatedAttempts = [...deliveries.values()].filter((d) => d.repeated);
    const name = new Map(plan.map((p) => [p.runId, `${p.workflow}#${p.index}`]));
    for (const list of [cls.reExecutions, cls.violations, cls.lostCompletions]) for (const x of list) x.workflow = name.get(x.runId);
    const killsDone = killLog.length;
    const killedWhileRunning = killsDone > 0 && (runs.size < plan.length || lastCompletedAt > killLog.at(-1).killedAt);
    const ok =
      failures.length === 0 &&
      cls.violations.length === 0 &&
      cls.lostCompletions.length === 0 &&
      killsDone === kills &&
      (kills === 0 || killedWhileRunning);
    trialOk = ok;
    return {
      ok,
      server: serverKind,
      client,
      seed,
      workflows: plan.length,
      steps: totalSteps,
      correct,
      failures,
      kills: killLog,
      killsAsked: kills,
      lastRestartAt,
      afterLastRestartMs: runs.size === plan.length ? Math.max(0, lastCompletedAt - lastRestartAt) : null,
      within30s,
      /** Whether some workflow was still running when the last kill came (so it mattered). */
      killedWhileRunning,
      reExecutions: cls.reExecutions,
      violations: cls.violations,
      lostCompletions: cls.lostCompletions,
      repeatedAttempts,
      executions: executions.filter((x) => name.has(x.runId)).length,
      wallMs: Date.now() - started,
      appLog: failures.length ? app.log().slice(-3000) : undefined,
      queue,
      stalls,
      openRequests: failures.length
        ? trace.filter((e) => e.kind === "request" && e.end === 0).slice(-10).map((e) => `${e.path} ${e.method ?? ""} ${e.eventType ?? ""} ${e.runId ?? ""} open since ${at(e.start)}`)
        : undefined,
      lastDeliveries: failures.length ? trace.filter((e) => e.kind === "delivery").slice(-8).map((e) => `${e.status ?? "—"} ${e.end > 0 ? Math.round(e.end - e.start) : "open"} ms ${e.messageId ?? ""} attempt ${e.attempt ?? "?"}`) : undefined,
    };
  } finally {
    if (app) {
      await app.stop().catch(() => {});
      live.apps.delete(app);
    }
    if (w) {
      await withTimeout(w.dispose(), 10_000);
      live.servers.delete(w);
    }
    // CHAOS_KEEP_FAILED=1 keeps a failed trial's persisted state to read afterwards.
    if (process.env.CHAOS_KEEP_FAILED && !trialOk) console.log(`  persisted state kept: ${persistDir}`);
    else rmSync(persistDir, { recursive: true, force: true });
  }
}

// The queue objects' alarms as a kill left them, read from the persisted state (workerd's
// SQLite files: each object's own `_cf_METADATA` alarm and the scheduler's `_cf_ALARM` row),
// for the objects holding claims: "<id>: <claims> claims, stored <ms from the kill>,
// scheduled <ms>" ("none": no alarm), and with `--var CELLD_TRACE_ALARMS=1` its last alarm
// writes and handler runs (src/shell/entry.mjs `traceAlarms`). Diagnosis only: needs python3.
const ALARMS_PY = String.raw`
import sqlite3, glob, json, os, sys
d, at = sys.argv[1], int(sys.argv[2])
rows = {}
try:
    for r in sqlite3.connect(os.path.join(d, "metadata.sqlite")).execute("select actor_id, scheduled_time from _cf_ALARM"):
        rows[r[0]] = r[1]
except Exception:
    pass
out = []
for f in sorted(glob.glob(os.path.join(d, "*.sqlite"))):
    actor = os.path.basename(f)[:-7]
    if actor == "metadata":
        continue
    c = sqlite3.connect(f)
    try:
        n = c.execute("select count(*) from _cf_KV where key like 'inflight%'").fetchone()[0]
    except sqlite3.OperationalError:
        continue  # an object that stored nothing yet
    if n == 0:
        continue
    local = c.execute("select value from _cf_METADATA where key = 1").fetchone()
    rel = lambda ns: "none" if ns is None else str(ns // 1000000 - at)
    line = f"{actor[:8]}: {n} claims, stored {rel(local[0] if local else None)}, scheduled {rel(rows.get(actor))}"
    trace = c.execute("select value from _cf_KV where key = 'diag:alarms'").fetchone()
    if trace:
        text = bytes(trace[0]).decode("latin-1")
        for t, what in json.loads(text[text.index("["):text.rindex("]") + 1])[-10:]:
            line += f"\n        {t - at} ms: {what}"
    out.append(line)
print("; ".join(out) or "no claims")
`;
function queueAlarms(persistDir, killedAt) {
  const dir = readdirSync(persistDir).find((d) => d.endsWith("QueueDO"));
  if (!dir) return "none";
  try {
    return execFileSync("python3", ["-c", ALARMS_PY, join(persistDir, dir), String(killedAt)], { encoding: "utf8", timeout: 10_000 }).trim();
  } catch (e) {
    return `unread (${String(e.message).split("\n")[0]})`;
  }
}

/** The queue shard of our worker `w`: its stats and the delivery counters of its partitions (summed) and of their couriers that deliver. */
async function queueDiagnosis(w, appPort, vars) {
  const stats = await rpc({ url: w.url, secret: w.secret }, "queue", SHARD, "stats", []);
  // Plain copies: Miniflare's proxies die with the server.
  const counters = JSON.parse(JSON.stringify(await gateStats(w, vars)));
  const couriers = Object.entries(counters)
    .filter(([name, c]) => isCourier(name) && (c.direct > 0 || c.busyConnections > 0 || c.looping))
    .map(([name, c]) => ({ name, direct: c.direct, busy: c.busyConnections, held: c.held, oldestHeldMs: c.oldestHeldMs, looping: c.looping, bornAgoMs: c.bornAgoMs, isolateAgoMs: c.isolateAgoMs }));
  // More than one of this process's workerd alive means a killed one survived beside its
  // restart (two servers on one persisted state): the harness's fault, not the World's.
  const workerd = workerdPids().filter((pid) => isDescendant(pid));
  return { stats, shard: partitionsTotal(counters), couriers, workerd, served: w.pids(), toApp: socketsTo(appPort) };
}

/**
 * The TCP connections to the app's port, by state, with the bytes queued on them: tells a
 * delivery the app never received (bytes waiting in a send queue, or no connection) from
 * one it holds (`ss`, when the machine has it).
 */
function socketsTo(port) {
  try {
    const out = execFileSync("ss", ["-tnH", "state", "all", "dport", "=", `:${port}`], { encoding: "utf8" });
    const byState = {};
    for (const line of out.trim().split("\n").filter(Boolean)) {
      const [state, recvQ, sendQ] = line.trim().split(/\s+/);
      const s = (byState[state] ??= { count: 0, recvQ: 0, sendQ: 0 });
      s.count += 1;
      s.recvQ += Number(recvQ) || 0;
      s.sendQ += Number(sendQ) || 0;
    }
    return byState;
  } catch (err) {
    return { error: String(err.message).slice(0, 120) };
  }
}

function describe(p) {
  return { runId: p.runId, workflow: `${p.workflow}#${p.index}`, args: p.workflow === "chaosPayload" ? [p.args[0], `${p.args[1]} KB`, p.args[2]] : p.args };
}

/** An epoch-ms instant as the time of day (UTC, to the millisecond), for the trial's lines. */
const at = (v) => (Number.isFinite(v) ? new Date(v).toISOString().slice(11, 23) : "—");

const secs = (v) => (v === null || v === undefined ? "—" : `${(v / 1000).toFixed(1)} s`);

/**
 * Why the re-executed bodies ran again, from the step's requests before them: an earlier
 * step_completed the World never answered (in flight at a kill, or sent while it was down),
 * an earlier step_started it never answered (the runtime ran a body before its start was
 * granted), or neither (a redelivery that came while the first execution could still have
 * recorded its completion).
 */
export function causes(reExecutions) {
  let completion = 0;
  let start = 0;
  for (const x of reExecutions) {
    const lost = (type) => (x.requests || []).some(([t, , , status]) => t === type && !status);
    if (lost("completed")) completion += 1;
    else if (lost("started")) start += 1;
  }
  const other = reExecutions.length - completion - start;
  return reExecutions.length ? `; ${completion} whose earlier completion the World never answered, ${start} whose earlier start it never answered, ${other} other` : "";
}

/** The trial's printed form: one headline and the details that matter. */
export function formatTrial(t, label = "") {
  const lines = [];
  const kills = t.kills.map((k) => `${Math.round(k.atProgress * 100)}%`).join("/");
  const allowed = t.reExecutions.filter((x) => x.allowed).length;
  lines.push(
    `${label}${t.ok ? "PASS" : "FAIL"}  ${t.correct}/${t.workflows} workflows correct; ` +
      `${t.kills.length}/${t.killsAsked} kills (at ${kills || "—"} of ${t.steps} steps, down ${t.kills.map((k) => k.downMs).join("/")} ms); ` +
      `completed ${secs(t.afterLastRestartMs)} after the last restart (${t.within30s}/${t.workflows} within 30 s); ` +
      `${t.reExecutions.length} step bodies re-executed (${allowed} allowed, ${t.reExecutions.length - allowed} after their completion was recorded${causes(t.reExecutions)})` +
      (t.lostCompletions.length ? `; ${t.lostCompletions.length} acknowledged step completions lost` : "") +
      ` [seed ${t.seed}, ${secs(t.wallMs)}]`,
  );
  for (const x of t.reExecutions) {
    const when =
      x.sinceCompletionMs === null
        ? "its step never completed"
        : x.sinceCompletionMs <= 0
          ? `started ${-x.sinceCompletionMs} ms before its completion was recorded`
          : x.grantedBeforeCompletion
            ? `started ${x.sinceCompletionMs} ms after its completion was recorded, under its own step_started granted before it`
            : `started ${x.sinceCompletionMs} ms after its completion was recorded`;
    // Where the first execution stood: the kill after it, and when the World was back.
    const kill = t.kills.find((k) => k.killedAt >= x.firstAt);
    const first = kill ? `; its first ran ${kill.killedAt - x.firstAt} ms before kill ${kill.k}, this one ${x.at - (kill.killedAt + kill.downMs)} ms after the World was back` : "";
    const reqs = x.requests?.length ? `; before it: ${x.requests.map(([t, a, b, st]) => `${t} ${a}..${b} ms → ${st || "no answer"}`).join(", ")}` : "";
    lines.push(`      re-executed: ${x.workflow} ${x.name} ${x.stepId} attempt ${x.attempt}: ${when}${first}${reqs} — ${x.allowed ? "allowed" : "NOT ALLOWED"}`);
  }
  for (const x of t.violations.filter((v) => v.rank === 0)) {
    lines.push(`      ran after completion: ${x.workflow} ${x.name} ${x.stepId} attempt ${x.attempt} (+${x.sinceCompletionMs} ms) — NOT ALLOWED`);
  }
  if (t.repeatedAttempts?.length) {
    const eg = t.repeatedAttempts.slice(0, 3).map((d) => `${d.messageId} attempts ${d.attempts.join(",")}`);
    lines.push(`      ${t.repeatedAttempts.length} messages delivered again under an attempt number already used (${eg.join("; ")})`);
  }
  if (!t.ok) lines.push(`      kills at ${t.kills.map((k) => `${at(k.killedAt)} (up ${k.upMs} ms, back after ${k.downMs} ms; queue alarms ${k.alarms})`).join(", ")}`);
  for (const x of t.lostCompletions) {
    const found = x.completedAt === undefined ? "none in the events" : `the events' one created ${at(x.completedAt)}`;
    lines.push(`      lost: ${x.workflow} ${x.stepId}: step_completed acknowledged at ${at(x.ackAt)}, ${found}`);
  }
  for (const r of t.openRequests ?? []) lines.push(`      the app's World call still open: ${r}`);
  if (!t.ok) for (const x of t.stalls ?? []) lines.push(`      stalled (no new step for ${STALL_MS / 1000} s) at ${x.at}, server life ${x.life}: ${JSON.stringify(x)}`);
  for (const f of t.failures) lines.push(`      ${f.workflow} ${JSON.stringify(f.args)} ${f.runId}: ${f.problem}`);
  if (t.kills.length < t.killsAsked) lines.push(`      only ${t.kills.length} of ${t.killsAsked} kills: the workflows finished first`);
  return lines;
}

/** A stall: no new step ran for this long while the server was up (the chaos diagnosis). */
const STALL_MS = 8000;

/** The machine's load average (to say how busy the shared machine was). */
export function loadAverage() {
  try {
    return readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
  } catch {
    try {
      return execFileSync("uptime", { encoding: "utf8" }).trim();
    } catch {
      return "?";
    }
  }
}

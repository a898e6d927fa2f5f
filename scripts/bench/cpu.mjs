// Mode "cpu": server CPU per operation of the built worker, next to wall-clock figures,
// every figure also as a multiple of one `GET /v1/health` measured in the same run.
//
//   node scripts/bench.mjs cpu [workload…] [--runs N] [--http] [--json out.json]
//                              [--ops N] [--concurrency N] [--build path …] [--floor]
//   node scripts/bench.mjs --compare before.json after.json
//
// One run = a fresh Miniflare worker; its workerd process is found below this Node
// process (proc.mjs); then: a warm-up pass over all workloads, an idle sample, `health`,
// each selected workload, `health` again.
// Every workload is a warm-up (not measured) and then `ops` operations at concurrency 8 —
// 8 lanes, each issuing its operations one after the other, as 8 clients would. The
// workerd's utime+stime is sampled before and after the measured part and divided by the
// operations. "× health" divides by the mean of the two health figures of the same run.
// With --runs N each figure is the median of the N runs (ratios: median of the per-run
// ratios). With several --build paths the builds alternate A B B A … per run; with
// --interleave every build's worker runs at once and each workload alternates between
// the builds in slices, so the machine's drift over minutes hits every build alike.
// Interleaved comparisons also give B/A over the paired slices (slice k of two builds ran
// back to back): the geometric mean of the slice ratios with its 95 % confidence interval
// (`--slices N` per run, default 4), so "within the noise" is a statement, not a guess.
// --floor adds the floor (scripts/bench/floor/index.js) as build A: a hand-written
// JavaScript worker that does each call's platform work (the request, one hop, the same
// storage reads and writes, a JSON answer) and nothing else, so B/A is what a build costs
// beyond the least a call can cost on this workerd. It serves FLOOR_WORKLOADS only.
// Every figure also carries the host's steal over its measured part (proc.mjs): a run
// with more than STEAL_QUIET_PCT % was not on a quiet machine, and the report says so.
// With --interleave, `--max-steal P` measures again (up to STEAL_RETRIES times) a round of
// slices during which the host took more than P % of the machine's CPU, and drops the
// figures of the round it replaced: the comparison is then made of quiet slices.
// With --floor the report ends with issue #8's targets judged by the two proposed rules
// (`judgeTargets`); `--paired-max T` sets rule (a)'s threshold on the paired ratio.

import { createHash } from "node:crypto";
import { execFileSync } from "node:child_process";
import { readFileSync, readdirSync, writeFileSync, existsSync, statSync } from "node:fs";
import http from "node:http";
import os from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { SCRIPT_PATH, startWorker } from "../../tests/lib/harness.mjs";
import { keepAliveAgent, makeRpc } from "../../tests/lib/rpc.mjs";
import { enqueueRequest, startQueueTarget } from "../../tests/lib/queue-target.mjs";
import { ms13, sharedCodec, worldClient } from "../../tests/lib/world-client.mjs";
import { worldClient040 } from "../../tests/lib/world-client-040.mjs";
import { CLK_TCK, cpuDelta, findWorkerd, hostCpu, sampleCpu, stealPct, workerdPids } from "./proc.mjs";
import { pairedRatio, percentile } from "./stats.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The floor worker (see the header) and the workloads it serves. */
export const FLOOR_SCRIPT = join(dirname(fileURLToPath(import.meta.url)), "floor", "index.js");
export const FLOOR_WORKLOADS = ["health", "getRun", "getRunLive", "putOwned", "enqueue", "event", "listEvents", "run0"];
const STEP_INPUT = new Uint8Array(64).fill(7);
const CHUNK_64K = Uint8Array.from({ length: 64 * 1024 }, (_, j) => (j * 7) & 0xff);
const READ_CHUNKS = 64;
/** Events in the `listEvents` workload's run: run_created, run_started, ten step triples. */
const LIST_EVENTS = 32;
const READ_CHUNK_BYTES = 4 * 1024;
const READ_PAGE = 16;

function readChunk(i) {
  const b = new Uint8Array(READ_CHUNK_BYTES);
  for (let j = 0; j < b.length; j++) b[j] = (i * 31 + j) & 0xff;
  return b;
}

function expect(cond, what, got) {
  if (!cond) throw new Error(`${what}: got ${JSON.stringify(got)?.slice(0, 300)}`);
}

/** The event of position k in a lane's run: run_created, run_started, then step triples. */
function laneEvent(k) {
  if (k === 0) return { eventType: "run_created", specVersion: 6, eventData: { deploymentId: "bench", workflowName: "bench", input: STEP_INPUT } };
  if (k === 1) return { eventType: "run_started", specVersion: 6 };
  const step = Math.floor((k - 2) / 3);
  const correlationId = `step_${step}`;
  switch ((k - 2) % 3) {
    case 0:
      return { eventType: "step_created", specVersion: 6, correlationId, eventData: { stepName: "work", input: STEP_INPUT } };
    case 1:
      return { eventType: "step_started", specVersion: 6, correlationId };
    default:
      return { eventType: "step_completed", specVersion: 6, correlationId, eventData: { result: STEP_INPUT } };
  }
}

/** A new run with a `LIST_EVENTS`-event log (created through the client), for the reads of a resume. */
async function runWithLog(ctx, kind) {
  const runId = `wrun_bench_${kind}_${ctx.tag}_${ctx.seq++}`;
  for (let k = 0; k < LIST_EVENTS; k++) {
    const out = await ctx.client.createEvent(runId, laneEvent(k));
    expect(out?.ok === true, `createEvent ${k} on ${runId}`, out);
  }
  return runId;
}

/**
 * Workloads: `ops` measured operations (split over the lanes), `warm` warm-up operations,
 * `lane(ctx, lane, phase)` returns the lane's `op(k)` (k = 0, 1, … within the lane and
 * phase), `setup`/`check` run outside the measured part.
 */
export const CPU_WORKLOADS = {
  health: {
    about: "GET /v1/health (router only): the floor",
    ops: 4000,
    lane: (ctx) => async () => {
      const r = await ctx.get("/v1/health");
      expect(r.status === 200, "health", r);
    },
  },
  getRun: {
    about: "runs.getRun of a missing run (one DO name per lane)",
    ops: 4000,
    lane: (ctx, lane, phase) => {
      const runId = `wrun_bench_missing_${ctx.tag}_${phase}_${lane}`;
      return async () => {
        const out = await ctx.rpc("runs", runId, "getRun", []);
        expect(out?.ok === true && out.value === null, "getRun", out);
      };
    },
  },
  getRunLive: {
    about: "runs.getRun of a started run (the workflow runtime's read of its run on every resume; one run, read by every lane)",
    ops: 4000,
    async setup(ctx) {
      const runId = `wrun_bench_gl_${ctx.tag}_${ctx.seq++}`;
      ctx.state.liveRun = runId;
      for (let k = 0; k < 2; k++) {
        const out = await ctx.client.createEvent(runId, laneEvent(k));
        expect(out?.ok === true, `createEvent ${k} on ${runId}`, out);
      }
    },
    lane: (ctx) => async () => {
      const out = await ctx.rpc("runs", ctx.state.liveRun, "getRun", []);
      expect(out?.ok === true && out.value?.status === "running" && out.value.runId === ctx.state.liveRun, "getRun", out);
    },
  },
  putOwned: {
    about: "index.putOwned of a fresh correlation key (the client's per-event write)",
    ops: 4000,
    lane: (ctx, lane, phase) => {
      const runId = `wrun_bench_po_${ctx.tag}_${phase}_${lane}`;
      const at = ms13(new Date());
      return async (k) => {
        const eventId = `evnt_${String(k + 1).padStart(26, "0")}`;
        const key = `correlation:${encodeURIComponent(`step_${k}`)}:${at}:${eventId}:${runId}`;
        const out = await ctx.rpc("index", "index", "putOwned", [runId, key, JSON.stringify({ runId, eventId })]);
        expect(out?.stored === true, "putOwned", out);
      };
    },
  },
  putOwnedRun: {
    about: "index.putOwned of a run: key (the client's write at every run status change; the facade asks the run's lifecycle status first; runs not created)",
    ops: 2000,
    lane: (ctx, lane, phase) => {
      const runId = `wrun_bench_pr_${ctx.tag}_${phase}_${lane}`;
      const at = ms13(new Date());
      const key = `run:bench:${at}:${runId}`;
      return async (k) => {
        const out = await ctx.rpc("index", "index", "putOwned", [runId, key, JSON.stringify({ runId, createdAt: at, status: k % 2 ? "running" : "pending" })]);
        expect(out?.stored === true, "putOwnedRun", out);
      };
    },
  },
  runKeys: {
    about: "index.putOwned of a live run's run: and runall: keys, alternately (the client's two writes at every run status change; one created run per lane)",
    ops: 2000,
    async setup(ctx) {
      const runs = [];
      // One run per lane at the default concurrency (more lanes share them).
      for (let i = 0; i < 8; i++) {
        const runId = `wrun_bench_rk_${ctx.tag}_${ctx.seq++}`;
        const out = await ctx.rpc("runs", runId, "applyEvent", [{ runId, data: laneEvent(0), cleanup: { retentionMs: 0, queueShards: 1 } }]);
        expect(out?.ok === true, `run_created on ${runId}`, out);
        runs.push(runId);
      }
      ctx.state.keyRuns = runs;
    },
    lane: (ctx, lane) => {
      const runId = ctx.state.keyRuns[lane % ctx.state.keyRuns.length];
      const at = ms13(new Date());
      const keys = [`run:bench:${at}:${runId}`, `runall:${at}:${runId}`];
      return async (k) => {
        const value = JSON.stringify({ runId, createdAt: at, status: k % 4 < 2 ? "pending" : "running" });
        const out = await ctx.rpc("index", "index", "putOwned", [runId, keys[k % 2], value]);
        expect(out?.stored === true, "runKeys", out);
      };
    },
  },
  writeChunk: {
    about: "streams.writeChunk of a 64 KiB Uint8Array (one stream per lane)",
    ops: 2000,
    lane: (ctx, lane, phase) => {
      const runId = `wrun_bench_wc_${ctx.tag}_${phase}_${lane}`;
      const name = `stream:bench-${runId}`;
      return async (k) => {
        const index = await ctx.rpc("streams", name, "writeChunk", [runId, CHUNK_64K]);
        expect(index === k, `writeChunk ${k}`, index);
      };
    },
  },
  enqueue: {
    about: "queue.enqueue of a 256 B message with delaySeconds 3600 (one shard) naming its lane's run, created first (as the client's messages do)",
    ops: 4000,
    lane: (ctx, lane, phase) => enqueueLane(ctx, `wrun_bench_q_${ctx.tag}_${lane}`, phase, lane, true),
    setup: enqueueSetup,
    check: enqueueCheck,
  },
  enqueueMissingRun: {
    about: "queue.enqueue as above, naming a run that does not exist (no lease: the run DO is asked every time)",
    ops: 2000,
    lane: (ctx, lane, phase) => enqueueLane(ctx, `wrun_bench_qm_${ctx.tag}_${lane}`, phase, lane, false),
    setup: enqueueSetup,
    check: enqueueCheck,
  },
  deliver: {
    about: "queue.enqueue of a 256 B message with delaySeconds 0 naming its lane's run, and its delivery (alarm, claim, POST to a local target, settle); one message in flight per lane",
    ops: 1200,
    warm: 80,
    setup: deliverSetup,
    lane: (ctx, lane, phase) => {
      const runId = `wrun_bench_dl_${ctx.tag}_${lane}`;
      return async (k) => {
        if (!ctx.deliverRuns.has(runId)) {
          const out = await ctx.client.createEvent(runId, laneEvent(0));
          expect(out?.ok === true, `run_created ${runId}`, out);
          ctx.deliverRuns.add(runId);
        }
        const id = `msg_bench_dl_${ctx.tag}_${phase}_${lane}_${k}`;
        const target = ctx.deliveryTarget;
        const arrived = new Promise((resolve) => target.waiting.set(id, resolve));
        const req = enqueueRequest(id, target.url, { body: JSON.stringify({ id }).padEnd(256, " "), runId, delaySeconds: 0 });
        const out = await ctx.rpc("queue", DELIVER_SHARD, "enqueue", [req]);
        expect(out?.ok === true && out.messageId === id, "enqueue", out);
        let timer;
        const timeout = new Promise((resolve) => (timer = setTimeout(resolve, 30_000, false)));
        const delivered = await Promise.race([arrived, timeout]);
        clearTimeout(timer);
        target.waiting.delete(id);
        expect(delivered, `delivery of ${id} within 30 s`, id);
        ctx.state.delivered++;
      };
    },
    async check(ctx) {
      // Each delivery is settled right after the target answers: wait for the last ones.
      let stats;
      for (let i = 0; i < 50; i++) {
        stats = await ctx.rpc("queue", DELIVER_SHARD, "stats", []);
        if (stats.pending === 0 && stats.inflight === 0) break;
        await sleep(100);
      }
      expect(stats.pending === 0 && stats.inflight === 0 && stats.deadLetters === 0, "deliver: the shard drained", stats);
      return `${ctx.state.delivered} delivered, shard drained`;
    },
  },
  getChunks: {
    about: `streams.getChunks, a page of ${READ_PAGE} × ${READ_CHUNK_BYTES / 1024} KiB of a closed ${READ_CHUNKS}-chunk stream`,
    ops: 4000,
    async setup(ctx) {
      const runId = `wrun_bench_gc_${ctx.tag}_${ctx.seq++}`;
      ctx.state.stream = `stream:bench-${runId}`;
      for (let i = 0; i < READ_CHUNKS; i++) await ctx.rpc("streams", ctx.state.stream, "writeChunk", [runId, readChunk(i)]);
      await ctx.rpc("streams", ctx.state.stream, "closeStream", [runId]);
    },
    lane: (ctx, lane) => async (k) => {
      const startIndex = ((lane + k) * READ_PAGE) % READ_CHUNKS;
      const page = await ctx.rpc("streams", ctx.state.stream, "getChunks", [{ startIndex, limit: READ_PAGE }]);
      const c = page?.chunks;
      expect(Array.isArray(c) && c.length === READ_PAGE && c[0] instanceof Uint8Array && c[0].length === READ_CHUNK_BYTES && c[0][1] === readChunk(startIndex)[1], "getChunks", page);
    },
  },
  listEvents: {
    about: `runs.listEvents of a run's ${LIST_EVENTS}-event log in one page (the workflow runtime's replay read on every resume of a ${(LIST_EVENTS - 2) / 3}-step run)`,
    ops: 2000,
    async setup(ctx) {
      ctx.state.listRun = await runWithLog(ctx, "le");
    },
    lane: (ctx) => async () => {
      const page = await ctx.rpc("runs", ctx.state.listRun, "listEvents", [{ limit: 100, sortOrder: "asc" }]);
      const data = page?.value?.data;
      expect(page?.ok === true && data?.length === LIST_EVENTS && page.value.hasMore === false && data[LIST_EVENTS - 1].eventId === `evnt_${String(LIST_EVENTS).padStart(26, "0")}`, "listEvents", page);
    },
  },
  resume: {
    about: `runs.applyEvent(run_started) of a running run with a ${LIST_EVENTS}-event log: the flow handler's call on every resume, answered with the run and the whole log (preload); the applyEvent alone, without the client's index writes`,
    ops: 2000,
    async setup(ctx) {
      ctx.state.resumeRun = await runWithLog(ctx, "rs");
    },
    lane: (ctx) => async () => {
      const runId = ctx.state.resumeRun;
      const out = await ctx.rpc("runs", runId, "applyEvent", [{ runId, data: { eventType: "run_started", specVersion: 6 }, cleanup: { retentionMs: 0, queueShards: 1 } }]);
      expect(out?.ok === true && out.run?.status === "running" && out.events?.length === LIST_EVENTS, "run_started preload", out);
    },
  },
  event: {
    about: "real-client event: createEvent (applyEvent + the index writes); 8 runs in parallel, run_created, run_started, step triples",
    ops: 2400,
    warm: 80,
    lane: (ctx, lane, phase) => {
      const runId = `wrun_bench_ev_${ctx.tag}_${phase}_${lane}`;
      ctx.state.runs ??= {};
      (ctx.state.runs[phase] ??= []).push(runId);
      return async (k) => {
        const out = await ctx.client.createEvent(runId, laneEvent(k));
        expect(out?.ok === true, `createEvent ${k} on ${runId}`, out);
        ctx.state.events = (ctx.state.events ?? 0) + 1;
      };
    },
    async check(ctx) {
      // Read back every measured run: dense ids, expected count.
      let verified = 0;
      for (const runId of ctx.state.runs.run) {
        const events = [];
        let cursor;
        for (;;) {
          const page = await ctx.rpc("runs", runId, "listEvents", [{ limit: 1000, cursor, sortOrder: "asc" }]);
          expect(page?.ok === true, `listEvents ${runId}`, page);
          events.push(...page.value.data);
          if (!page.value.hasMore) break;
          cursor = page.value.cursor;
        }
        events.forEach((e, i) => expect(e.eventId === `evnt_${String(i + 1).padStart(26, "0")}`, `${runId} event ${i}`, e.eventId));
        verified += events.length;
      }
      expect(verified === ctx.state.perLane * ctx.state.runs.run.length, "events read back", verified);
      return `${verified} events read back`;
    },
  },
  run0: {
    about: "a workflow run with no steps, as the 0.3 client writes it: createEvent of run_created, run_started, run_completed (each applyEvent, then the run's run: and runall: keys); one run per operation",
    ops: 400,
    warm: 40,
    lane: (ctx, lane, phase) => {
      const events = zeroStepRun();
      return async (k) => {
        const runId = `wrun_bench_r0_${ctx.tag}_${phase}_${lane}_${k}`;
        for (const data of events) {
          const out = await ctx.client.createEvent(runId, data);
          expect(out?.ok === true && out.run?.runId === runId, `${data.eventType} on ${runId}`, out);
        }
      };
    },
  },
  runHook: {
    about: "a workflow run that creates one hook and completes, as the 0.3 client writes it: createEvent of run_created, run_started, hook_created (reserveHookToken, applyEvent, finalizeHookIndexes, the correlation key), run_completed (and deleteHookIndexes of the released hook); one run per operation",
    ops: 300,
    warm: 30,
    lane: (ctx, lane, phase) => {
      return async (k) => {
        const runId = `wrun_bench_rh_${ctx.tag}_${phase}_${lane}_${k}`;
        const { hook, events } = oneHookRun(runId);
        for (const data of events) {
          const out = await ctx.client.createEvent(runId, data);
          expect(out?.ok === true && (data !== hook || out.hook?.hookId === hook.correlationId), `${data.eventType} on ${runId}`, out);
        }
      };
    },
  },
  event040: {
    about: "0.4 client event: world-client-040 createEvent (applyEvent, plus runs/commit when the outcome carries the run); 8 runs in parallel, as event",
    ops: 2400,
    warm: 80,
    lane: (ctx, lane, phase) => {
      const runId = `wrun_bench_e4_${ctx.tag}_${phase}_${lane}`;
      return async (k) => {
        const out = await ctx.client040.createEvent(runId, laneEvent(k));
        // This client sends its own requests: count them here.
        ctx.requests += out?.run ? 2 : 1;
        expect(out?.ok === true, `0.4 createEvent ${k} on ${runId}`, out);
      };
    },
  },
  hookFinalize040: {
    about: "0.4 client hook publication: /v1/index/hooks/reserve then /v1/index/hooks/finalize of a fresh hook of a live run (one run per lane), as the client sends them around a hook_created",
    ops: 2000,
    lane: (ctx, lane, phase) => {
      const runId = `wrun_bench_hf_${ctx.tag}_${phase}_${lane}`;
      let created;
      return async (k) => {
        created ??= createEvent040(ctx, runId, laneEvent(0));
        await created;
        await publishHook040(ctx, benchHook(runId, `_${k}`));
      };
    },
  },
  hookGet040: {
    about: "0.4 client hook read: hooks.getByToken (the token shard's get, which checks the run's lifecycle) of a published hook of a live run (one per lane), as a webhook's resume reads it",
    ops: 4000,
    lane: (ctx, lane, phase) => {
      const runId = `wrun_bench_hg_${ctx.tag}_${phase}_${lane}`;
      const hook = benchHook(runId, "");
      let published;
      const publish = async () => {
        await createEvent040(ctx, runId, laneEvent(0));
        await publishHook040(ctx, hook);
      };
      return async () => {
        published ??= publish();
        await published;
        const found = await ctx.client040.getByToken(hook.token);
        ctx.requests += 1;
        expect(typeof found === "string" && found.includes(hook.hookId), `getByToken ${hook.token}`, found);
      };
    },
  },
  run040: {
    about: "a workflow run with no steps, as the 0.4 client writes it: createEvent of run_created, run_started, run_completed (each applyEvent, then runs/commit); one run per operation",
    ops: 400,
    warm: 40,
    lane: (ctx, lane, phase) => {
      const events = zeroStepRun();
      return async (k) => {
        const runId = `wrun_bench_r4_${ctx.tag}_${phase}_${lane}_${k}`;
        for (const data of events) await createEvent040(ctx, runId, data);
      };
    },
  },
  runHook040: {
    about: "a workflow run that creates one hook and completes, as the 0.4 client writes it: createEvent of run_created, run_started, hook_created (hooks/reserve, applyEvent, hooks/finalize), run_completed (applyEvent, runs/commit); one run per operation",
    ops: 300,
    warm: 30,
    lane: (ctx, lane, phase) => {
      return async (k) => {
        const runId = `wrun_bench_h4_${ctx.tag}_${phase}_${lane}_${k}`;
        const { hook, events } = oneHookRun(runId);
        for (const data of events) {
          const out = await createEvent040(ctx, runId, data);
          expect(data !== hook || out.hook?.hookId === hook.correlationId, `hook_created on ${runId}`, out);
        }
      };
    },
  },
};

/** The events of a workflow run with no steps: created, started, completed. */
function zeroStepRun() {
  return [laneEvent(0), laneEvent(1), { eventType: "run_completed", specVersion: 6, eventData: { output: STEP_INPUT } }];
}

/** The events of a workflow run that creates one hook and completes, and its `hook_created`. */
function oneHookRun(runId) {
  const hook = { eventType: "hook_created", specVersion: 6, correlationId: `hook_${runId}`, eventData: { token: `tok_${runId}` } };
  const [created, started, completed] = zeroStepRun();
  return { hook, events: [created, started, hook, completed] };
}

/** A hook of `runId` as the 0.4 client indexes it (`hook_<runId><suffix>`, `tok_<runId><suffix>`). */
function benchHook(runId, suffix) {
  return { runId, hookId: `hook_${runId}${suffix}`, token: `tok_${runId}${suffix}`, ownerId: "bench", projectId: "bench", environment: "bench", createdAt: new Date(), specVersion: 6 };
}

/** The 0.4 client's `hooks/reserve` and `hooks/finalize` of `hook` (two requests, counted). */
async function publishHook040(ctx, hook) {
  const owner = { runId: hook.runId, hookId: hook.hookId };
  const admission = await ctx.client040.idx("hooks", "reserve", [hook.token, owner]);
  expect(admission?.admitted === true, `hooks/reserve ${hook.token}`, admission);
  const out = await ctx.client040.idx("hooks", "finalize", [hook.token, hook.hookId, sharedCodec(hook), owner, admission.reservation]);
  expect(out === null, `hooks/finalize ${hook.token}`, out);
  ctx.requests += 2;
}

/**
 * One event through the 0.4 client, which sends its own requests: counted here from what
 * it sent (client.md §3): the reservation and the finalize of a hook, the applyEvent, the
 * run's commit when the outcome carries the run, one release for released hooks.
 */
async function createEvent040(ctx, runId, data) {
  const out = await ctx.client040.createEvent(runId, data);
  ctx.requests += 1 + (out?.run ? 1 : 0) + (data.eventType === "hook_created" ? 2 : 0) + (out?.releasedHooks?.length ? 1 : 0);
  expect(out?.ok === true, `0.4 ${data.eventType} on ${runId}`, out);
  return out;
}

/** One enqueue lane: 256 B delayed messages naming `runId` (created first when `create`). */
function enqueueLane(ctx, runId, phase, lane, create) {
  return async (k) => {
    if (create && !ctx.state.created.has(runId)) {
      const out = await ctx.client.createEvent(runId, laneEvent(0));
      expect(out?.ok === true, `run_created ${runId}`, out);
      ctx.state.created.add(runId);
    }
    const id = `msg_bench_${ctx.tag}_${runId}_${phase}_${lane}_${k}`;
    const req = enqueueRequest(id, "http://127.0.0.1:9", {
      body: JSON.stringify({ id }).padEnd(256, " "),
      runId,
      delaySeconds: 3600,
    });
    const out = await ctx.rpc("queue", "q:0", "enqueue", [req]);
    expect(out?.ok === true && out.messageId === id, "enqueue", out);
    ctx.state.enqueued++;
  };
}

/** The queue shard of the `deliver` workload (apart from the delayed messages of `enqueue`). */
const DELIVER_SHARD = "q:deliver";

/** One delivery target per context (closed with the worker), answering 200 at once. */
async function deliverSetup(ctx) {
  ctx.deliverRuns ??= new Set();
  ctx.state.delivered = 0;
  if (!ctx.deliveryTarget) {
    const waiting = new Map();
    const target = await startQueueTarget((d) => {
      waiting.get(d.id)?.(true);
      return { status: 200 };
    });
    target.deliveries.length = 0;
    ctx.deliveryTarget = Object.assign(target, { waiting });
    ctx.cleanups.push(() => target.close());
  }
}

async function enqueueSetup(ctx) {
  ctx.state.pendingBefore = (await ctx.rpc("queue", "q:0", "stats", [])).pending;
  ctx.state.enqueued = 0;
  ctx.state.created = new Set();
}

async function enqueueCheck(ctx) {
  const stats = await ctx.rpc("queue", "q:0", "stats", []);
  const want = ctx.state.pendingBefore + ctx.state.enqueued;
  expect(stats.pending === want && stats.deadLetters === 0, `queue stats: want ${want} pending (${ctx.state.enqueued} delayed messages enqueued)`, stats);
  return `${stats.pending} pending`;
}

/** GET over the chosen transport (the same one the RPCs use). */
function makeGet(url, agent) {
  if (!agent) {
    return async (path) => {
      const res = await fetch(new URL(path, url));
      return { status: res.status, text: await res.text() };
    };
  }
  const u = new URL(url);
  return (path) =>
    new Promise((resolve, reject) => {
      const req = http.request({ host: u.hostname, port: u.port, path, method: "GET", agent }, (res) => {
        const chunks = [];
        res.on("data", (c) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode, text: Buffer.concat(chunks).toString("utf8") }));
        res.on("error", reject);
      });
      req.on("error", reject);
      req.end();
    });
}

/** Runs `perLane` operations on each of `lanes` lanes; returns per-op latencies (ms). */
export async function drive(ctx, workload, lanes, perLane, phase) {
  const latencies = [];
  await Promise.all(
    Array.from({ length: lanes }, async (_, lane) => {
      const op = workload.lane(ctx, lane, phase);
      for (let k = 0; k < perLane; k++) {
        const t0 = performance.now();
        await op(k);
        latencies.push(performance.now() - t0);
      }
    }),
  );
  return latencies;
}

/** Operations per lane of a workload's measured part and of its warm-up. */
function laneSizes(w, opsOverride, concurrency) {
  const ops = opsOverride ?? w.ops;
  return {
    perLane: Math.max(1, Math.round(ops / concurrency)),
    warmPerLane: Math.max(1, Math.round((w.warm ?? Math.max(200, ops / 10)) / concurrency)),
  };
}

async function measure(ctx, name, { opsOverride, concurrency }) {
  const w = CPU_WORKLOADS[name];
  ctx.state = {};
  const { perLane, warmPerLane } = laneSizes(w, opsOverride, concurrency);
  if (w.setup) await w.setup(ctx);
  await drive(ctx, w, concurrency, warmPerLane, "warm");
  await sleep(100);
  ctx.requests = 0;
  ctx.state.perLane = perLane;
  const a = sampleCpu(ctx.proc);
  const latencies = await drive(ctx, w, concurrency, perLane, "run");
  const b = sampleCpu(ctx.proc);
  const requests = ctx.requests;
  const d = cpuDelta(a, b);
  const note = w.check ? await w.check(ctx) : "";
  return workloadFigures(latencies, d, requests, note);
}

/** A workload's figures from its latencies, its CPU delta (`cpuDelta`) and request count. */
function workloadFigures(latencies, d, requests, note) {
  const n = latencies.length;
  latencies.sort((x, y) => x - y);
  return {
    ops: n,
    requestsPerOp: requests / n,
    cpuMsPerOp: d.ms / n,
    userCpuMsPerOp: d.userMs / n,
    sysCpuMsPerOp: d.sysMs / n,
    cpuTicks: d.ticks,
    threadCpuMsPerOp: d.threadMs / n,
    opsPerS: n / (d.wallMs / 1000),
    stealPct: d.hostTotal > 0 ? (100 * d.hostSteal) / d.hostTotal : NaN,
    p50: percentile(latencies, 50),
    p95: percentile(latencies, 95),
    p99: percentile(latencies, 99),
    wallS: d.wallMs / 1000,
    note,
  };
}

/** The context the workloads run in, against a started worker (requests counted). */
export function workloadContext(worker, proc, agent) {
  const rpc = makeRpc({ url: worker.url, secret: worker.secret, agent });
  // `cleanups`: what a workload's setup started that lives as long as the worker.
  const ctx = { proc, tag: Date.now().toString(36), seq: 0, requests: 0, state: {}, cleanups: [] };
  const counted = (...a) => (ctx.requests++, rpc(...a));
  counted.raw = (...a) => (ctx.requests++, rpc.raw(...a));
  const get = makeGet(worker.url, agent);
  ctx.rpc = counted;
  ctx.get = (path) => (ctx.requests++, get(path));
  ctx.client = worldClient(counted);
  ctx.client040 = worldClient040({ url: worker.url, secret: worker.secret });
  return ctx;
}

/**
 * A worker for the benchmarks, in a deployment's steady state: the archive migration's cron
 * step has run once (a deployment runs it within ten minutes of its first deploy; on an
 * empty archive one step finishes it), so the 0.3 facade no longer reads the pre-upgrade
 * archive through (hook reservations and releases would otherwise make three more calls).
 * The floor has no cron; its trigger's failure is ignored.
 */
export async function startBenchWorker(scriptPath, extra = {}) {
  const worker = await startWorker({ vars: { WORLD_SECRET: "bench-secret" }, scriptPath, transport: "fetch", unsafeTriggerHandlers: true, ...extra });
  const res = await fetch(new URL(`/cdn-cgi/handler/scheduled?cron=${encodeURIComponent("*/10 * * * *")}`, worker.url));
  await res.arrayBuffer();
  return worker;
}

/** One run: a fresh worker, health, the workloads, health again. */
async function oneRun(build, names, opts) {
  const before = workerdPids();
  const worker = await startBenchWorker(build.script);
  const agent = opts.transport === "http" ? keepAliveAgent() : undefined;
  let ctx;
  try {
    const proc = findWorkerd(before);
    ctx = workloadContext(worker, proc, agent);
    // One warm-up pass over every workload first (the wasm and V8's JIT tier up in
    // background threads whose CPU would otherwise land on the first workloads), then the
    // runtime's idle CPU, so that background work still going on would show.
    for (const name of ["health", ...names]) {
      ctx.state = {};
      const w = CPU_WORKLOADS[name];
      if (w.setup) await w.setup(ctx);
      await drive(ctx, w, opts.concurrency, Math.max(1, Math.round((w.warm ?? 200) / opts.concurrency)), "prewarm");
    }
    await sleep(300);
    const i0 = sampleCpu(proc);
    await sleep(1000);
    const idle = cpuDelta(i0, sampleCpu(proc));
    const h0 = hostCpu();
    const results = {};
    const order = ["health", ...names.filter((n) => n !== "health"), "health"];
    for (let i = 0; i < order.length; i++) {
      const key = i === order.length - 1 ? "health (again)" : order[i];
      results[key] = await measure(ctx, order[i], opts);
      if (opts.verbose) console.error(`  ${build.label}: ${key} ${results[key].cpuMsPerOp.toFixed(3)} ms/op, ${results[key].opsPerS.toFixed(0)} ops/s`);
    }
    const health = (results.health.cpuMsPerOp + results["health (again)"].cpuMsPerOp) / 2;
    for (const r of Object.values(results)) r.xHealth = r.cpuMsPerOp / health;
    return { workerd: { pid: proc.pid, ppid: proc.ppid }, idleCpuMsPerS: idle.ms / (idle.wallMs / 1000), healthMs: health, loadavg: os.loadavg(), stealPct: stealPct(h0, hostCpu()), workloads: results };
  } finally {
    for (const close of ctx?.cleanups ?? []) await close();
    agent?.destroy();
    await worker.dispose();
  }
}

const median = (xs) => {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (!s.length) return NaN;
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

function summarize(runs) {
  const out = { healthMs: median(runs.map((r) => r.healthMs)), stealPct: median(runs.map((r) => r.stealPct)), workloads: {} };
  for (const key of Object.keys(runs[0].workloads)) {
    const rs = runs.map((r) => r.workloads[key]);
    const m = {};
    for (const f of ["ops", "requestsPerOp", "cpuMsPerOp", "userCpuMsPerOp", "sysCpuMsPerOp", "threadCpuMsPerOp", "xHealth", "opsPerS", "stealPct", "p50", "p95", "p99"]) m[f] = median(rs.map((r) => r[f]));
    m.xHealthMin = Math.min(...rs.map((r) => r.xHealth));
    m.xHealthMax = Math.max(...rs.map((r) => r.xHealth));
    // Interleaved runs only: every slice of every run, in run order.
    if (rs.every((r) => r.slices)) m.slices = rs.flatMap((r) => r.slices);
    out.workloads[key] = m;
  }
  return out;
}

function buildInfo(path) {
  let script = resolve(path);
  if (existsSync(script) && statSync(script).isDirectory()) script = join(script, "index.js");
  if (!existsSync(script)) throw new Error(`${script} is missing: run \`npm run build\` first`);
  const dir = dirname(script);
  const hash = createHash("sha256");
  for (const f of readdirSync(dir).filter((f) => f.endsWith(".wasm")).sort()) hash.update(readFileSync(join(dir, f)));
  hash.update(readFileSync(script));
  let commit = null;
  try {
    commit = execFileSync("git", ["-C", dir, "rev-parse", "--short", "HEAD"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
    if (execFileSync("git", ["-C", dir, "status", "--porcelain", "--", "src", "Cargo.toml", "Cargo.lock"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim()) commit += "+dirty";
  } catch {
    // not in a git tree
  }
  return { script, commit, buildSha256: hash.digest("hex").slice(0, 16), builtAt: statSync(script).mtime.toISOString() };
}

/** Host steal (% of this machine's CPU time, `proc.mjs`) above which a run was not on a quiet machine. */
export const STEAL_QUIET_PCT = 2;
/** With --max-steal: how many times one round of slices is measured again before it is kept anyway. */
const STEAL_RETRIES = 3;

const f = (x, d = 2) => (Number.isFinite(x) ? x.toFixed(d) : "-");

function table(header, rows) {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const line = (cells) => "| " + cells.map((c, i) => (i === 0 ? String(c).padEnd(widths[i]) : String(c).padStart(widths[i]))).join(" | ") + " |";
  return [line(header), "|" + widths.map((w, i) => (i === 0 ? "-".repeat(w + 1) + "-" : "-".repeat(w + 1) + ":")).join("|") + "|", ...rows.map(line)].join("\n");
}

export function formatBuild(b, nRuns) {
  const s = b.summary;
  const rows = Object.entries(s.workloads).map(([name, m]) => [
    name,
    m.ops,
    f(m.requestsPerOp, 2),
    f(m.cpuMsPerOp, 3),
    nRuns > 1 ? `${f(m.xHealth)} (${f(m.xHealthMin)}–${f(m.xHealthMax)})` : f(m.xHealth),
    f(m.opsPerS, 0),
    `${f(m.p50, 1)} / ${f(m.p95, 1)} / ${f(m.p99, 1)}`,
    f(m.stealPct, 1),
  ]);
  return table(["workload", "ops", "req/op", "server CPU ms/op", nRuns > 1 ? "× health (min–max)" : "× health", "ops/s", "p50 / p95 / p99 ms", "host steal %"], rows);
}

/**
 * B/A of one figure over the paired slices of two interleaved builds (slice k of each ran
 * next to each other in time): the geometric mean of the slices' ratios and its 95 %
 * confidence interval, `null` when the builds were not measured slice by slice.
 */
export function sliceRatio(x, y, field) {
  if (!x.slices || !y.slices || x.slices.length !== y.slices.length || x.slices.length < 2) return null;
  return pairedRatio(
    x.slices.map((s) => s[field]),
    y.slices.map((s) => s[field]),
  );
}

/**
 * The figure the paired CPU ratio is taken on: the threads' schedstat nanoseconds
 * (`threadCpuMsPerOp`) when every slice of both builds has them, else the ticks
 * (`cpuMsPerOp`, files written before slices carried both). A slice's ticks are off by up
 * to two (proc.mjs), which on a short slice is more than the differences worth measuring.
 */
export function sliceCpuField(x, y) {
  const exact = (w) => w.slices?.length && w.slices.every((s) => Number.isFinite(s.threadCpuMsPerOp) && s.threadCpuMsPerOp > 0);
  return exact(x) && exact(y) ? "threadCpuMsPerOp" : "cpuMsPerOp";
}

const ci = (r) => (r ? `${f(r.ratio)} (${f(r.low)}–${f(r.high)})` : "-");

/**
 * The A → B table. `paired`: A and B are builds of one interleaved run, so their slices
 * pair up (never for builds from two separate files, whose slices did not run together).
 */
export function formatCompare(a, b, la = "A", lb = "B", paired = true) {
  const names = Object.keys(a.summary.workloads).filter((n) => n in b.summary.workloads);
  let pairs = 0;
  let exactPairs = false;
  const rows = names.map((n) => {
    const x = a.summary.workloads[n];
    const y = b.summary.workloads[n];
    // The user share (utime), without the kernel's storage writeback: see proc.mjs.
    const user = Number.isFinite(x.userCpuMsPerOp) ? `${f(x.userCpuMsPerOp, 3)} → ${f(y.userCpuMsPerOp, 3)} (${f(y.userCpuMsPerOp / x.userCpuMsPerOp)})` : "-";
    const cpu = paired ? sliceRatio(x, y, sliceCpuField(x, y)) : null;
    if (cpu) {
      pairs = cpu.n;
      exactPairs = sliceCpuField(x, y) === "threadCpuMsPerOp";
    }
    const userRatio = paired ? sliceRatio(x, y, "userCpuMsPerOp") : null;
    return [n, `${f(x.cpuMsPerOp, 3)} → ${f(y.cpuMsPerOp, 3)}`, `${f(x.xHealth)} → ${f(y.xHealth)}`, f(y.xHealth / x.xHealth), user, ci(cpu), ci(userRatio), `${f(x.opsPerS, 0)} → ${f(y.opsPerS, 0)}`, `${f(x.p99, 1)} → ${f(y.p99, 1)}`];
  });
  const header = ["workload", "CPU ms/op", "× health", "B/A (× health)", "user CPU ms/op (B/A)", "paired B/A CPU (95 % CI)", "paired B/A user CPU", "ops/s", "p99 ms"];
  const lines = [`${la} → ${lb}`, table(header, rows)];
  if (pairs) lines.push(`# paired: ${pairs} slice pairs per workload (interleaved; each pair ran back to back), geometric mean of B/A and its 95 % interval (t on the logarithms); an interval that contains 1.00 is no difference at this confidence. CPU: ${exactPairs ? "the threads' run time (schedstat, ns)" : "utime+stime (clock ticks)"}; user CPU: utime (clock ticks)`);
  return lines.join("\n");
}

/** Issue #8's targets, in multiples of a `GET /v1/health` of the same run. */
export const ISSUE8_TARGETS = { getRun: 1.6, putOwned: 2.5, writeChunk: 4.5, enqueue: 2.5, event: 5 };

/**
 * Issue #8's targets judged by the two rules proposed to the people steering (README,
 * "Judging the targets"), from a comparison whose build A is the floor and B this worker:
 *
 * (a) the paired ratio to the floor (its upper 95 % bound) at most `pairedMax` for each
 *     call, when `pairedMax` is given (the threshold is theirs to set);
 * (b) the issue's multiples of health, counted only in a set where the floor meets every
 *     target measured: a floor over a target measured the machine, not the worker.
 *
 * Returns `{ rows, setCounts, floorOver }`, one row per targeted call measured by both:
 * `{ call, target, floor, ours, floorMeets, oursMeets, paired, pairedMeets }` (`paired` the
 * `sliceRatio` or null; `pairedMeets` null without a threshold or an interval).
 */
export function judgeTargets(floor, ours, pairedMax) {
  const rows = [];
  for (const [call, target] of Object.entries(ISSUE8_TARGETS)) {
    const x = floor.summary.workloads[call];
    const y = ours.summary.workloads[call];
    if (!x || !y) continue;
    const paired = sliceRatio(x, y, sliceCpuField(x, y));
    rows.push({
      call,
      target,
      floor: x.xHealth,
      ours: y.xHealth,
      floorMeets: x.xHealth <= target,
      oursMeets: y.xHealth <= target,
      paired,
      pairedMeets: paired && pairedMax !== undefined ? paired.high <= pairedMax : null,
    });
  }
  const floorOver = rows.filter((r) => !r.floorMeets).map((r) => r.call);
  return { rows, setCounts: rows.length > 0 && floorOver.length === 0, floorOver };
}

/** `judgeTargets` as the report prints it. */
export function formatJudgement(j, pairedMax) {
  const yes = (b) => (b ? "meets" : "misses");
  const rows = j.rows.map((r) => [
    r.call,
    `≤ ${f(r.target, 1)}`,
    `${f(r.floor)} (${yes(r.floorMeets)})`,
    `${f(r.ours)} (${yes(r.oursMeets)})`,
    j.setCounts ? yes(r.oursMeets) : "the set does not count",
    r.paired ? `${f(r.paired.ratio)} (≤ ${f(r.paired.high)})` : "-",
    r.pairedMeets === null ? "-" : yes(r.pairedMeets),
  ]);
  const lines = [
    "Issue #8's targets, × health (medians of the runs)",
    table(["call", "target", "floor", "this worker", "rule (b)", "paired / floor (upper 95 %)", pairedMax === undefined ? "rule (a): no --paired-max" : `rule (a): upper ≤ ${f(pairedMax)}`], rows),
    j.setCounts
      ? "# rule (b): the floor meets every target measured, so this set counts"
      : `# rule (b): the floor itself is over the target of ${j.floorOver.join(", ")}: this set measured the machine, and does not count`,
  ];
  return lines.join("\n");
}

/**
 * `--interleave`: every build's worker runs at once, and each workload is measured in
 * `SLICES` slices per build, alternating builds slice by slice (A B B A …), so drift of
 * the machine over minutes lands on every build alike. Returns one run per build, shaped
 * like `oneRun`'s. `builds`: `{ label, script }`; `opts`: `concurrency`, `slices`,
 * `opsOverride`, `transport`, `maxSteal`, `verbose` (and `hostCpu`, for a test).
 */
const SLICES = 4;
export async function interleavedRun(builds, names, opts) {
  const slices = opts.slices ?? SLICES;
  // The machine's counters for --max-steal's rounds (replaceable by a test).
  const roundHostCpu = opts.hostCpu ?? hostCpu;
  const started = [];
  try {
    for (const b of builds) {
      const before = workerdPids();
      const worker = await startBenchWorker(b.script);
      const agent = opts.transport === "http" ? keepAliveAgent() : undefined;
      started.push({ b, worker, agent, ctx: workloadContext(worker, findWorkerd(before), agent) });
    }
    for (const s of started) {
      for (const name of ["health", ...names]) {
        s.ctx.state = {};
        const w = CPU_WORKLOADS[name];
        if (w.setup) await w.setup(s.ctx);
        await drive(s.ctx, w, opts.concurrency, Math.max(1, Math.round((w.warm ?? 200) / opts.concurrency)), "prewarm");
      }
    }
    await sleep(300);
    const idle = started.map((s) => sampleCpu(s.ctx.proc));
    await sleep(1000);
    const idleDelta = started.map((s, i) => cpuDelta(idle[i], sampleCpu(s.ctx.proc)));
    const h0 = hostCpu();
    const results = started.map(() => ({}));
    const order = ["health", ...names.filter((n) => n !== "health"), "health"];
    for (let i = 0; i < order.length; i++) {
      const key = i === order.length - 1 ? "health (again)" : order[i];
      const w = CPU_WORKLOADS[order[i]];
      const { perLane, warmPerLane } = laneSizes(w, opts.opsOverride, opts.concurrency);
      const acc = [];
      for (const s of started) {
        const ctx = s.ctx;
        ctx.state = {};
        if (w.setup) await w.setup(ctx);
        await drive(ctx, w, opts.concurrency, warmPerLane, "warm");
        ctx.state.perLane = perLane;
        // `ms`, `userMs`, `sysMs`, `threadMs`, `wallMs`, `ticks`: the slices' summed `cpuDelta`.
        // `slices`: each slice's own figures per operation, for the paired comparison of
        // builds (`formatCompare`): slice k of two builds ran next to each other in time.
        acc.push({ lanes: Array.from({ length: opts.concurrency }, (_, lane) => w.lane(ctx, lane, "run")), latencies: [], slices: [], ms: 0, userMs: 0, sysMs: 0, threadMs: 0, wallMs: 0, ticks: 0, hostSteal: 0, hostTotal: 0, requests: 0, done: 0 });
      }
      await sleep(100);
      let redone = 0;
      for (let slice = 0; slice < slices; slice++) {
        const idx = started.map((_, j) => j);
        if (slice % 2) idx.reverse();
        const count = Math.floor((perLane * (slice + 1)) / slices) - Math.floor((perLane * slice) / slices);
        // One round: slice `slice` of every build, back to back. With --max-steal, a round
        // during which the host took more than that share of the machine's CPU is measured
        // again (its operations done, its figures dropped), at most STEAL_RETRIES times.
        for (let attempt = 0; ; attempt++) {
          const h = roundHostCpu();
          const round = [];
          for (const j of idx) {
            const { ctx } = started[j];
            const a = acc[j];
            ctx.requests = 0;
            const latencies = [];
            const c0 = sampleCpu(ctx.proc);
            await Promise.all(
              a.lanes.map(async (op) => {
                for (let k = a.done; k < a.done + count; k++) {
                  const t0 = performance.now();
                  await op(k);
                  latencies.push(performance.now() - t0);
                }
              }),
            );
            round.push({ j, d: cpuDelta(c0, sampleCpu(ctx.proc)), latencies, requests: ctx.requests });
            a.done += count;
            await sleep(50);
          }
          const steal = stealPct(h, roundHostCpu());
          if (opts.maxSteal !== undefined && steal > opts.maxSteal && attempt < STEAL_RETRIES) {
            redone++;
            if (opts.verbose) console.error(`  ${order[i]} slice ${slice + 1}: host steal ${f(steal, 1)} %, measured again`);
            continue;
          }
          for (const { j, d, latencies, requests } of round) {
            const a = acc[j];
            const sliceOps = count * a.lanes.length;
            a.slices.push({ cpuMsPerOp: d.ms / sliceOps, userCpuMsPerOp: d.userMs / sliceOps, threadCpuMsPerOp: d.threadMs / sliceOps, stealPct: steal });
            a.latencies.push(...latencies);
            a.ms += d.ms;
            a.userMs += d.userMs;
            a.sysMs += d.sysMs;
            a.threadMs += d.threadMs;
            a.wallMs += d.wallMs;
            a.ticks += d.ticks;
            a.hostSteal += d.hostSteal;
            a.hostTotal += d.hostTotal;
            a.requests += requests;
          }
          break;
        }
      }
      // A workload's check counts every operation done, the dropped rounds' included.
      for (const [j, s] of started.entries()) s.ctx.state.perLane = acc[j].done;
      for (let j = 0; j < started.length; j++) {
        const a = acc[j];
        const note = w.check ? await w.check(started[j].ctx) : "";
        results[j][key] = { ...workloadFigures(a.latencies, a, a.requests, note), slices: a.slices, redoneSlices: redone };
      }
    }
    const steal = stealPct(h0, hostCpu());
    return started.map((s, j) => {
      const r = results[j];
      const health = (r.health.cpuMsPerOp + r["health (again)"].cpuMsPerOp) / 2;
      for (const x of Object.values(r)) x.xHealth = x.cpuMsPerOp / health;
      const idleMs = idleDelta[j];
      return { workerd: { pid: s.ctx.proc.pid, ppid: s.ctx.proc.ppid }, idleCpuMsPerS: idleMs.ms / (idleMs.wallMs / 1000), healthMs: health, loadavg: os.loadavg(), stealPct: steal, workloads: r };
    });
  } finally {
    for (const s of started) {
      for (const close of s.ctx.cleanups) await close();
      s.agent?.destroy();
      await s.worker.dispose();
    }
  }
}

export async function cpuMode(names, opts) {
  for (const n of names) if (!(n in CPU_WORKLOADS)) throw new Error(`unknown cpu workload ${n} (have: ${Object.keys(CPU_WORKLOADS).join(", ")})`);
  names = [...new Set(names)].filter((n) => n !== "health");
  if (opts.maxSteal !== undefined && !opts.interleave) throw new Error("--max-steal measures rounds of slices again: it needs --interleave");
  if (opts.pairedMax !== undefined && !opts.floor) throw new Error("--paired-max judges the paired ratio to the floor: it needs --floor");
  if (opts.floor) {
    const unserved = names.filter((n) => !FLOOR_WORKLOADS.includes(n));
    if (unserved.length) throw new Error(`--floor serves ${FLOOR_WORKLOADS.join(", ")} only, not ${unserved.join(", ")}`);
    if (!names.length) names = FLOOR_WORKLOADS.filter((n) => n !== "health");
  }
  if (!names.length) names = Object.keys(CPU_WORKLOADS).filter((n) => n !== "health");
  const paths = [...(opts.floor ? [FLOOR_SCRIPT] : []), ...(opts.builds.length ? opts.builds : [SCRIPT_PATH])];
  const builds = paths.map((p, i) => ({ label: String.fromCharCode(65 + i), ...buildInfo(p), runs: [] }));
  const transportName = opts.transport === "http" ? "node:http keep-alive" : "fetch (undici)";
  console.log(`# cpu: transport ${transportName}, concurrency ${opts.concurrency}, ${opts.runs} run(s), CLK_TCK ${CLK_TCK}, ${os.cpus().length} CPUs, load ${os.loadavg().map((x) => x.toFixed(2)).join(" ")}`);
  for (const b of builds) console.log(`# build ${b.label}: ${b.script} (commit ${b.commit ?? "?"}, sha256 ${b.buildSha256}, built ${b.builtAt})`);
  if (opts.interleave) console.log(`# interleaved: every build's worker at once, each workload in ${opts.slices ?? SLICES} slices per build, builds alternating slice by slice`);
  for (let r = 0; r < opts.runs; r++) {
    const order = r % 2 === 0 ? builds : [...builds].reverse();
    const together = opts.interleave ? await interleavedRun(order, names, opts) : null;
    for (const [i, b] of order.entries()) {
      const run = together ? together[i] : await oneRun(b, names, opts);
      b.runs.push(run);
      console.log(`# run ${r + 1}/${opts.runs} build ${b.label}: workerd pid ${run.workerd.pid}, idle ${f(run.idleCpuMsPerS, 1)} ms CPU/s, health ${f(run.healthMs, 3)} ms/op (${f(run.workloads.health.cpuMsPerOp, 3)} then ${f(run.workloads["health (again)"].cpuMsPerOp, 3)}), load ${run.loadavg[0].toFixed(2)}, host steal ${f(run.stealPct, 1)} %`);
      const checks = Object.entries(run.workloads).filter(([, m]) => m.note).map(([k, m]) => `${k} ${m.note}`);
      if (checks.length) console.log(`#   checked: ${checks.join("; ")}`);
    }
  }
  for (const b of builds) {
    b.summary = summarize(b.runs);
    console.log(`\n## build ${b.label}${opts.runs > 1 ? ` (medians of ${opts.runs} runs)` : ""}: health = ${f(b.summary.healthMs, 3)} ms server CPU per request`);
    console.log(formatBuild(b, opts.runs));
  }
  if (builds.length > 1) for (const b of builds.slice(1)) console.log("\n" + formatCompare(builds[0], b, builds[0].label, b.label));
  if (opts.floor && builds.length > 1) console.log("\n" + formatJudgement(judgeTargets(builds[0], builds[1], opts.pairedMax), opts.pairedMax));
  for (const b of builds) for (const [k, m] of Object.entries(b.summary.workloads)) if (m.xHealthMax / m.xHealthMin > 1.25) console.log(`# note: build ${b.label} ${k}: × health varies ${f(m.xHealthMin)}–${f(m.xHealthMax)} across runs (noisy machine?)`);
  if (opts.maxSteal !== undefined && builds[0].runs.length) {
    const redone = builds[0].runs.flatMap((r) => Object.entries(r.workloads).filter(([, m]) => m.redoneSlices > 0).map(([k, m]) => `${k} ${m.redoneSlices}`));
    const kept = builds[0].runs.flatMap((r) => Object.values(r.workloads).flatMap((m) => (m.slices ?? []).map((x) => x.stealPct))).filter((x) => x > opts.maxSteal);
    console.log(`# --max-steal ${opts.maxSteal}: rounds of slices measured again for host steal above it: ${redone.length ? redone.join(", ") : "none"}; kept over it after ${STEAL_RETRIES} tries: ${kept.length}`);
  }
  const steals = builds.flatMap((b) => b.runs.map((r) => r.stealPct)).filter(Number.isFinite);
  if (steals.length && Math.max(...steals) > STEAL_QUIET_PCT)
    console.log(`# note: the host took ${f(Math.min(...steals), 1)}–${f(Math.max(...steals), 1)} % of this machine's CPU time during the runs (steal, /proc/stat): not a quiet machine (≤ ${STEAL_QUIET_PCT} %); × health and CPU figures of such runs are not comparable with a quiet machine's`);
  const coarse = builds.flatMap((b) => b.runs.flatMap((r) => Object.entries(r.workloads).filter(([, m]) => m.cpuTicks < 100).map(([k, m]) => `${b.label} ${k} (${m.cpuTicks})`)));
  if (coarse.length) console.log(`# note: under 100 clock ticks of CPU (1/${CLK_TCK} s each) in ${[...new Set(coarse)].slice(0, 6).join(", ")}${coarse.length > 6 ? ", …" : ""}: figures are coarse, use more --ops`);
  if (opts.json) {
    const doc = {
      tool: "world-celld-rs npm run bench cpu",
      format: 1,
      date: new Date().toISOString(),
      host: { hostname: os.hostname(), cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model, node: process.version, clkTck: CLK_TCK, loadavgAtEnd: os.loadavg() },
      options: { workloads: names, transport: opts.transport, concurrency: opts.concurrency, runs: opts.runs, ops: opts.opsOverride ?? null },
      workloads: Object.fromEntries(Object.entries(CPU_WORKLOADS).map(([k, w]) => [k, w.about])),
      builds: builds.map(({ label, script, commit, buildSha256, builtAt, runs, summary }) => ({ label, script, commit, buildSha256, builtAt, summary, runs })),
    };
    writeFileSync(opts.json, JSON.stringify(doc, null, 2) + "\n");
    console.log(`# wrote ${opts.json}`);
  }
}

/** --compare a.json b.json: each file's first build (or A and B of one file). */
export function compareFiles(files) {
  const docs = files.map((p) => JSON.parse(readFileSync(p, "utf8")));
  const picks = docs.length === 1 ? docs[0].builds.slice(0, 2).map((b) => [files[0] + ":" + b.label, b]) : docs.map((d, i) => [files[i], d.builds[0]]);
  if (picks.length < 2) throw new Error("--compare needs two JSON files, or one with two builds");
  const [[la, a], [lb, b]] = picks;
  for (const [l, x] of picks) console.log(`# ${l}: ${x.script} (commit ${x.commit ?? "?"}, sha256 ${x.buildSha256}), ${x.runs.length} run(s), health ${f(x.summary.healthMs, 3)} ms`);
  const oa = docs[0].options;
  const ob = docs[docs.length - 1].options;
  if (oa.transport !== ob.transport || oa.concurrency !== ob.concurrency) console.log(`# warning: different options (${oa.transport}/${oa.concurrency} vs ${ob.transport}/${ob.concurrency})`);
  // Slices pair up only within one file's interleaved run.
  console.log(formatCompare(a, b, la, lb, docs.length === 1));
}

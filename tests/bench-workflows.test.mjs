// The workflow bench's plumbing (npm run bench -- workflows; tests/conformance/bench/
// workflows.mjs): one round of noSteps and seq10 through the real 0.3.0 client on both
// servers gives both servers' rows with positive counts; the counting pass counts inside
// both workers (and a step's rows written on ours); a run whose result does not match
// stops the bench; the trace analysis tells the fixed per-run cost from the per-step cost.
// About 40 s.

import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { test } from "node:test";
import { resolveBaseline, wranglerVars } from "../scripts/bench/baseline.mjs";
import { parseWorkflowArgs } from "../scripts/bench/workflows.mjs";
import { analyzeTrace, checkRun, formatReport, pairedOverRounds, runBench, selectWorkloads, serverOrder, traceWorkload } from "./conformance/bench/workflows.mjs";
import { formatWire, runWireBench, WIRE_WORKLOADS } from "./conformance/bench/wire.mjs";
import { ROOT, SCRIPT_PATH } from "./lib/harness.mjs";

const built = existsSync(SCRIPT_PATH);
const quiet = () => {};

test("workflow bench: both servers' rows, positive counts, the counting pass", { skip: !built && "needs npm run build", timeout: 180_000 }, async () => {
  const result = await runBench({ clients: ["0.3"], runs: 1, rounds: 1, workloads: selectWorkloads(["noSteps", "seq10"]), counts: true, log: quiet });
  const c = result.clients["0.3"];
  for (const name of ["noSteps", "seq10"]) {
    for (const kind of ["ours", "reference"]) {
      const s = c.workloads[name][kind];
      assert.equal(s.n, 1, `${name} ${kind} runs`);
      assert.ok(s.medianMs > 0, `${name} ${kind} median ${s.medianMs}`);
      assert.ok(s.requests > 0 && s.deliveries >= 1, `${name} ${kind} requests ${s.requests} deliveries ${s.deliveries}`);
      assert.ok(s.cpuMsPerRun > 0, `${name} ${kind} cpu ${s.cpuMsPerRun}`);
      const k = c.counts[name][kind];
      assert.ok(k.objectCalls > 0 && k.rowsWritten > 0 && k.rowsRead > 0, `${name} ${kind} counts ${JSON.stringify(k)}`);
    }
  }
  // A sequential run does more than a run without steps, on both servers.
  assert.ok(c.workloads.seq10.ours.requests > c.workloads.noSteps.ours.requests);
  assert.ok(c.counts.seq10.reference.objectCalls > c.counts.noSteps.reference.objectCalls);
  // What ten sequential steps write on ours: three events, the step record twice and its
  // creation index entry each, 6 rows a step (no event-counter row per event; the
  // reference writes 13 a step through this client).
  // A run's own rows on ours: its first message is claimed in its enqueue (no `due:` entry
  // written and deleted, no run reference rewritten: 23 rows before).
  assert.ok(c.counts.noSteps.ours.rowsWritten <= 20, `ours wrote ${c.counts.noSteps.ours.rowsWritten} rows for a run without steps`);
  const stepRows = (kind) => c.counts.seq10[kind].rowsWritten - c.counts.noSteps[kind].rowsWritten;
  assert.ok(stepRows("ours") <= 60, `ours wrote ${stepRows("ours")} rows for 10 steps`);
  assert.ok(stepRows("ours") < stepRows("reference"), `ours ${stepRows("ours")}, reference ${stepRows("reference")}`);
  const report = formatReport(result);
  assert.match(report, /\| noSteps +\| \d+ \/ \d+ /);
  assert.match(report, /\| seq10 +\| \d+ \/ \d+ /);
  assert.match(report, /geometric mean of the median ratio over 2 workloads/);
  assert.match(report, /load average/);
});

test("workflow bench: a run with the wrong result stops the bench", { skip: !built && "needs npm run build", timeout: 120_000 }, async () => {
  // The checker is the bench's own, fed a corrupted expectation for noSteps.
  const corrupted = (app, w, runId) => checkRun(app, { ...w, expect: w.name === "noSteps" ? 43 : w.expect }, runId);
  await assert.rejects(
    runBench({ clients: ["0.3"], runs: 1, rounds: 1, workloads: selectWorkloads(["noSteps"]), warmup: false, check: corrupted, log: quiet }),
    /noSteps: run wrun_\w+ returned 42, expected 43/,
  );
});

test("workflow bench: options", () => {
  const o = parseWorkflowArgs(["--client", "0.4", "--runs", "2", "--rounds", "1", "--only", "seq10,par10", "--no-counts"]);
  assert.deepEqual([o.clients, o.runs, o.rounds, o.only, o.counts], [["0.4"], 2, 1, ["seq10", "par10"], false]);
  assert.deepEqual(parseWorkflowArgs([]).clients, ["0.3", "0.4"]);
  assert.throws(() => parseWorkflowArgs(["--only", "seq11"]), /unknown workload seq11/);
  assert.throws(() => parseWorkflowArgs(["--client", "0.5"]), /--client/);
  assert.throws(() => parseWorkflowArgs(["--runs", "0"]), /positive integer/);
  assert.deepEqual(parseWorkflowArgs([]).oursVars, {}, "both workers in their default configuration");
  assert.deepEqual(parseWorkflowArgs(["--var", "WORKFLOW_CORRELATION_INDEX=off", "--var", "A=b=c"]).oursVars, { WORKFLOW_CORRELATION_INDEX: "off", A: "b=c" });
  assert.throws(() => parseWorkflowArgs(["--var", "=x"]), /NAME=VALUE/);
  assert.equal(parseWorkflowArgs(["--baseline", "9a66e42"]).baseline, "9a66e42");
  assert.throws(() => parseWorkflowArgs(["--baseline"]), /needs a value/);
});

test("workflow bench: server order — two alternate, three take every place alike", () => {
  assert.deepEqual([0, 1, 2].map((r) => serverOrder(["ours", "reference"], r, 0)), [["ours", "reference"], ["reference", "ours"], ["ours", "reference"]]);
  const kinds = ["ours", "reference", "baseline"];
  const places = Object.fromEntries(kinds.map((k) => [k, [0, 0, 0]]));
  for (let wi = 0; wi < 6; wi++) serverOrder(kinds, 0, wi).forEach((k, i) => places[k][i]++);
  for (const k of kinds) assert.deepEqual(places[k], [2, 2, 2], `${k} in each place twice over 6 workloads`);
  assert.deepEqual(serverOrder(kinds, 1, 2), serverOrder(kinds, 0, 3), "the next round starts one further on");
});

test("workflow bench: ours / another server paired round by round", () => {
  const w = (ours, other) => ({ ours: { roundMediansMs: ours }, baseline: { roundMediansMs: other }, reference: { roundMediansMs: other.map((x) => x * 2) } });
  // Ours 10 % slower in every round of two workloads, whatever the rounds' drift.
  const p = pairedOverRounds({ a: w([110, 220, 330], [100, 200, 300]), b: w([55, 44], [50, 40]) }, "baseline");
  assert.equal(p.n, 5);
  assert.ok(Math.abs(p.ratio - 1.1) < 1e-9 && Math.abs(p.low - 1.1) < 1e-9 && Math.abs(p.high - 1.1) < 1e-9, JSON.stringify(p));
  assert.ok(Math.abs(pairedOverRounds({ a: w([110, 220], [100, 200]) }, "reference").ratio - 0.55) < 1e-9);
  // Noisy pairs: an interval around the mean; one pair gives none.
  const q = pairedOverRounds({ a: w([100, 120, 90, 110], [100, 100, 100, 100]) }, "baseline");
  assert.ok(q.low < q.ratio && q.ratio < q.high && q.low < 1 && q.high > 1, JSON.stringify(q));
  assert.ok(Number.isNaN(pairedOverRounds({ a: w([1], [1]) }, "baseline").low));
  assert.equal(pairedOverRounds({ a: { ours: { roundMediansMs: [1, 2] } } }, "baseline").n, 0, "no baseline side");
});

test("workflow bench: a baseline's variables are its wrangler.toml's [vars], secrets left out", () => {
  const toml = '[vars]\nWORLD_SECRET = ""\nQUEUE_MAX_INFLIGHT = "5" # fixed\n# QUEUE_MIN_INFLIGHT = "9"\nA_B = "x=y"\n\n[triggers]\ncrons = ["*/10 * * * *"]\n';
  assert.deepEqual(wranglerVars(toml), { QUEUE_MAX_INFLIGHT: "5", A_B: "x=y" });
  assert.deepEqual(wranglerVars('name = "w"\n'), {});
  const here = resolveBaseline(ROOT);
  assert.equal(here.script, SCRIPT_PATH);
  assert.deepEqual(here.vars, wranglerVars(readFileSync(`${ROOT}/wrangler.toml`, "utf8")));
  assert.equal(here.vars.QUEUE_MAX_INFLIGHT, "128", "this checkout's ceiling");
  assert.throws(() => resolveBaseline("no-such-revision-anywhere"), /neither a checkout directory .* nor a git revision/);
});

test("workflow bench: a baseline build runs beside ours and the reference", { skip: !built && "needs npm run build", timeout: 180_000 }, async () => {
  const baseline = { label: "this build, fixed at 5", script: SCRIPT_PATH, vars: { QUEUE_MAX_INFLIGHT: "5", QUEUE_MIN_INFLIGHT: "5" }, commit: null };
  const result = await runBench({ clients: ["0.3"], runs: 1, rounds: 1, workloads: selectWorkloads(["noSteps"]), baseline, log: quiet });
  const s = result.clients["0.3"].workloads.noSteps;
  for (const kind of ["ours", "reference", "baseline"]) assert.ok(s[kind].n === 1 && s[kind].medianMs > 0 && s[kind].cpuMsPerRun > 0, `${kind} ${JSON.stringify(s[kind])}`);
  const report = formatReport(result);
  assert.match(report, /# baseline: this build, fixed at 5, .*QUEUE_MAX_INFLIGHT=5/);
  assert.match(report, /\| ours\/baseline \|/);
  assert.match(report, /against the baseline: geometric mean of ours\/baseline \*\*\d+\.\d\d\*\*/);
});

test("trace analysis: start, end and steady steps", () => {
  // A synthetic seq-like run: start requests, a delivery, 6 steps of 3 requests, the end.
  const trace = [];
  let t = 0;
  const req = (label, eventType, ms, gap = 1) => {
    const [binding, method] = label.split(".");
    trace.push({ kind: "request", path: `/v1/rpc/${binding}/wrun_X/${method}`, eventType, start: t, end: t + ms, status: 200, runId: "wrun_X" });
    t += ms + gap;
  };
  req("runs.applyEvent", "run_created", 5);
  req("queue.enqueue", undefined, 3);
  const delivery = { kind: "delivery", path: "/.well-known/workflow/v1/flow", start: t + 2, end: 0, status: 200 };
  trace.push(delivery);
  t += 2;
  req("runs.applyEvent", "run_started", 4);
  for (let k = 0; k < 6; k++) {
    req("runs.applyEvent", "step_started", 2);
    req("runs.applyEvent", "step_completed", 2);
    req("runs.listEvents", undefined, 1, 3);
  }
  req("runs.applyEvent", "run_completed", 2);
  delivery.end = t;
  const a = analyzeTrace({ trace, ms: 100 });
  assert.equal(a.requests, 22);
  assert.equal(a.deliveries, 1);
  assert.equal(a.startToDeliveryMs, 12);
  assert.deepEqual(a.startRequests, ["runs.applyEvent(run_created)", "queue.enqueue"]);
  assert.equal(a.stepEvent, "step_started");
  assert.equal(a.steps.length, 5);
  assert.equal(a.steady.n, 3);
  assert.equal(a.steady.ms, 10); // 2+1 + 2+1 + 1+3
  assert.equal(a.steady.reqMs, 5);
  assert.equal(a.steady.runtimeMs, 5);
  assert.deepEqual(a.steady.requests.map((r) => r.label), ["runs.applyEvent(step_started)", "runs.applyEvent(step_completed)", "runs.listEvents"]);
  assert.equal(a.lastStepToDoneMs, 1 + 1 + 3 + 2);
});

test("a steady sequential step reads no event log on ours: the runtime resumes from the last page's cursor", { skip: !built && "needs npm run build", timeout: 240_000 }, async () => {
  // Through the real clients and runtime 5.0.0-beta.42. With the cursor of the last event
  // on every event page, the runtime keeps its log current from its writes' answers; with
  // the reference's null on the last page it lists the run's whole log after each step.
  const [seq10] = selectWorkloads(["seq10"]);
  const want = {
    "0.3": {
      ours: ["runs.applyEvent(step_started)", "index.putOwned", "runs.applyEvent(step_completed)", "index.putOwned"],
      reference: ["runs.applyEvent(step_started)", "index.putOwned", "runs.applyEvent(step_completed)", "index.putOwned", "runs.listEvents"],
    },
    "0.4": {
      ours: ["runs.applyEvent(step_started)", "runs.applyEvent(step_completed)"],
      reference: ["runs.applyEvent(step_started)", "runs.applyEvent(step_completed)", "runs.listEvents"],
    },
  };
  for (const client of ["0.3", "0.4"]) {
    const t = await traceWorkload({ client, workload: seq10, runs: 1, log: quiet });
    for (const kind of ["ours", "reference"]) {
      const a = analyzeTrace(t.sides[kind][0]);
      const labels = new Set(a.steps.slice(1, -1).map((st) => st.requests.join(" → ")));
      assert.deepEqual([...labels], [want[client][kind].join(" → ")], `${client} ${kind}: every steady step's requests`);
    }
  }
});

test("0.4 wire bench: the real 0.4.0 client against both servers, every figure positive", { skip: !built && "needs npm run build", timeout: 240_000 }, async () => {
  const bench = await runWireBench({ rounds: 1, scale: "small", log: quiet });
  for (const w of WIRE_WORKLOADS) {
    for (const kind of ["ours", "reference"]) {
      const [r] = bench.results[w][kind];
      if (w === "events") assert.ok(r.events === 4 * (3 + 3 * 2) && r.perSecond > 0 && r.p99 >= r.p50, `${w} ${kind} ${JSON.stringify(r)}`);
      else assert.ok(r.mib === 4 && r.writeMiBps > 0 && r.readMiBps > 0, `${w} ${kind} ${JSON.stringify(r)}`);
    }
  }
  const report = formatWire(bench);
  assert.match(report, /\| events\/s \| \d+ \| \d+ \| [\d.]+ \|/);
  assert.match(report, /\| stream read MiB\/s, after 32-chunk writes \| [\d.]+ \| [\d.]+ \| [\d.]+ \|/);
});

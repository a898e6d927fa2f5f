// npm run bench -- workflows: the Workflow DevKit's standard benchmark workloads through
// the real world-celld clients and the Workflow runtime, against our worker and the
// TypeScript reference worker, alternating, on the same workerd (tests/conformance/bench/
// workflows.mjs has the how and what).
//
//   npm run bench -- workflows [--client 0.3|0.4|both] [--runs N] [--rounds R]
//        [--only noSteps,seq10,…] [--profile beta42|beta55] [--no-counts] [--json out.json]
//        [--baseline REV]
//   npm run bench -- workflows --trace seq10 [--client 0.3|0.4|both] [--runs N] [--json out.json] [--baseline REV]
//
//   --runs N      runs of each workload on each server per round (default 3)
//   --rounds R    rounds; each round runs every workload on both servers, the order of
//                 the two servers alternating from workload to workload and round to round
//                 (default 3)
//   --var K=V     set variable K of our worker to V (repeatable; e.g.
//                 WORKFLOW_CORRELATION_INDEX=off); the reference keeps its defaults
//   --baseline REV  also run another build of ours beside them, in the same rounds (a git
//                 revision, checked out and built once under target/baselines/, or a built
//                 checkout's directory; scripts/bench/baseline.mjs): per workload ours/baseline,
//                 its geometric mean and server CPU — "no worse than before" in one run
//   --no-counts   skip the counting pass (instrumented copies of both workers, one run of
//                 each workload: object calls, storage rows, alarms)
//   --trace W     traced runs of workload W on each server (--runs of them, default 5,
//                 alternating): the requests of the run of median time in order with their
//                 wall times and gaps, and where the runs' time went (medians: the fixed
//                 per-run cost, a steady step's requests and the runtime's own time)
//
// Every run's result is checked; a wrong or failed workflow stops the bench with an error.

import { writeFileSync } from "node:fs";
import {
  formatReport,
  formatTrace,
  runBench,
  selectWorkloads,
  traceWorkload,
} from "../../tests/conformance/bench/workflows.mjs";
import { CLIENTS } from "../../tests/conformance/lib/profile.mjs";
import { clientsArg, flagValue, positiveInt, profileArg, varArg } from "./args.mjs";
import { resolveBaseline } from "./baseline.mjs";

export const DEFAULTS = Object.freeze({ runs: 3, rounds: 3 });

export function parseWorkflowArgs(argv) {
  const opts = { clients: Object.keys(CLIENTS), ...DEFAULTS, traceRuns: 5, only: null, profile: "beta42", counts: true, json: null, trace: null, oursVars: {}, baseline: null };
  const value = (i, flag) => flagValue(argv, i, flag);
  const int = positiveInt;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--client") opts.clients = clientsArg(value(i++, a));
    else if (a === "--runs") opts.runs = opts.traceRuns = int(value(i++, a), a);
    else if (a === "--rounds") opts.rounds = int(value(i++, a), a);
    else if (a === "--only") opts.only = value(i++, a).split(",").filter(Boolean);
    else if (a === "--profile") opts.profile = profileArg(value(i++, a));
    else if (a === "--no-counts") opts.counts = false;
    else if (a === "--json") opts.json = value(i++, a);
    else if (a === "--trace") opts.trace = value(i++, a);
    else if (a === "--var") varArg(value(i++, a), opts.oursVars);
    else if (a === "--baseline") opts.baseline = value(i++, a);
    else throw new Error(`unknown option ${a}`);
  }
  selectWorkloads(opts.only); // throws on an unknown name
  if (opts.trace) selectWorkloads([opts.trace]);
  return opts;
}

/** Runs the command; returns the exit code. */
export async function main(argv) {
  let opts;
  try {
    opts = parseWorkflowArgs(argv);
  } catch (err) {
    console.error(`workflows: ${err.message}`);
    console.error(
      "usage: npm run bench -- workflows [--client 0.3|0.4|both] [--runs N] [--rounds R] [--only w1,w2] [--profile beta42|beta55] [--var K=V] [--baseline REV] [--no-counts] [--json out.json]\n" +
        "       npm run bench -- workflows --trace WORKLOAD [--client 0.3|0.4|both] [--runs N] [--profile …] [--var K=V] [--baseline REV] [--json out.json]",
    );
    return 2;
  }
  try {
    const baseline = opts.baseline ? resolveBaseline(opts.baseline) : null;
    if (opts.trace) {
      const [workload] = selectWorkloads([opts.trace]);
      const traces = [];
      for (const client of opts.clients) {
        const t = await traceWorkload({ client, profile: opts.profile, workload, runs: opts.traceRuns, oursVars: opts.oursVars, baseline });
        traces.push(t);
        console.log(formatTrace(t));
        console.log();
      }
      if (opts.json) writeFileSync(opts.json, JSON.stringify(traces, null, 1));
      return 0;
    }
    const result = await runBench({
      baseline,
      clients: opts.clients,
      runs: opts.runs,
      rounds: opts.rounds,
      workloads: selectWorkloads(opts.only),
      profile: opts.profile,
      counts: opts.counts,
      oursVars: opts.oursVars,
    });
    console.log(formatReport(result));
    if (opts.json) writeFileSync(opts.json, JSON.stringify(result, null, 1));
    return 0;
  } catch (err) {
    console.error(`workflows: FAILED: ${err?.stack || err}`);
    return 1;
  }
}

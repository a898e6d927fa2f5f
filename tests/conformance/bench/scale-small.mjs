#!/usr/bin/env node
// The scale bench at small scale, as a test (tests/conformance/bench/scale.mjs; issue #54):
// 40 one-step workflows started together through the real 0.4.0 client and runtime beta42
// on the instrumented worker, with one queue object per client shard (QUEUE_PARTITIONS=1)
// and with the default layout, side by side. Prints one line per check and
// `scale-small: N passed, N failed`; exits 1 when a check failed.
//
//   node tests/conformance/bench/scale-small.mjs [--client 0.3|0.4]
//
// The checks: every run right in both layouts; by default the queue's state spread over at
// least 8 objects (couriers aside) and the busiest of them serving at most a quarter of
// what the one queue object serves per workflow (the full bench, 50 workflows a shape,
// states the figures: docs/performance.md "How far one deployment goes"); no IndexDO
// `index` instantiated by a fresh deployment.

import { checks, clientArg } from "./checks.mjs";
import { ioApp } from "./io.mjs";
import { layoutName, runShape, SHAPES } from "./scale.mjs";

const [client] = clientArg("scale-small.mjs", "0.4");

const WORKFLOWS = 40;
const checked = checks("scale-small");
const check = checked.check;
const shape = SHAPES.find((s) => s.name === "oneStep");
const dir = ioApp("beta42");
const results = {};
for (const layout of [1, null]) {
  const vars = layout === null ? {} : { QUEUE_PARTITIONS: String(layout) };
  try {
    results[layout] = await runShape({ client, profile: "beta42", dir, shape, workflows: WORKFLOWS, vars, layout, cpu: false });
    check(`${layoutName(layout)}: ${WORKFLOWS} one-step workflows completed with their outputs`, true);
  } catch (err) {
    check(`${layoutName(layout)}: ${WORKFLOWS} one-step workflows completed with their outputs`, false, err?.stack || String(err));
  }
}
const one = results[1];
const def = results[null];
if (one && def) {
  const load = (x) => (x?.requestsPerWorkflow ?? 0) + (x?.alarmsPerWorkflow ?? 0);
  const figures = `busiest queue object ${def.busiestQueue?.name} ${load(def.busiestQueue).toFixed(2)} calls per workflow, one queue object ${load(one.busiestQueue).toFixed(2)}`;
  check(`the default layout spreads the queue's state over at least 8 objects (${def.queueInstances})`, def.queueInstances >= 8, JSON.stringify(def.classes.WORKFLOW_QUEUE));
  check(`one queue object serves the whole shard (${one.queueInstances})`, one.queueInstances === 1);
  check("the default layout's busiest queue object serves at most a quarter of the one object's calls", load(def.busiestQueue) > 0 && load(def.busiestQueue) <= load(one.busiestQueue) / 4, figures);
  check("no IndexDO `index` on a fresh deployment, in either layout", !def.classes.WORKFLOW_INDEX && !one.classes.WORKFLOW_INDEX, JSON.stringify(Object.keys(def.classes)));
}
checked.finish();

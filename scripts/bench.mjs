#!/usr/bin/env node
// npm run bench: benchmarks against the built worker (build/index.js) on Miniflare.
//
//   node scripts/bench.mjs                  every workload
//   node scripts/bench.mjs queue events     selected workloads (events, streams, queue, index)
//   node scripts/bench.mjs --fetch ...      drive the worker with fetch instead of
//                                           node:http keep-alive (adds ~1 ms of client
//                                           CPU per request on Node 20)
//
// Each workload gets a fresh worker with the default variables (QUEUE_MAX_INFLIGHT 5,
// QUEUE_MAX_ATTEMPTS 5, ...) and prints its own figures. Needs `npm run build` first.

import { startWorker } from "../tests/lib/harness.mjs";
import { eventsWorkload } from "./bench/events.mjs";
import { indexWorkload } from "./bench/index.mjs";
import { queueWorkload } from "./bench/queue.mjs";
import { streamsWorkload } from "./bench/streams.mjs";

const WORKLOADS = { events: eventsWorkload, streams: streamsWorkload, queue: queueWorkload, index: indexWorkload };

const args = process.argv.slice(2);
const transport = args.includes("--fetch") ? "fetch" : "http";
const wanted = args.filter((a) => a !== "--fetch");
console.log(`# client transport: ${transport === "http" ? "node:http keep-alive" : "fetch"}`);
const unknown = wanted.filter((w) => !(w in WORKLOADS));
if (unknown.length) {
  console.error(`unknown workload(s): ${unknown.join(", ")} (have: ${Object.keys(WORKLOADS).join(", ")})`);
  process.exit(2);
}
let failed = 0;
for (const name of wanted.length ? wanted : Object.keys(WORKLOADS)) {
  const worker = await startWorker({ vars: { WORLD_SECRET: "bench-secret" }, transport });
  try {
    for (const line of await WORKLOADS[name](worker)) console.log(line);
  } catch (err) {
    failed++;
    console.error(`${name}: FAILED: ${err?.stack || err}`);
  } finally {
    await worker.dispose();
  }
}
process.exit(failed ? 1 : 0);

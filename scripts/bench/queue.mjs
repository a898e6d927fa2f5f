// Workload "queue": 1000 messages enqueued with 32 in parallel over 2 shards (FNV-1a of the
// message id, as the client does), 256-byte bodies, delivered to a local HTTP target that
// answers every 20th message once with 503 {timeoutSeconds: 0}. Reports enqueue and
// delivery throughput, delivery latency (enqueue call start → successful delivery
// arrival) and integrity counts (delivered, duplicates, lost, dead letters, drained).
//
// `queueWorkload(worker)` expects a worker started with the default queue variables.
// Standalone: `node scripts/bench/queue.mjs` starts its own Miniflare worker.

import { latencySummary, pool } from "./stats.mjs";
import { enqueueRequest, shardOf, startQueueTarget } from "../../tests/lib/queue-target.mjs";

const MESSAGES = 1000;
const CONCURRENCY = 32;
const SHARDS = 2;
const BODY_BYTES = 256;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function queueWorkload(worker, { messages = MESSAGES } = {}) {
  const tag = Date.now().toString(36);
  const ids = Array.from({ length: messages }, (_, i) => `msg_bench_${tag}_${String(i).padStart(5, "0")}`);
  const index = new Map(ids.map((id, i) => [id, i]));
  const target = await startQueueTarget((d) => {
    const i = index.get(d.id);
    if (i !== undefined && i % 20 === 0 && d.attempt === "1" && d.n === 1) {
      return { status: 503, body: '{"timeoutSeconds":0}', headers: { "retry-after": "0" } };
    }
    return { status: 200 };
  });
  try {
    const enqueuedAt = new Map();
    const started = performance.now();
    const startedWall = Date.now();
    await pool(messages, CONCURRENCY, async (i) => {
      const id = ids[i];
      const body = JSON.stringify({ id }).padEnd(BODY_BYTES, " ");
      enqueuedAt.set(id, Date.now());
      const out = await worker.rpc("queue", `q:${shardOf(id, SHARDS)}`, "enqueue", [
        enqueueRequest(id, target.url, { body, queueShards: SHARDS }),
      ]);
      if (!out || out.ok !== true || out.messageId !== id) throw new Error(`enqueue ${id}: ${JSON.stringify(out)}`);
    });
    const enqueueS = (performance.now() - started) / 1000;
    const enqueueEndWall = Date.now();
    const successes = () => target.deliveries.filter((d) => d.status === 200);
    const allIn = await target.waitUntil(() => new Set(successes().map((d) => d.id)).size >= messages, 300_000);
    const deliveredS = (performance.now() - started) / 1000;
    // Let stragglers (duplicates) show up, then check the cells drained.
    await sleep(500);
    const stats = await Promise.all(Array.from({ length: SHARDS }, (_, s) => worker.rpc("queue", `q:${s}`, "stats", [])));

    const ok = successes();
    const first = new Map();
    const counts = new Map();
    for (const d of ok) {
      counts.set(d.id, (counts.get(d.id) || 0) + 1);
      if (!first.has(d.id)) first.set(d.id, d.at);
    }
    const latencies = [...first].map(([id, at]) => at - enqueuedAt.get(id));
    const plainLatencies = [...first].filter(([id]) => index.get(id) % 20 !== 0).map(([id, at]) => at - enqueuedAt.get(id));
    const duplicates = [...counts.values()].filter((n) => n > 1).length;
    const lost = ids.filter((id) => !counts.has(id)).length;
    const dead = stats.reduce((n, s) => n + s.deadLetters, 0);
    const drained = stats.every((s) => s.pending === 0 && s.inflight === 0);
    const busy = target.deliveries.filter((d) => d.status === 503).length;
    // Delivery rate once the producers are done (no enqueue traffic competing).
    const tail = ok.filter((d) => d.at >= enqueueEndWall);
    const lastAt = Math.max(...ok.map((d) => d.at));
    const drainRate = tail.length > 0 && lastAt > enqueueEndWall ? (tail.length / ((lastAt - enqueueEndWall) / 1000)).toFixed(0) : "n/a";
    const lines = [
      `queue: enqueued ${messages} x ${BODY_BYTES} B over ${SHARDS} shards (concurrency ${CONCURRENCY}) in ${enqueueS.toFixed(2)} s = ${(messages / enqueueS).toFixed(0)} msg/s`,
      `queue: all delivered ${deliveredS.toFixed(2)} s after the first enqueue = ${(messages / deliveredS).toFixed(0)} msg/s end to end; ${tail.length} delivered after the last enqueue at ${drainRate} msg/s`,
      `queue: delivery latency (enqueue → 2xx arrival) ${latencySummary(latencies)}; without the 503 redeliveries ${latencySummary(plainLatencies)}`,
      `queue: integrity: ${first.size}/${messages} delivered, ${duplicates} duplicate successes, ${lost} lost, ${busy} answered 503 once, ${dead} dead letters, drained ${drained}`,
    ];
    if (!allIn || lost > 0 || dead > 0 || !drained) {
      throw new Error(`queue workload failed integrity checks:\n${lines.join("\n")}\nstats ${JSON.stringify(stats)} (started ${startedWall})`);
    }
    return lines;
  } finally {
    await target.close();
  }
}

// Standalone run.
if (import.meta.url === `file://${process.argv[1]}`) {
  const { startWorker } = await import("../../tests/lib/harness.mjs");
  const worker = await startWorker({ vars: { WORLD_SECRET: "bench-secret" } });
  try {
    for (const line of await queueWorkload(worker)) console.log(line);
  } finally {
    await worker.dispose();
  }
}

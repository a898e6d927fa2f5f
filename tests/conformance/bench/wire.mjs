// The 0.4 wire bench (npm run bench -- wire): the real world-celld 0.4.0 client on Node 22
// (wire-driver.mjs) against our worker and the 0.4.0 TypeScript reference, both up at once
// on one workerd binary, alternating workload by workload and round by round: events/s and
// the latency of events.create, and stream MiB/s written and read, one chunk per request
// and 32 per request. Each figure is the median over the rounds, ours / reference.

import { fileURLToPath } from "node:url";
import { median } from "../../../scripts/bench/stats.mjs";
import { ensureProfile, runNode22 } from "../lib/profile.mjs";
import { profileDir, startServer } from "../lib/workers.mjs";

const DRIVER = fileURLToPath(new URL("./wire-driver.mjs", import.meta.url));
export const WIRE_WORKLOADS = ["events", "streams", "streams-batch"];
const SERVERS = ["ours", "reference"];

/** One workload through the driver against `server`: its JSON result. */
async function drive(server, workload, profile, scale) {
  const env = { ...server.env, WIRE_WORKLOAD: workload, WIRE_PROFILE_DIR: profileDir(profile), WIRE_SCALE: scale };
  const { code, out, stdout } = await runNode22(profile, [DRIVER], { env, capture: true });
  if (code !== 0) throw new Error(`wire ${workload} on ${server.server} exited ${code}: ${out.trim().split("\n").slice(-5).join(" | ")}`);
  try {
    return JSON.parse(stdout.trim().split("\n").at(-1));
  } catch {
    throw new Error(`wire ${workload} on ${server.server}: no result (${stdout.slice(-200)})`);
  }
}

/**
 * Runs the bench: `rounds` rounds, each every workload on both servers (the order of the two
 * servers alternating); `scale` "small" for a few runs and chunks (the test), else "full".
 * Returns {rounds, date, results: {workload: {ours: [..], reference: [..]}}}.
 */
export async function runWireBench({ rounds = 3, workloads = WIRE_WORKLOADS, profile = "beta42", scale = "full", log = (m) => console.error(m) } = {}) {
  ensureProfile(profile);
  const servers = {};
  const results = Object.fromEntries(workloads.map((w) => [w, { ours: [], reference: [] }]));
  try {
    for (const kind of SERVERS) servers[kind] = await startServer({ server: kind, client: "0.4", profile });
    log("wire: warm-up (one run of each workload on each server)");
    for (const w of workloads) for (const kind of SERVERS) await drive(servers[kind], w, profile, scale);
    for (let r = 0; r < rounds; r++) {
      log(`wire: round ${r + 1}/${rounds}`);
      for (const [i, w] of workloads.entries()) {
        for (const kind of (r + i) % 2 === 0 ? SERVERS : [...SERVERS].reverse()) results[w][kind].push(await drive(servers[kind], w, profile, scale));
      }
    }
  } finally {
    for (const s of Object.values(servers)) await s.dispose();
  }
  return { rounds, date: new Date().toISOString(), results };
}

/** The printed report: one line per figure, medians over the rounds, ours / reference. */
export function formatWire(bench) {
  const f = (x, d = 1) => x.toFixed(d);
  const lines = [`# 0.4 wire bench ${bench.date.slice(0, 16).replace("T", " ")} UTC: the real 0.4.0 client, ${bench.rounds} round(s), medians, ours / reference`, ""];
  lines.push("| figure | ours | reference | ours/reference |", "| --- | --- | --- | --- |");
  const row = (label, w, key, digits, lowerIsBetter = false) => {
    const r = bench.results[w];
    if (!r) return;
    const a = median(r.ours.map((x) => x[key]));
    const b = median(r.reference.map((x) => x[key]));
    lines.push(`| ${label} | ${f(a, digits)} | ${f(b, digits)} | ${f(a / b, 2)}${lowerIsBetter ? " (lower is better)" : ""} |`);
  };
  row("events/s", "events", "perSecond", 0);
  row("events.create p50 ms", "events", "p50", 1, true);
  row("events.create p99 ms", "events", "p99", 1, true);
  row("stream write MiB/s, 1 chunk per request", "streams", "writeMiBps", 1);
  row("stream read MiB/s, 1 chunk per request", "streams", "readMiBps", 1);
  row("stream write MiB/s, 32 chunks per request", "streams-batch", "writeMiBps", 1);
  row("stream read MiB/s, after 32-chunk writes", "streams-batch", "readMiBps", 1);
  return lines.join("\n");
}

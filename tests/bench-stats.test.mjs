// The statistics behind `bench:cpu --interleave`'s paired comparison (scripts/bench/stats.mjs,
// `sliceRatio` in scripts/bench/cpu.mjs): Student's t quantiles, and the geometric mean of
// paired ratios with its 95 % interval, checked against values worked out by hand.

import { test } from "node:test";
import assert from "node:assert/strict";
import { pairedRatio, t975 } from "../scripts/bench/stats.mjs";
import { formatCompare, formatJudgement, judgeTargets, sliceCpuField, sliceRatio } from "../scripts/bench/cpu.mjs";
import { hostCpu, readStat, sampleCpu, stealPct, threadsDeltaMs } from "../scripts/bench/proc.mjs";

const close = (x, y, eps, what) => assert.ok(Math.abs(x - y) <= eps, `${what}: ${x} vs ${y}`);

test("t975: the table, and the series beyond it within 0.001 of the exact quantiles", () => {
  assert.equal(t975(1), 12.706);
  assert.equal(t975(19), 2.093);
  assert.equal(t975(30), 2.042);
  // Exact values: t(0.975; 40) = 2.0211, t(0.975; 60) = 2.0003, t(0.975; 120) = 1.9799.
  close(t975(40), 2.0211, 0.001, "df 40");
  close(t975(60), 2.0003, 0.001, "df 60");
  close(t975(120), 1.9799, 0.001, "df 120");
  assert.ok(Number.isNaN(t975(0)));
});

test("pairedRatio: a constant ratio has no spread", () => {
  const a = [1, 2, 4, 8];
  const r = pairedRatio(a, a.map((x) => x * 1.1));
  close(r.ratio, 1.1, 1e-12, "ratio");
  close(r.low, 1.1, 1e-12, "low");
  close(r.high, 1.1, 1e-12, "high");
  assert.equal(r.n, 4);
});

test("pairedRatio: the geometric mean and the t interval on the logarithms", () => {
  // Ratios e^0.1, e^-0.1, e^0.3, e^0.1: log mean 0.1, sd sqrt(0.08 / 3), n 4, t 3.182.
  const a = [1, 1, 1, 1];
  const b = [Math.exp(0.1), Math.exp(-0.1), Math.exp(0.3), Math.exp(0.1)];
  const r = pairedRatio(a, b);
  const half = 3.182 * (Math.sqrt(0.08 / 3) / 2);
  close(r.ratio, Math.exp(0.1), 1e-12, "ratio");
  close(r.low, Math.exp(0.1 - half), 1e-12, "low");
  close(r.high, Math.exp(0.1 + half), 1e-12, "high");
  assert.ok(r.low < 1 && r.high > 1, "this spread contains 1: no difference at 95 %");
});

test("pairedRatio: too few pairs, or a non-positive figure, give no interval", () => {
  const one = pairedRatio([2], [3]);
  close(one.ratio, 1.5, 1e-12, "one pair");
  assert.ok(Number.isNaN(one.low) && Number.isNaN(one.high));
  const zero = pairedRatio([1, 0], [1, 1]);
  assert.ok(Number.isNaN(zero.ratio) && Number.isNaN(zero.low));
});

/** A build's summary with one workload of `cpu` ms per operation, and its slices' figures when given. */
function build(cpu, sliceCpus) {
  const slices = sliceCpus?.map((x) => ({ cpuMsPerOp: x, userCpuMsPerOp: x / 2 }));
  const figures = { ops: 8, requestsPerOp: 1, cpuMsPerOp: cpu, userCpuMsPerOp: cpu / 2, xHealth: cpu, opsPerS: 1, p50: 1, p95: 1, p99: 1, ...(slices ? { slices } : {}) };
  return { summary: { healthMs: 1, workloads: { getRun: figures } } };
}

test("formatCompare prints the paired interval only for builds measured slice by slice", () => {
  const a = build(1, [1, 1, 1, 1]);
  const b = build(1.2, [1.2, 1.2, 1.2, 1.2]);
  close(sliceRatio(a.summary.workloads.getRun, b.summary.workloads.getRun, "cpuMsPerOp").ratio, 1.2, 1e-12, "slice ratio");
  const text = formatCompare(a, b);
  assert.match(text, /1\.20 \(1\.20–1\.20\)/);
  assert.match(text, /# paired: 4 slice pairs per workload/);
  // Separate runs (no slices): no paired column figures, no paired line.
  const plain = formatCompare(build(1), build(1.2));
  assert.doesNotMatch(plain, /# paired/);
  assert.equal(sliceRatio(build(1).summary.workloads.getRun, b.summary.workloads.getRun, "cpuMsPerOp"), null);
});

test("formatCompare pairs no slices of builds that did not run together", () => {
  const [one, two] = [build(1, [1, 1]), build(2, [2, 2])];
  // Two separate files' builds (`--compare a.json b.json`): their slices are not pairs.
  assert.doesNotMatch(formatCompare(one, two, "a.json", "b.json", false), /# paired|2\.00 \(/);
  assert.match(formatCompare(one, two), /2\.00 \(2\.00–2\.00\)/);
});

test("host steal: the share of the machine's CPU time the host took between two samples", () => {
  assert.equal(stealPct({ steal: 10, total: 100 }, { steal: 30, total: 200 }), 20);
  assert.ok(Number.isNaN(stealPct({ steal: 5, total: 100 }, { steal: 5, total: 100 })));
  const h = hostCpu();
  assert.ok(Number.isFinite(h.steal) && Number.isFinite(h.total) && h.steal <= h.total);
  if (process.platform === "linux") assert.ok(h.total > 0, "/proc/stat read");
});

test("threads' run time: taken thread by thread, a thread that exits costing only its time since the first sample", () => {
  const ms = (pairs) => ({ byTid: new Map(pairs.map(([tid, ns]) => [String(tid), ns * 1e6])) });
  // Thread 1 ran 2 ms, thread 2 exited (its 50 ms before the first sample are not taken
  // off), thread 3 started and ran 4 ms, thread 4's id came back for a new thread (3 ms).
  const a = ms([[1, 10], [2, 50], [4, 20]]);
  const b = ms([[1, 12], [3, 4], [4, 3]]);
  close(threadsDeltaMs(a, b), 2 + 4 + 3, 1e-9, "per-thread delta");
  // The difference of the sums would have been 19 - 80 = -61 ms.
  assert.equal(threadsDeltaMs({ threadMs: 80 }, { threadMs: 19 }), -61, "without per-thread figures: the sums");
  if (process.platform === "linux") {
    const me = { pid: process.pid, starttime: readStat(process.pid).starttime };
    const s0 = sampleCpu(me);
    let x = 0;
    for (let i = 0; i < 2e7; i++) x += i % 7;
    const s1 = sampleCpu(me);
    assert.ok(x > 0 && s0.byTid.size > 0 && s0.threads === s0.byTid.size, "schedstat read");
    assert.ok(threadsDeltaMs(s0, s1) > 0, "a busy loop shows in the threads' run time");
  }
});

test("the paired CPU ratio is taken on the threads' nanoseconds when every slice has them, else on the ticks", () => {
  const w = (ticks, threads) => ({ slices: ticks.map((t, i) => ({ cpuMsPerOp: t, userCpuMsPerOp: t, ...(threads ? { threadCpuMsPerOp: threads[i] } : {}) })) });
  const a = w([1, 1, 1], [1, 1, 1]);
  const b = w([1.5, 1.5, 1.5], [1.2, 1.2, 1.2]);
  assert.equal(sliceCpuField(a, b), "threadCpuMsPerOp");
  assert.equal(sliceCpuField(a, w([1.5, 1.5, 1.5])), "cpuMsPerOp", "one side without them (an older file)");
  assert.equal(sliceCpuField(a, w([1.5, 1.5, 1.5], [1.2, 0, 1.2])), "cpuMsPerOp", "a slice with none read");
  const summary = (x, cpu) => ({ summary: { healthMs: 1, workloads: { getRun: { ops: 8, requestsPerOp: 1, cpuMsPerOp: cpu, userCpuMsPerOp: cpu, xHealth: cpu, opsPerS: 1, p50: 1, p95: 1, p99: 1, ...x } } } });
  const text = formatCompare(summary(a, 1), summary(b, 1.5));
  assert.match(text, /1\.20 \(1\.20–1\.20\) \| +1\.50 \(1\.50–1\.50\) \|/, "CPU from the threads, user CPU from the ticks");
  assert.match(text, /CPU: the threads' run time \(schedstat, ns\)/);
  const old = formatCompare(summary(w([1, 1, 1]), 1), summary(w([1.5, 1.5, 1.5]), 1.5));
  assert.match(old, /1\.50 \(1\.50–1\.50\) \| +1\.50 \(1\.50–1\.50\) \|/);
  assert.match(old, /CPU: utime\+stime \(clock ticks\)/);
});

test("issue #8's targets: rule (b) counts a set only when the floor meets every target, rule (a) bounds the paired ratio", () => {
  // × health per call, and the same slices for every call.
  const side = (x, slices = [1, 1, 1, 1]) => ({ summary: { workloads: Object.fromEntries(Object.entries(x).map(([k, v]) => [k, { xHealth: v, slices: slices.map((m) => ({ cpuMsPerOp: m, threadCpuMsPerOp: m })) }])) } });
  const floor = side({ getRun: 1.5, putOwned: 2.2, event: 4.6, health: 1 });
  const ours = side({ getRun: 1.62, putOwned: 2.4, event: 4.9, health: 1 }, [1.1, 1, 1.1, 1]);
  const j = judgeTargets(floor, ours, 1.25);
  assert.deepEqual(j.rows.map((r) => r.call), ["getRun", "putOwned", "event"], "targeted calls measured by both, in the issue's order");
  assert.equal(j.setCounts, true);
  assert.deepEqual(j.rows.map((r) => r.oursMeets), [false, true, true]);
  // Ratios 1.1, 1.0, 1.1, 1.0: geometric mean 1.049, upper 95 % bound between 1.1 and 1.25.
  const p = j.rows[0].paired;
  assert.ok(p.high > 1.1 && p.high < 1.25 && j.rows.every((r) => r.pairedMeets === true), `paired ${p.ratio} ≤ ${p.high}`);
  assert.ok(judgeTargets(floor, ours, 1.1).rows.every((r) => r.pairedMeets === false), "a threshold under the upper bound");
  assert.ok(judgeTargets(floor, ours).rows.every((r) => r.pairedMeets === null), "no threshold, no verdict");
  const text = formatJudgement(j, 1.25);
  assert.match(text, /getRun +\| +≤ 1\.6 \| +1\.50 \(meets\) \| +1\.62 \(misses\) \| +misses \|/);
  assert.match(text, /this set counts/);
  // The floor over one target: no call is judged by rule (b) in that set.
  const slow = judgeTargets(side({ getRun: 1.5, putOwned: 2.2, event: 5.1 }), ours, 1.25);
  assert.equal(slow.setCounts, false);
  assert.deepEqual(slow.floorOver, ["event"]);
  assert.match(formatJudgement(slow), /putOwned +\| +≤ 2\.5 \| +2\.20 \(meets\) \| +2\.40 \(meets\) \| the set does not count \|/);
  assert.match(formatJudgement(slow), /over the target of event: this set measured the machine/);
});

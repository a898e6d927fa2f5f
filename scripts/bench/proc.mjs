// Server CPU of the local workerd, read from /proc (Linux only).
//
// Miniflare spawns the `workerd` binary directly (child_process.spawn of the workerd
// package's native executable, or $MINIFLARE_WORKERD_PATH), so the runtime of a worker
// started by this process is a descendant of `process.pid` whose comm is "workerd".
// `workerdPids()` before and `findWorkerd(before)` after starting a worker pick out the
// one new process; its start time (field 22) is recorded so that a later sample notices a
// restarted runtime (or a reused pid) instead of reading an unrelated process.
//
// A sample is the process's utime+stime (fields 14+15 of /proc/<pid>/stat: every thread,
// live or exited, in clock ticks, converted with `getconf CLK_TCK`) and each live
// thread's run time in nanoseconds from /proc/<pid>/task/*/schedstat. The ticks are what
// the figures are (`ms`, `userMs`, `sysMs`), but the kernel truncates each of
// utime and stime to a whole tick (10 ms at CLK_TCK 100), so a delta of a short period is
// off by up to two ticks: 15 % of a slice of 667 health requests on a machine where one
// costs 0.2 ms. The threads' nanoseconds (`threadMs`) are exact for the threads that live
// through the period; a thread that exits in it loses only its time since the first
// sample (the delta is taken thread by thread), one that starts in it counts whole.
//
// Each sample also reads the machine's own counters (the first line of /proc/stat), so a
// delta tells how much of the period this virtual machine's CPUs spent waiting for the
// host ("steal"). On a shared host that share moves from 0 to 40 % within the hour, and a
// guest's CPU time is not the same quantity under it (caches and memory bandwidth are
// shared too): a figure measured under steal is not a quiet machine's.

import { execFileSync } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import { basename } from "node:path";

export const CLK_TCK = (() => {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** Parses /proc/<pid>/stat (the comm field may contain spaces and parentheses). */
export function readStat(pid) {
  const text = readFileSync(`/proc/${pid}/stat`, "utf8");
  const open = text.indexOf("(");
  const close = text.lastIndexOf(")");
  const f = text.slice(close + 2).split(" "); // f[0] is field 3 (state): field n is f[n - 3]
  return {
    pid: Number(pid),
    comm: text.slice(open + 1, close),
    ppid: Number(f[1]),
    utime: Number(f[11]),
    stime: Number(f[12]),
    starttime: Number(f[19]),
  };
}

function allProcesses() {
  const out = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      out.push(readStat(name));
    } catch {
      // exited while listing
    }
  }
  return out;
}

const WORKERD_NAMES = new Set(["workerd"]);
if (process.env.MINIFLARE_WORKERD_PATH) WORKERD_NAMES.add(basename(process.env.MINIFLARE_WORKERD_PATH).slice(0, 15));

/** The workerd processes below this Node process (any depth), as stat records. */
export function workerdDescendants(root = process.pid) {
  const procs = allProcesses();
  const children = new Map();
  for (const p of procs) {
    if (!children.has(p.ppid)) children.set(p.ppid, []);
    children.get(p.ppid).push(p);
  }
  const found = [];
  const queue = [root];
  while (queue.length) {
    for (const c of children.get(queue.shift()) ?? []) {
      if (WORKERD_NAMES.has(c.comm)) found.push(c);
      queue.push(c.pid);
    }
  }
  return found;
}

/** pid:starttime keys of the current workerd descendants (call before starting a worker). */
export function workerdPids() {
  return new Set(workerdDescendants().map((p) => `${p.pid}:${p.starttime}`));
}

/**
 * The workerd process that appeared since `before` (from `workerdPids()`). Throws unless
 * exactly one did, so a figure is never read from the wrong process.
 */
export function findWorkerd(before) {
  const fresh = workerdDescendants().filter((p) => !before.has(`${p.pid}:${p.starttime}`));
  if (fresh.length !== 1) {
    const all = workerdDescendants().map((p) => `${p.pid} (${p.comm}, parent ${p.ppid})`);
    throw new Error(`expected one new workerd process below pid ${process.pid}, found ${fresh.length}; workerd descendants: ${all.join(", ") || "none"}`);
  }
  return { pid: fresh[0].pid, starttime: fresh[0].starttime, ppid: fresh[0].ppid };
}

/** Each live thread's run time (ns, the first field of its schedstat): {ns, threads, byTid}. */
function threadsNs(pid) {
  let ns = 0;
  const byTid = new Map();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const t = Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")[0]);
      if (!Number.isFinite(t)) continue;
      byTid.set(tid, t);
      ns += t;
    } catch {
      // thread exited
    }
  }
  return { ns, threads: byTid.size, byTid };
}

/**
 * The threads' run time between two samples, in ms, thread by thread: a thread of both
 * counts its difference, one only in `b` (started since) its whole time, one only in `a`
 * (exited since) nothing. Without per-thread figures, the difference of the sums.
 */
export function threadsDeltaMs(a, b) {
  if (!a.byTid || !b.byTid) return b.threadMs - a.threadMs;
  let ns = 0;
  for (const [tid, t] of b.byTid) {
    const before = a.byTid.get(tid);
    // A smaller figure than before is a reused id: a new thread, counted whole.
    ns += before !== undefined && before <= t ? t - before : t;
  }
  return ns / 1e6;
}

/** The machine's CPU counters (jiffies, all CPUs): {steal, total}; zeros where unreadable. */
export function hostCpu() {
  try {
    const line = readFileSync("/proc/stat", "utf8").split("\n", 1)[0];
    const f = line.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal guest guest_nice: guest time is
    // already counted in user and nice, so the total is the first eight fields.
    const total = f.slice(0, 8).reduce((a, b) => a + (Number.isFinite(b) ? b : 0), 0);
    return { steal: Number.isFinite(f[7]) ? f[7] : 0, total };
  } catch {
    return { steal: 0, total: 0 };
  }
}

/** The share of the machine's CPU time stolen by the host between two `hostCpu()` samples, in % (NaN if none passed). */
export function stealPct(a, b) {
  const total = b.total - a.total;
  return total > 0 ? (100 * (b.steal - a.steal)) / total : NaN;
}

/**
 * One CPU sample of the process found by findWorkerd: {ticks, ms, userMs, sysMs, threadMs,
 * threads, at}. `userMs` (utime) and `sysMs` (stime) split `ms`: the kernel's share holds
 * the storage's `fsync` and writeback, whose cost follows the host's disk load, so the
 * user share is the steadier figure for comparing builds.
 */
export function sampleCpu(proc) {
  const s = readStat(proc.pid);
  if (s.starttime !== proc.starttime) throw new Error(`workerd pid ${proc.pid} was restarted or reused (start time ${s.starttime}, expected ${proc.starttime})`);
  const t = threadsNs(proc.pid);
  const ticks = s.utime + s.stime;
  const ms = (n) => (n * 1000) / CLK_TCK;
  return { ticks, ms: ms(ticks), userMs: ms(s.utime), sysMs: ms(s.stime), threadMs: t.ns / 1e6, threads: t.threads, byTid: t.byTid, host: hostCpu(), at: performance.now() };
}

/** The difference of two samples: server CPU ms (ticks; user and system), the threads' schedstat ms (`threadsDeltaMs`), the host's steal (%) and wall ms. */
export function cpuDelta(a, b) {
  return {
    ms: b.ms - a.ms,
    userMs: b.userMs - a.userMs,
    sysMs: b.sysMs - a.sysMs,
    ticks: b.ticks - a.ticks,
    threadMs: threadsDeltaMs(a, b),
    hostSteal: b.host.steal - a.host.steal,
    hostTotal: b.host.total - a.host.total,
    wallMs: b.at - a.at,
  };
}

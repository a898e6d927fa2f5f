// Small helpers shared by the benchmark workloads: percentiles and a bounded-concurrency pool.

export function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

export function latencySummary(samples) {
  const s = [...samples].sort((a, b) => a - b);
  const f = (v) => `${v.toFixed(1)} ms`;
  return `p50 ${f(percentile(s, 50))}, p95 ${f(percentile(s, 95))}, p99 ${f(percentile(s, 99))}`;
}

/** Run `task(i)` for i in 0..count with at most `concurrency` in flight. */
export async function pool(count, concurrency, task) {
  let next = 0;
  const workers = Array.from({ length: Math.min(concurrency, count) }, async () => {
    while (next < count) {
      const i = next++;
      await task(i);
    }
  });
  await Promise.all(workers);
}

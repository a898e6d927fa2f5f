// Small helpers shared by the benchmark workloads: percentiles and a bounded-concurrency pool.

export function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

/** The median of unsorted `xs` (for an even count the lower middle, as `percentile`). */
export function median(xs) {
  return percentile([...xs].sort((a, b) => a - b), 50);
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

/**
 * The 97.5 % quantile of Student's t distribution with `df` degrees of freedom (the
 * two-sided 95 % interval), from a table up to 30 and a series in 1/df beyond (within
 * 0.001 of the exact value there).
 */
export function t975(df) {
  const table = [NaN, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.16, 2.145, 2.131, 2.12, 2.11, 2.101, 2.093, 2.086, 2.08, 2.074, 2.069, 2.064, 2.06, 2.056, 2.052, 2.048, 2.045, 2.042];
  if (!(df >= 1)) return NaN;
  if (df < table.length) return table[Math.floor(df)];
  const z = 1.959964;
  // Cornish-Fisher expansion of t in terms of the normal quantile.
  return z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2);
}

/**
 * The ratio of paired measurements `b[i] / a[i]` (each pair taken next to each other in
 * time, so the machine's drift cancels within a pair): their geometric mean and its 95 %
 * confidence interval from Student's t on the logarithms. `n` pairs; with fewer than two
 * (or any non-positive value) the interval is NaN.
 */
export function pairedRatio(a, b) {
  const n = Math.min(a.length, b.length);
  const logs = [];
  for (let i = 0; i < n; i++) logs.push(a[i] > 0 && b[i] > 0 ? Math.log(b[i] / a[i]) : NaN);
  const mean = logs.reduce((s, x) => s + x, 0) / n;
  if (n < 2 || !Number.isFinite(mean)) return { ratio: n === 1 ? Math.exp(mean) : NaN, low: NaN, high: NaN, n };
  const sd = Math.sqrt(logs.reduce((s, x) => s + (x - mean) ** 2, 0) / (n - 1));
  const half = t975(n - 1) * (sd / Math.sqrt(n));
  return { ratio: Math.exp(mean), low: Math.exp(mean - half), high: Math.exp(mean + half), n };
}

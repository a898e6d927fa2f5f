// The I/O bench's workflows (npm run bench -- io): steps that wait on the outside world,
// modelled as a timer in the step body (an API or a model call holding its delivery for
// `ms`). Every step body records its execution in globalThis.__stepExecutions (the app's
// GET /executions) as [tag, index, startedAt, endedAt], so the bench can count step bodies
// run more than once and the most that ran at once. Every workflow returns a value the
// bench checks (tests/conformance/bench/io.mjs `expectedOutput`).

/** Waits `ms` (the outside world), then returns `i + 1`. */
async function waitStep(tag: string, i: number, ms: number): Promise<number> {
  'use step';
  const g = globalThis as unknown as { __stepExecutions?: unknown[] };
  const entry: [string, number, number, number] = [tag, i, Date.now(), 0];
  (g.__stepExecutions ??= []).push(entry);
  await new Promise((resolve) => setTimeout(resolve, ms));
  entry[3] = Date.now();
  return i + 1;
}

/** `n` one-after-the-other steps of `ms` each: returns `${tag}:${1 + 2 + … + n}`. */
export async function ioSequential(tag: string, n: number, ms: number): Promise<string> {
  'use workflow';
  let sum = 0;
  for (let i = 0; i < n; i++) sum += await waitStep(tag, i, ms);
  return `${tag}:${sum}`;
}

/** `n` steps of `ms` each under one Promise.all: returns `${tag}:${1 + 2 + … + n}`. */
export async function ioParallel(tag: string, n: number, ms: number): Promise<string> {
  'use workflow';
  const values = await Promise.all(Array.from({ length: n }, (_, i) => waitStep(tag, i, ms)));
  return `${tag}:${values.reduce((a, b) => a + b, 0)}`;
}

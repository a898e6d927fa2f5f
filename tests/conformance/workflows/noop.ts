// Used by the suite's "idempotency": two rounds of parallel steps (5, then 15) whose
// results all reach the output exactly once each, however often the flow is replayed.
let calls = 0;

async function noop(_n: number): Promise<number> {
  'use step';
  calls += 1;
  return calls;
}

export async function brokenWf(): Promise<{ numbers: number[] }> {
  'use workflow';
  const first = await Promise.all([0, 1, 2, 3, 4].map((n) => noop(n)));
  const second = await Promise.all(Array.from({ length: 15 }, (_, k) => noop(100 + k)));
  return { numbers: [...first, ...second] };
}

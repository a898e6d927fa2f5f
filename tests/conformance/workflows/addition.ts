// Used by the suite's "runs an addition": one step, its result is the run's output.
async function add(x: number, y: number): Promise<number> {
  'use step';
  return x + y;
}

export async function addition(x: number, y: number): Promise<number> {
  'use workflow';
  return await add(x, y);
}

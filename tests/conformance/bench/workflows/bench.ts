// The workflow bench's workloads (npm run bench -- workflows): the shapes of the Workflow
// DevKit's standard benchmark, written for this repo. Steps do no simulated work, so a
// run's time is the runtime's and the World's.

async function step(i: number): Promise<number> {
  'use step';
  return i;
}

export async function noSteps(): Promise<string> {
  'use workflow';
  return 'done';
}

export async function sequential(n: number): Promise<number> {
  'use workflow';
  let sum = 0;
  for (let i = 0; i < n; i++) sum += await step(i);
  return sum;
}

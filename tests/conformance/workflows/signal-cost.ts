// Used by the suite's "sequential steps carrying an AbortSignal still run in a single flow
// invocation": N sequential steps, each given the same (never aborted) AbortSignal.
async function trivialStep(input: { abortSignal?: AbortSignal; index: number }): Promise<number> {
  'use step';
  return input.index;
}

export async function signalCostWorkflow(input: { count: number; withSignal: boolean }): Promise<string> {
  'use workflow';
  const controller = new AbortController();
  for (let index = 0; index < input.count; index++) {
    await trivialStep({ abortSignal: input.withSignal ? controller.signal : undefined, index });
  }
  return 'done';
}

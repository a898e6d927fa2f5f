// The chaos test's workflows (tests/conformance/chaos.mjs, tests/chaos.test.mjs): the shapes
// of the workflow bench — sequential steps, Promise.all of steps, sequential steps carrying a
// payload — each with a result that depends on every step's result, so that a lost, doubled
// or reordered step shows in the output. chaos/expected.mjs computes the same results.
//
// Every step body records one entry per execution in globalThis.__stepExecutions (read by
// the app server's GET /executions): the run, the step, the attempt the runtime gave it and
// the wall-clock time the body started, to find bodies that ran more than once and when.
import { getStepMetadata, getWorkflowMetadata } from 'workflow';

function record(name: string): void {
  const { stepId, attempt } = getStepMetadata();
  const { workflowRunId } = getWorkflowMetadata();
  const g = globalThis as unknown as { __stepExecutions?: unknown[] };
  (g.__stepExecutions ??= []).push({ runId: workflowRunId, stepId, attempt, name, at: Date.now() });
}

async function mixStep(acc: number, i: number, salt: number): Promise<number> {
  'use step';
  record('mixStep');
  return (acc * 31 + i * 7 + salt) % 1_000_003;
}

/** n sequential steps, each folding its index into the previous step's result. */
export async function chaosSequential(n: number, salt: number): Promise<number> {
  'use workflow';
  let acc = salt;
  for (let i = 0; i < n; i++) acc = await mixStep(acc, i, salt);
  return acc;
}

async function squareStep(i: number, salt: number): Promise<number> {
  'use step';
  record('squareStep');
  return i * i + salt;
}

/** n steps at once (Promise.all); the results in order. */
export async function chaosParallel(n: number, salt: number): Promise<number[]> {
  'use workflow';
  return await Promise.all(Array.from({ length: n }, (_, i) => squareStep(i, salt)));
}

async function rotateStep(payload: string, i: number): Promise<string> {
  'use step';
  record('rotateStep');
  const c = payload.charCodeAt(0) - 97;
  return payload.slice(1) + String.fromCharCode(97 + ((c + i) % 26));
}

/** n sequential steps passing a payload of `kb` KB from one to the next. */
export async function chaosPayload(n: number, kb: number, salt: number): Promise<string> {
  'use workflow';
  let p = '';
  for (let i = 0; i < kb * 1024; i++) p += String.fromCharCode(97 + ((i * 7 + salt) % 26));
  for (let i = 0; i < n; i++) p = await rotateStep(p, i);
  return p;
}

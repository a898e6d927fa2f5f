// The workflows `workflow inspect` looks at in tests/conformance/inspect.mjs: runs with a
// known number of steps, a run that fails in a step, and a run that waits on three hooks
// after writing to its output stream (it stays running while the CLI inspects it).
import { createHook, FatalError, getWritable } from 'workflow';

async function add(sum: number, i: number): Promise<number> {
  'use step';
  return sum + i;
}

/** `n` steps one after the other: returns 0 + 1 + … + (n − 1). */
export async function steps(n: number): Promise<number> {
  'use workflow';
  let sum = 0;
  for (let i = 0; i < n; i++) sum = await add(sum, i);
  return sum;
}

async function boom(): Promise<number> {
  'use step';
  throw new FatalError('inspect: this step always fails');
}

/** One step that fails fatally: the run fails. */
export async function fails(): Promise<number> {
  'use workflow';
  return await boom();
}

async function writeLines(out: WritableStream<{ line: string }>, lines: string[]): Promise<void> {
  'use step';
  const writer = out.getWriter();
  for (const line of lines) await writer.write({ line });
  await writer.close();
}

/**
 * Creates three hooks (tokens `<token>-0..2`, metadata {i}), writes two objects to its
 * output stream and closes it, then waits for the first hook.
 */
export async function waits(token: string): Promise<unknown> {
  'use workflow';
  const hooks = [0, 1, 2].map((i) => createHook<{ done: boolean }>({ token: `${token}-${i}`, metadata: { i } }));
  await writeLines(getWritable<{ line: string }>(), ['first', 'second']);
  return await hooks[0];
}

// Used by the suite's inline-execution tests, which count how often the flow handler is
// invoked for each shape: sequential steps, steps writing a stream, a sleep, Promise.all.
import { getWritable, sleep } from 'workflow';

async function add(x: number, y: number): Promise<number> {
  'use step';
  return x + y;
}

async function writeToStream(writable: WritableStream<Uint8Array>, text: string): Promise<string> {
  'use step';
  const writer = writable.getWriter();
  await writer.write(new TextEncoder().encode(text));
  writer.releaseLock();
  return text;
}

async function closeOutputStream(writable: WritableStream<Uint8Array>): Promise<void> {
  'use step';
  await writable.getWriter().close();
}

export async function sequentialStepsWorkflow(start: number): Promise<number> {
  'use workflow';
  let total = start;
  for (const n of [2, 3, 5]) total = await add(total, n);
  return total;
}

export async function sequentialStepsWithStreamWorkflow(): Promise<string> {
  'use workflow';
  const out = getWritable<Uint8Array>();
  const first = await writeToStream(out, 'hello');
  const second = await writeToStream(out, ' world');
  await closeOutputStream(out);
  return first + second;
}

export async function sleepWorkflow(): Promise<number> {
  'use workflow';
  await sleep('1s');
  return await add(1, 2);
}

export async function parallelStepsWorkflow(): Promise<number> {
  'use workflow';
  const [x, y] = await Promise.all([add(10, 1), add(20, 2)]);
  return x + y;
}

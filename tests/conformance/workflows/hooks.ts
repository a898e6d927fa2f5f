// Used by the suite's "hooks": a hook with metadata, resumed three times by the test (the
// third payload says done); each resume is echoed to the run's stream as a JSON line.
import { defineHook, getWritable } from 'workflow';
import * as z from 'zod';

const Hook = defineHook({
  schema: z.object({ data: z.string(), done: z.boolean().optional(), metadata: z.unknown() }),
});

async function writeEvent(writable: WritableStream<Uint8Array>, event: string, payload?: unknown) {
  'use step';
  const writer = writable.getWriter();
  await writer.write(new TextEncoder().encode(`${JSON.stringify({ event, payload })}\r\n`));
}

export async function collectWithHook(token: string, customData: string) {
  'use workflow';
  const hook = Hook.create({ token, metadata: { customData } });
  const out = getWritable<Uint8Array>();
  await writeEvent(out, 'hookCreated');
  const collected: unknown[] = [];
  for await (const payload of hook) {
    await writeEvent(out, 'hookResumed', payload);
    collected.push(payload);
    if (payload.done) break;
  }
  return { collected };
}

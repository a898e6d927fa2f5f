// The workflow bench's workloads (npm run bench -- workflows): the shapes of the Workflow
// DevKit's standard benchmark (a workflow with no steps, one step, sequential steps,
// Promise.all of steps, sequential steps carrying a 10 KB payload, a 50-chunk stream through
// a transform step), written for this repo. The DevKit's payload workload passes one 10 KB
// string of a single repeated character ('x') to every step, and each step hands back the
// string with its length and a checksum (`dataPayload`); `payload` (the `payload…rand`
// workloads) carries an incompressible payload instead, rotated by every step. Steps do no simulated work, so a run's time is
// the runtime's and the World's. Every workflow returns a value the bench checks
// (tests/conformance/bench/workflows.mjs has the expected values).
import { getWritable } from 'workflow';

async function step(i: number): Promise<number> {
  'use step';
  return i;
}

/** Returns `x * 2` without a step. */
export async function noSteps(x: number): Promise<number> {
  'use workflow';
  return x * 2;
}

/** One step: returns `x + 1`. */
export async function oneStep(x: number): Promise<number> {
  'use workflow';
  return (await step(x)) + 1;
}

/** `n` steps one after the other: returns 0 + 1 + … + (n − 1). */
export async function sequential(n: number): Promise<number> {
  'use workflow';
  let sum = 0;
  for (let i = 0; i < n; i++) sum += await step(i);
  return sum;
}

/** `n` steps under one Promise.all: returns 0 + 1 + … + (n − 1). */
export async function parallel(n: number): Promise<number> {
  'use workflow';
  const values = await Promise.all(Array.from({ length: n }, (_, i) => step(i)));
  return values.reduce((a, b) => a + b, 0);
}

/** A step that returns its input with the input's length and a checksum (first + last char codes). */
async function processData(data: string): Promise<{ data: string; len: number; checksum: number }> {
  'use step';
  return { data, len: data.length, checksum: data.charCodeAt(0) + data.charCodeAt(data.length - 1) };
}

/**
 * The DevKit's payload workload: `n` sequential steps, each given the same `size`-character
 * string of 'x' and returning it (with its length). Returns the last step's length.
 */
export async function dataPayload(n: number, size: number): Promise<number> {
  'use workflow';
  const data = 'x'.repeat(size);
  let len = 0;
  for (let i = 0; i < n; i++) len = (await processData(data)).len;
  return len;
}

/** A step that hands the payload on rotated left by one character. */
async function carry(payload: string): Promise<string> {
  'use step';
  return payload.slice(1) + payload[0];
}

function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/**
 * `n` sequential steps, each taking and returning a `size`-character payload (printable
 * ASCII from a fixed LCG seeded with `seed`). Returns the final payload's length and FNV-1a
 * hash: the payload rotated left by n.
 */
export async function payload(n: number, size: number, seed: number): Promise<{ length: number; fnv: number }> {
  'use workflow';
  let x = seed >>> 0;
  let p = '';
  for (let i = 0; i < size; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    p += String.fromCharCode(33 + (x >>> 24) % 94);
  }
  for (let i = 0; i < n; i++) p = await carry(p);
  return { length: p.length, fnv: fnv1a(p) };
}

/** A step that returns a stream of `n` chunks, `chunk <i>\n`. */
async function produce(n: number): Promise<ReadableStream<Uint8Array>> {
  'use step';
  const enc = new TextEncoder();
  let i = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (i < n) controller.enqueue(enc.encode(`chunk ${i++}\n`));
      else controller.close();
    },
  });
}

/**
 * A step that pipes a stream through a transform (each line upper-cased, with its length
 * appended) into the run's output stream, and returns how many lines it transformed.
 */
async function transform(input: ReadableStream<Uint8Array>, out: WritableStream<Uint8Array>): Promise<number> {
  'use step';
  const enc = new TextEncoder();
  const dec = new TextDecoder();
  let lines = 0;
  let rest = '';
  const upper = new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      const text = rest + dec.decode(chunk, { stream: true });
      const parts = text.split('\n');
      rest = parts.pop() ?? '';
      for (const line of parts) {
        lines++;
        controller.enqueue(enc.encode(`${line.toUpperCase()}/${line.length}\n`));
      }
    },
    flush(controller) {
      if (rest) {
        lines++;
        controller.enqueue(enc.encode(`${rest.toUpperCase()}/${rest.length}\n`));
      }
    },
  });
  await input.pipeThrough(upper).pipeTo(out);
  return lines;
}

/**
 * A stream of `n` chunks made by one step and transformed by another into the run's output
 * stream (read back through the run's readable). Returns the transformed line count.
 */
export async function stream(n: number): Promise<number> {
  'use workflow';
  const source = await produce(n);
  return await transform(source, getWritable<Uint8Array>());
}

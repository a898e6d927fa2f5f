// The DevKit bench's workflows (npm run bench -- devkit; tests/conformance/bench/devkit.mjs):
// the scenarios of the Workflow DevKit's current latency benchmark, written for this repo.
// Every figure comes from Date.now() inside step bodies on the app, against the app's own
// Date.now() right before start() (POST /start's `clientStart`), so the bench process's
// clock and its path to the app stay out of every window:
//
//   devkitStep          one no-op step (no hook: the runtime's turbo path)       → TTFS
//   devkitStream        one step writing 3 chunks to the run's output stream      → TTFS
//   devkitHookStream    a hook created (never awaited) before that step: the run
//                       leaves turbo at its first suspension                      → TTFS
//   devkitSequential    `count` no-op steps one after the other                   → STSO, WO
//   devkitSl            a reader step and a writer step in parallel on a stream of
//                       their own, behind a reader-ready barrier on a second one  → SL
//   devkitSo            the same pair, the writer emitting LLM-shaped token deltas
//                       at a fixed pace, the reader draining them all            → SO
//
// Each returns what the bench checks and computes from; nothing here asserts.

import { createHook, getWorkflowMetadata, getWritable } from 'workflow';
import { getRun } from 'workflow/api';

/** A step body's entry and exit (Date.now() on the app). */
export interface StepTiming {
  start: number;
  end: number;
}

async function noopStep(i: number): Promise<StepTiming> {
  'use step';
  const start = Date.now();
  void i;
  return { start, end: Date.now() };
}

/** Writes `n` chunks {seq, at} to the run's default output stream and closes it. */
async function streamingStep(n: number): Promise<StepTiming> {
  'use step';
  const start = Date.now();
  const out = getWritable<{ seq: number; at: number }>();
  const w = out.getWriter();
  for (let seq = 0; seq < n; seq++) await w.write({ seq, at: Date.now() });
  w.releaseLock();
  await out.close();
  return { start, end: Date.now() };
}

export async function devkitStep(): Promise<{ steps: StepTiming[] }> {
  'use workflow';
  return { steps: [await noopStep(0)] };
}

export async function devkitStream(): Promise<{ steps: StepTiming[] }> {
  'use workflow';
  return { steps: [await streamingStep(3)] };
}

export async function devkitHookStream(): Promise<{ steps: StepTiming[]; token: string }> {
  'use workflow';
  const hook = createHook<never>();
  const first = await streamingStep(3);
  return { steps: [first], token: hook.token };
}

export async function devkitSequential(count: number): Promise<{ steps: StepTiming[] }> {
  'use workflow';
  const steps: StepTiming[] = [];
  for (let i = 0; i < count; i++) steps.push(await noopStep(i));
  return { steps };
}

// ---- streams between two steps of one run ----

/** Writes one marker to the run's stream `namespace` and closes it. */
async function signal(namespace: string): Promise<void> {
  const s = getWritable<{ ready: true }>({ namespace });
  const w = s.getWriter();
  await w.write({ ready: true });
  w.releaseLock();
  await s.close();
}

/** Waits for the first chunk of the run's stream `namespace` (a retained one is fine). */
async function awaitSignal(namespace: string): Promise<void> {
  const { workflowRunId } = getWorkflowMetadata();
  const r = getRun(workflowRunId).getReadable<{ ready: true }>({ namespace }).getReader();
  try {
    await r.read();
  } finally {
    r.cancel().catch(() => {});
  }
}

/** SL's reader: starts its read of `sl`, then says it is ready on `sl-ready`, then stamps the first chunk's arrival. */
async function slReader(): Promise<{ writtenAt: number; readAt: number }> {
  'use step';
  const { workflowRunId } = getWorkflowMetadata();
  const r = getRun(workflowRunId).getReadable<{ writtenAt: number }>({ namespace: 'devkit-sl' }).getReader();
  try {
    const first = r.read(); // in flight before the writer is let go
    await signal('devkit-sl-ready');
    const { value } = await first;
    const readAt = Date.now();
    if (!value || typeof value.writtenAt !== 'number') throw new Error(`SL reader: first chunk ${JSON.stringify(value)}`);
    return { writtenAt: value.writtenAt, readAt };
  } finally {
    r.cancel().catch(() => {});
  }
}

/** SL's writer: once the reader is ready, one chunk stamped with its write time. */
async function slWriter(): Promise<void> {
  'use step';
  await awaitSignal('devkit-sl-ready');
  const s = getWritable<{ writtenAt: number }>({ namespace: 'devkit-sl' });
  const w = s.getWriter();
  await w.write({ writtenAt: Date.now() });
  w.releaseLock();
  await s.close();
}

export async function devkitSl(): Promise<{ sl: { writtenAt: number; readAt: number } }> {
  'use workflow';
  const [sl] = await Promise.all([slReader(), slWriter()]);
  return { sl };
}

/** SO's token deltas: variable-length words cycled (about 4.5 bytes each), as raw text or AI-SDK-style objects. */
const WORDS = ['A', ' model', ' streams', ' its', ' answer', ' one', ' token', ' at', ' a', ' time', ',', ' then', ' stops', '.\n'];

type Delta = string | { type: 'text-delta'; id: string; text: string };

function delta(mode: 'text' | 'structured', i: number): Delta {
  const text = WORDS[i % WORDS.length];
  return mode === 'structured' ? { type: 'text-delta', id: '0', text } : text;
}

/** SO's reader: the SL handshake, then reads the stream to its end and stamps that. */
async function soReader(): Promise<{ doneAt: number; received: number; bytes: number }> {
  'use step';
  const { workflowRunId } = getWorkflowMetadata();
  const r = getRun(workflowRunId).getReadable<Delta>({ namespace: 'devkit-so' }).getReader();
  try {
    const first = r.read();
    await signal('devkit-so-ready');
    let received = 0;
    let bytes = 0;
    for (let x = await first; !x.done; x = await r.read()) {
      received++;
      bytes += typeof x.value === 'string' ? x.value.length : x.value.text.length;
    }
    return { doneAt: Date.now(), received, bytes };
  } finally {
    r.cancel().catch(() => {});
  }
}

/**
 * SO's writer: once the reader is ready, `count` deltas, the i-th due at
 * writtenAt + (i + 1) × intervalMs (it sleeps only while ahead: time lost to a slow write
 * is not made up and shows in SO). The generation window is count × intervalMs.
 */
async function soWriter(count: number, intervalMs: number, mode: 'text' | 'structured'): Promise<{ writtenAt: number }> {
  'use step';
  await awaitSignal('devkit-so-ready');
  const s = getWritable<Delta>({ namespace: 'devkit-so' });
  const w = s.getWriter();
  const writtenAt = Date.now();
  for (let i = 0; i < count; i++) {
    const wait = writtenAt + (i + 1) * intervalMs - Date.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    await w.write(delta(mode, i));
  }
  w.releaseLock();
  await s.close();
  return { writtenAt };
}

export async function devkitSo(
  count: number,
  intervalMs: number,
  mode: 'text' | 'structured',
): Promise<{ so: { writtenAt: number; doneAt: number; received: number; bytes: number } }> {
  'use workflow';
  const [reader, writer] = await Promise.all([soReader(), soWriter(count, intervalMs, mode)]);
  return { so: { writtenAt: writer.writtenAt, doneAt: reader.doneAt, received: reader.received, bytes: reader.bytes } };
}

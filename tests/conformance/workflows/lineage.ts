// Used by the suite's lineage tests: start() called from a workflow body records the
// parent and root run ids on the child; each run returns the id of the run it started.
import { start } from 'workflow/api';

async function noop(): Promise<void> {
  'use step';
}

export async function spawnedChild(): Promise<string> {
  'use workflow';
  await noop();
  return 'done';
}

export async function bodyStartsChild(): Promise<string> {
  'use workflow';
  await noop();
  return (await start(spawnedChild, [])).runId;
}

export async function chainLeaf(): Promise<string> {
  'use workflow';
  await noop();
  return 'done';
}

export async function chainMiddle(): Promise<string> {
  'use workflow';
  await noop();
  return (await start(chainLeaf, [])).runId;
}

export async function chainRoot(): Promise<string> {
  'use workflow';
  await noop();
  return (await start(chainMiddle, [])).runId;
}

// The workflows the web UI test (tests/conformance/web-ui.mjs) needs besides those of
// inspect-workflows/inspect.ts (built into the same app with them): a run that sleeps, for
// the UI's "wake up" action.
import { sleep } from 'workflow';

async function note(what: string): Promise<string> {
  'use step';
  return what;
}

/** Sleeps for an hour (unless woken up), then returns 'woke'. */
export async function sleeps(label: string): Promise<string> {
  'use workflow';
  await note(label);
  await sleep('1h');
  return await note('woke');
}

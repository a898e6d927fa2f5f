// Used by the suite's "retriable and fatal errors": a step that asks to be retried after 2 s
// on its first attempt, then a step that fails fatally and is caught by the workflow.
import { FatalError, getStepMetadata, RetryableError } from 'workflow';

async function stepThatThrowsRetryableError() {
  'use step';
  const { attempt, stepStartedAt } = getStepMetadata();
  if (attempt === 1) throw new RetryableError('try again later', { retryAfter: '2s' });
  return { attempt, stepStartedAt, duration: Date.now() - stepStartedAt.getTime() };
}

async function stepThatFails(): Promise<void> {
  'use step';
  throw new FatalError('this step always fails');
}

export async function retryableAndFatalErrorWorkflow() {
  'use workflow';
  const retryableResult = await stepThatThrowsRetryableError();
  let gotFatalError = false;
  try {
    await stepThatFails();
  } catch (err) {
    gotFatalError = FatalError.is(err);
  }
  return { retryableResult, gotFatalError };
}

// Used by the suite's "supports null bytes in step results".
async function nullByteStep(): Promise<string> {
  'use step';
  return 'null byte \0';
}

export async function nullByteWorkflow(): Promise<string> {
  'use workflow';
  return await nullByteStep();
}

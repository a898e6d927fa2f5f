// The small bench scripts' checks (io-small.mjs, devkit-small.mjs): one line per check, then
// the closing `<label>: N passed, N failed` that scripts/test.mjs reads, and the exit code.

export function checks(label) {
  let passed = 0;
  let failed = 0;
  return {
    check(name, ok, detail) {
      if (ok) passed++;
      else failed++;
      console.log(`${ok ? "ok" : "FAIL"} - ${name}${detail ? ` (${detail})` : ""}`);
    },
    get failed() {
      return failed;
    },
    /** Prints the closing line and exits: 1 when a check failed. */
    finish() {
      console.log(`${label}: ${passed} passed, ${failed} failed`);
      process.exit(failed ? 1 : 0);
    },
  };
}

// The small bench scripts' checks (io-small.mjs, devkit-small.mjs, scale-small.mjs): their
// `--client` argument, one line per check, then the closing `<label>: N passed, N failed`
// that scripts/test.mjs reads, and the exit code.

import { CLIENTS } from "../lib/profile.mjs";

/**
 * The clients named by `--client` (0.3, 0.4, or `both` where `allowBoth`), `dflt` without
 * it; prints the usage of `script` and exits 2 on anything else.
 */
export function clientArg(script, dflt, { allowBoth = false } = {}) {
  const i = process.argv.indexOf("--client");
  const arg = i > 0 ? process.argv[i + 1] : dflt;
  const clients = allowBoth && arg === "both" ? Object.keys(CLIENTS) : [arg];
  if (!clients.every((c) => CLIENTS[c])) {
    console.error(`usage: node tests/conformance/bench/${script} [--client 0.3|0.4${allowBoth ? "|both" : ""}]`);
    process.exit(2);
  }
  return clients;
}

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

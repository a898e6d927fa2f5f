// Golden wire transcripts of the 0.3.0 client (shared/golden) replayed against the built
// worker; the suite's rules are in tests/lib/golden-suite.mjs, the replayer in
// tests/lib/golden.mjs. GOLDEN_DIR overrides the folder. `node scripts/golden.mjs <scenario>`
// replays outside the test runner with all failures.

import { goldenDir } from "./lib/golden.mjs";
import { DELIBERATE, defineGoldenSuite } from "./lib/golden-suite.mjs";

// Scenarios that must pass for `npm test` to be green.
export const EXPECTED_PASS = [
  "health",
  "router-errors",
  "router-nosecret",
  "router-nobinding",
  "streams",
  "index-do",
  "runs-core", "runs-steps", "runs-hooks", "runs-waits-attrs", "runs-pagination",
  "queue", "queue-deadletters",
  "retention",
];

defineGoldenSuite({
  dir: goldenDir(),
  set: "golden",
  expectedPass: EXPECTED_PASS,
  deliberate: DELIBERATE,
  missingHint: "set GOLDEN_DIR to the shared/golden folder",
});

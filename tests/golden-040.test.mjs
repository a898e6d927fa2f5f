// Golden wire transcripts of the 0.4.0 client (shared/golden-0.4) replayed against the same
// built worker and deployment configuration as the 0.3.0 set (one deployment serves both;
// issue #10). Format additions (binary bodies, long-poll async/await lines, cron lines, UUID
// masking and substitution) are in tests/lib/golden.mjs; rows that cannot hold together with
// the 0.3.0 set are listed in tests/golden-conflicts.json. GOLDEN040_DIR overrides the folder.
// `node scripts/golden.mjs --040 <scenario>` replays outside the test runner.

import { goldenDir040 } from "./lib/golden.mjs";
import { defineGoldenSuite } from "./lib/golden-suite.mjs";

// Scenarios that must pass for `npm test` to be green.
export const EXPECTED_PASS_040 = ["health-040", "router-040", "index-runs", "index-hooks", "runs-040", "streams-binary", "queue-040", "retention-040"];

defineGoldenSuite({
  dir: goldenDir040(),
  set: "golden-0.4",
  expectedPass: EXPECTED_PASS_040,
  missingHint: "set GOLDEN040_DIR to the shared/golden-0.4 folder",
});

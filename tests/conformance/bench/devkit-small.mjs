#!/usr/bin/env node
// The DevKit bench at small scale, as a test (tests/conformance/bench/devkit.mjs,
// devkitBench({scale: "small"})): every scenario of the DevKit's latency benchmark (TTFS
// step/stream/hook, STSO and WO of 12 sequential steps, SL, SO text and structured with 30
// deltas) a few times on our worker (default variables) through both real world-celld
// clients and runtime beta42. Checks that every run completed and every scenario gave its
// figures; it asserts no time (a shared 2-core machine). Prints one line per check and
// `devkit-small: N passed, N failed`; exits 1 when a check failed.
//
//   node tests/conformance/bench/devkit-small.mjs [--client 0.3|0.4|both]

import { devkitBench, formatDevkit, problems } from "./devkit.mjs";
import { checks, clientArg } from "./checks.mjs";

const clients = clientArg("devkit-small.mjs", "both", { allowBoth: true });

const checked = checks("devkit-small");
const check = checked.check;

let res;
try {
  res = await devkitBench({ scale: "small", clients, worlds: ["ours"], log: () => {} });
} catch (err) {
  check("the small DevKit bench ran", false, err?.stack || String(err));
}
if (res) {
  const bad = problems(res);
  for (const client of clients) {
    const c = res.clients[client];
    const mine = bad.filter((p) => p.includes(`through ${c.version}`));
    for (const s of res.scenarios) {
      const st = c.worlds.ours?.[s.name];
      const mineHere = mine.filter((p) => p.includes(`: ${s.name}`));
      const figures = st?.metrics ? Object.entries(st.metrics).map(([k, x]) => `${k} ${x.median.toFixed(1)} ms`).join(", ") : "";
      check(`client ${c.version}: ${s.name} (${s.label}): every run completed and gave its figures`, mineHere.length === 0 && st?.runs > 0 && st.failed === 0, mineHere.join("; ") || figures);
    }
  }
  if (checked.failed) console.log(formatDevkit(res));
}
checked.finish();
